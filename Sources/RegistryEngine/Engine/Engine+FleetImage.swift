import LMDB
import RegistryModel
import Synchronization

/// The replicated contents of a fleet replica at one log position (docs/fleet.md, "Compaction"):
/// what a node that can no longer follow the log from its own position (the entries it lacks were
/// trimmed) or that starts empty loads instead of the log's beginning.
///
/// It is the store's own records, not requests to replay: galleries and their registries with their
/// ids, every template with its id, registration time, source and qualities, the liveness profiles,
/// the algorithms they use and the id counters. A replica that loads it is, record for record, what
/// applying the log up to its position made of every other replica, so the entries after it decide
/// alike there (the same template ids, the same similar-face checks). Payloads are in it opened (a
/// node seals them again with its own store key, if it has one); the node seals the whole image
/// with the fleet key before it leaves the host.
///
/// Layout (little-endian): "RFI1", the store schema version u32, the position i64, the next
/// template id u64, the next registry and gallery ids u32 (0: none yet), then the `algorithms`,
/// `galleries` and `profiles` records (a u32 count, then per record a u32 key length, the key, a
/// u32 value length, the value), then the templates (a u64 count, then per template its id u64,
/// its record as stored (u32 length first) and its opened payload (u32 length first)), then the
/// CRC-32C of every byte before it.
enum FleetImage {
    static let magic = Array("RFI1".utf8)

    struct Decoded {
        var position: Int64
        var nextTemplateId: UInt64
        var nextRegistryId: UInt32
        var nextGalleryId: UInt32
        var algorithms: [(key: [UInt8], value: [UInt8])] = []
        var galleries: [(key: [UInt8], value: [UInt8])] = []
        var profiles: [(key: [UInt8], value: [UInt8])] = []
        var templates: [(id: UInt64, record: TemplateRecord, payload: [UInt8])] = []
    }

    struct Damaged: Error, CustomStringConvertible {
        let description: String
    }

    static func decode(_ bytes: [UInt8]) throws(Damaged) -> Decoded {
        do {
            return try bytes.withUnsafeBytes { buffer throws in
                guard buffer.count >= 4 + Self.magic.count, Array(buffer.prefix(Self.magic.count)) == Self.magic else {
                    throw Damaged(description: "the fleet's state image is not one this registryd writes")
                }
                var crc = CRC32C()
                crc.update(Array(buffer.dropLast(4)))
                guard crc.value == buffer.loadUnaligned(fromByteOffset: buffer.count - 4, as: UInt32.self).littleEndian else {
                    throw Damaged(description: "the fleet's state image does not match its checksum")
                }
                var reader = ByteReader(UnsafeRawBufferPointer(rebasing: buffer[Self.magic.count..<(buffer.count - 4)]))
                let schema = try reader.read(UInt32.self)
                guard schema == Store.schemaVersion else {
                    throw Damaged(
                        description: "the fleet's state image is of store schema \(schema), this registryd's is \(Store.schemaVersion): "
                            + "the nodes of a fleet run the same registryd release")
                }
                var image = Decoded(
                    position: try reader.read(Int64.self), nextTemplateId: try reader.read(UInt64.self),
                    nextRegistryId: try reader.read(UInt32.self), nextGalleryId: try reader.read(UInt32.self))
                func bytes() throws -> [UInt8] { Array(try reader.readBytes(Int(try reader.read(UInt32.self)))) }
                func records() throws -> [(key: [UInt8], value: [UInt8])] {
                    let count = Int(try reader.read(UInt32.self))
                    // Each record takes at least its two lengths: a count past that is damage, not a reservation.
                    guard count <= reader.remaining / 8 else { throw Damaged(description: "the fleet's state image claims \(count) records") }
                    return try (0..<count).map { _ in (try bytes(), try bytes()) }
                }
                image.algorithms = try records()
                image.galleries = try records()
                image.profiles = try records()
                let templates = try reader.read(UInt64.self)
                guard templates <= UInt64(reader.remaining / 16) else {
                    throw Damaged(description: "the fleet's state image claims \(templates) templates")
                }
                image.templates.reserveCapacity(Int(templates))
                var previous: UInt64 = 0
                for _ in 0..<templates {
                    let id = try reader.read(UInt64.self)
                    let record = try bytes()
                    guard id > previous else { throw Damaged(description: "the fleet's state image has template \(id) after \(previous)") }
                    previous = id
                    let decoded = try record.withUnsafeBytes { try TemplateRecord(decoding: $0, id: id) }
                    image.templates.append((id, decoded, try bytes()))
                }
                guard reader.remaining == 0 else { throw Damaged(description: "the fleet's state image has bytes after its templates") }
                return image
            }
        } catch let error as Damaged {
            throw error
        } catch {
            throw Damaged(description: "the fleet's state image is damaged: \(error)")
        }
    }
}

extension Engine {
    // MARK: Fleet state images

    /// The replica's contents at its log position, as a ``FleetImage`` (payloads opened), read in
    /// one read transaction, so they are exactly what the entries up to the position made.
    /// - Returns: the position and the image's bytes.
    public func fleetImage() async throws -> (position: Int64, bytes: [UInt8]) {
        try await self.readStore { txn in
            var writer = ByteWriter(capacity: 1 << 16)
            writer.append(bytes: FleetImage.magic)
            writer.append(Store.schemaVersion)
            let position = Int64(try self.store.readUInt64(txn, Keys.fleetPosition) ?? 0)
            writer.append(position)
            writer.append(try self.store.readUInt64(txn, Keys.nextTemplateId) ?? 1)
            writer.append(try self.store.readUInt32(txn, Keys.nextRegistryId) ?? 0)
            writer.append(try self.store.readUInt32(txn, Keys.nextGalleryId) ?? 0)
            func lengthPrefixed(_ bytes: UnsafeRawBufferPointer) {
                writer.append(UInt32(bytes.count))
                writer.append(bytes: bytes)
            }
            for database in [self.store.algorithms, self.store.galleries, self.store.profiles] {
                writer.append(UInt32(try txn.count(database)))
                try txn.forEach(database) { key, value in
                    lengthPrefixed(key)
                    lengthPrefixed(value)
                    return .continue
                }
            }
            writer.append(UInt64(try txn.count(self.store.templates)))
            try txn.forEach(self.store.templates) { key, value in
                let id = try Store.templateId(key)
                writer.append(id)
                lengthPrefixed(value)
                // Checked against the record's checksum and opened: the image carries what was
                // registered, whatever this node's own store key.
                try self.store.payload(txn, id: id).withUnsafeBytes(lengthPrefixed)
                return .continue
            }
            var crc = CRC32C()
            crc.update(writer.bytes)
            writer.append(crc.value)
            return (position, writer.bytes)
        }
    }

    /// Replaces the replica's contents with `image` (``fleetImage()`` of another replica), in one
    /// commit that also records the image's position: galleries, templates, payloads and profiles
    /// removed (and erased as every removal is), the image's written, the index rebuilt from the
    /// store. The node's own housekeeping stays (audit trail, store key, fleet identity).
    /// - Returns: the image's position, from which the node follows the log.
    /// - Throws: ``RegistryError`` for a damaged image, one of another store schema, or one whose
    ///   algorithms this node's configuration does not define alike (nothing is changed then).
    @discardableResult
    public func loadFleetImage(_ bytes: [UInt8]) async throws -> Int64 {
        let image: FleetImage.Decoded
        do throws(FleetImage.Damaged) {
            image = try FleetImage.decode(bytes)
        } catch {
            throw RegistryError(.internal, error.description)
        }
        try self.check(image)
        // Not a request of the log: the state the log folds to, which replaces what the store had.
        try await self.write(exclusive: true, local: true) { txn, context in
            for database in [self.store.galleries, self.store.templates, self.store.vectors, self.store.identifiers, self.store.profiles] {
                try txn.empty(database)
            }
            for (key, value) in image.algorithms { try txn.put(self.store.algorithms, key: key, value: value) }
            for (key, value) in image.galleries { try txn.put(self.store.galleries, key: key, value: value) }
            for (key, value) in image.profiles { try txn.put(self.store.profiles, key: key, value: value) }
            for (id, record, payload) in image.templates { try self.store.putTemplate(txn, id: id, record: record, payload: payload) }
            try self.store.writeInteger(txn, Keys.nextTemplateId, image.nextTemplateId)
            if image.nextRegistryId > 0 { try self.store.writeInteger(txn, Keys.nextRegistryId, image.nextRegistryId) }
            if image.nextGalleryId > 0 { try self.store.writeInteger(txn, Keys.nextGalleryId, image.nextGalleryId) }
            try self.store.writeInteger(txn, Keys.fleetPosition, UInt64(image.position))
            // What this node's configuration says of each algorithm must agree with the image's.
            try self.reconcileAlgorithms(txn)
            context.record(.reload)
        }
        if let failure = self.reloadFailure.withLock({ $0.take() }) {
            throw RegistryError(
                .internal,
                "the fleet's state at position \(image.position) is in the store, but the index could not be rebuilt from it (\(failure)): "
                    + "restart the daemon")
        }
        return image.position
    }

    /// Refuses, before anything is written, an image the index could not be built from: a template
    /// of a registry no gallery of the image has, or whose payload is not its algorithm's size (in
    /// this node's configuration), a gallery record that does not read.
    private func check(_ image: FleetImage.Decoded) throws {
        var registries: [UInt32: (gallery: UInt32, payload: Int)] = [:]
        for (key, value) in image.galleries {
            let name = String(decoding: key, as: UTF8.self)
            guard let record = try? value.withUnsafeBytes({ try GalleryRecord(decoding: $0) }) else {
                throw RegistryError(.internal, "the fleet's state image has a gallery record that does not read ('\(Names.loggable(name))')")
            }
            for registry in record.registries {
                guard let algorithm = try? self.catalog.algorithm(version: registry.algorithm) else {
                    throw RegistryError(
                        .unknownAlgorithm,
                        "the fleet's state has gallery '\(Names.loggable(name))' with algorithm \(registry.algorithm), which this node's configuration "
                            + "does not define: give every node of the fleet the same algorithms")
                }
                registries[registry.id] = (record.id, PreparedTemplate.payloadSize(of: algorithm))
            }
        }
        for (id, record, payload) in image.templates {
            guard let registry = registries[record.registryId], registry.gallery == record.galleryId else {
                throw RegistryError(
                    .internal, "the fleet's state image has template \(id) in registry \(record.registryId), which no gallery of it has")
            }
            guard payload.count == registry.payload else {
                throw RegistryError(
                    .internal,
                    "the fleet's state image has template \(id) of \(payload.count) payload bytes, where its algorithm has \(registry.payload)")
            }
        }
    }

    /// The index rebuilt from the store after a ``loadFleetImage(_:)`` commit, under the index's
    /// write lock (on the writer thread, after the commit). A failure leaves the index empty and is
    /// told to the load's caller.
    func reloadIndex() {
        self.state = [:]
        do {
            _ = try self.load()
        } catch {
            self.state = [:]
            self.reloadFailure.withLock { $0 = "\(error)" }
        }
    }
}
