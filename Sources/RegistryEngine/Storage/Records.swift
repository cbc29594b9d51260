import RegistryModel

/// The on-disk records of schema version 3 (see ``Store/migrations`` for versions 1 and 2). Integers in values are little-endian; keys are big-endian
/// so that LMDB's byte order is numeric order.
///
/// ```
/// meta         "schema_version" -> u32 | "next_template_id" -> u64 | "next_registry_id" -> u32 | "next_gallery_id" -> u32
///              | "encryption_check" -> AES-GCM sealed known text (encrypted stores; payloads are then sealed)
/// algorithms   u32 version -> AlgorithmRecord (what stored registries were created with)
/// galleries    name (UTF-8) -> GalleryRecord
/// templates    u64 template id -> TemplateRecord, with checksums (ids grow in registration order: appends)
/// vectors      u64 (template id << 8 | part) -> payload part (see VectorLayout)
/// identifiers  u32 gallery id, identifier, 0x00, u64 template id -> u32 registry id
/// profiles     u32 gallery id, identifier -> liveness profile (erased with the identifier)
/// audit        u64 time µs, u32 sequence -> AuditEntry (oldest first; trimmed by the retention)
/// ```
enum Keys {
    static let schemaVersion = Array("schema_version".utf8)
    static let nextTemplateId = Array("next_template_id".utf8)
    static let nextRegistryId = Array("next_registry_id".utf8)
    static let nextGalleryId = Array("next_gallery_id".utf8)
    /// The key check of an encrypted store: a known plaintext sealed with the key (absent: not encrypted).
    static let encryptionCheck = Array("encryption_check".utf8)
    /// The token of the index snapshot written at the last clean close (absent: none may be used).
    static let snapshotToken = Array("snapshot_token".utf8)
    /// The audit trail's entry count (u64; absent means 0), kept for its retention.
    static let auditEntries = Array("audit_entries".utf8)
    /// The stored size of the audit trail's blocks together (u64; absent: not counted yet, counted at
    /// the next flush), kept for its retention by bytes.
    static let auditBytes = Array("audit_bytes".utf8)
    /// The last commit made only so that a removal's freed pages can be erased (u64 transaction id).
    static let erasureCommit = Array("erasure_commit".utf8)
    /// Fleet mode: the fleet the store is a replica of (i64 bit pattern; absent: standalone), and the
    /// last log position applied (u64; absent: none), written in the commit that applied it.
    static let fleetId = Array("fleet_id".utf8)
    static let fleetPosition = Array("fleet_position".utf8)

    static func template(_ id: UInt64) -> [UInt8] { [UInt8](bigEndian: id) }

    static func vectorPart(_ id: UInt64, part: Int) -> [UInt8] { [UInt8](bigEndian: id << 8 | UInt64(part)) }

    /// Prefix of every identifier-index key of a gallery.
    static func galleryPrefix(_ galleryId: UInt32) -> [UInt8] { [UInt8](bigEndian: galleryId) }

    /// Prefix of every identifier-index key of one identifier (the 0x00 ends the identifier, which
    /// cannot contain control characters, so no identifier's prefix matches another's).
    static func identifierPrefix(_ galleryId: UInt32, _ identifier: String) -> [UInt8] {
        var key = self.galleryPrefix(galleryId)
        key.append(contentsOf: identifier.utf8)
        key.append(0)
        return key
    }

    static func identifierEntry(_ galleryId: UInt32, _ identifier: String, _ templateId: UInt64) -> [UInt8] {
        self.identifierPrefix(galleryId, identifier) + [UInt8](bigEndian: templateId)
    }

    static func profile(_ galleryId: UInt32, _ identifier: String) -> [UInt8] {
        self.galleryPrefix(galleryId) + Array(identifier.utf8)
    }
}

/// A stored template's metadata (the `templates` value).
///
/// Schema 3 layout: registry id u32, gallery id u32, registered-at µs i64, source u8, capture quality
/// f32 (NaN: none), identifier (u16 length + UTF-8), landmark quality f32 (NaN: none), payload checksum
/// u32 (CRC-32C of the payload's stored bytes, all parts in order: sealed bytes in an encrypted store),
/// record checksum u32 (CRC-32C of the template id, big-endian, and every byte before it, so a record
/// moved to another key fails too). Schema 2 stopped after the landmark quality; schema 1 had no
/// landmark quality and kept the landmark quality in the capture-quality slot (see the migrations).
struct TemplateRecord: Sendable, Equatable {
    var registryId: UInt32
    var galleryId: UInt32
    var registeredAt: Int64
    var source: TemplateSource
    /// The capture quality score (the capture quality design), when the face carried capture metadata.
    var quality: Float?
    var identifier: String
    /// The landmark symmetry/coverage score (the CoMa landmark matcher), for landmark templates.
    var landmarkQuality: Float?
    /// CRC-32C of the payload as stored (see ``Store/putTemplate(_:id:record:payload:)``).
    var payloadChecksum: UInt32 = 0

    /// The schema 2 fields (what schema 3 checksums), as schema 2 stored them.
    func encodedFields() -> [UInt8] {
        var writer = ByteWriter(capacity: 36 + self.identifier.utf8.count)
        writer.append(self.registryId)
        writer.append(self.galleryId)
        writer.append(self.registeredAt)
        writer.append(self.source.rawValue)
        writer.append(self.quality ?? .nan)
        writer.append(string: self.identifier)
        writer.append(self.landmarkQuality ?? .nan)
        return writer.bytes
    }

    /// The schema 3 record of template `id`: the fields, the payload checksum and the record checksum.
    func encoded(id: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 36 + self.identifier.utf8.count)
        writer.append(bytes: self.encodedFields())
        writer.append(self.payloadChecksum)
        let checksum = writer.bytes.withUnsafeBytes { Self.recordChecksum(id: id, $0) }
        writer.append(checksum)
        return writer.bytes
    }

    /// CRC-32C of the big-endian id, then `bytes`. Over the buffers as they are: the start-up load
    /// checks a million records, and copying each into an array first was a third of decoding one.
    private static func recordChecksum(id: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32C()
        withUnsafeBytes(of: id.bigEndian) { crc.update($0) }
        crc.update(bytes)
        return crc.value
    }

    init(
        registryId: UInt32, galleryId: UInt32, registeredAt: Int64, source: TemplateSource, quality: Float?,
        identifier: String, landmarkQuality: Float? = nil
    ) {
        self.registryId = registryId
        self.galleryId = galleryId
        self.registeredAt = registeredAt
        self.source = source
        self.quality = quality
        self.identifier = identifier
        self.landmarkQuality = landmarkQuality
    }

    /// Decodes the record of template `id` written with schema `version`: for schema 3, only after its
    /// record checksum matched (a schema 1 record decodes as schema 2 does, without landmark quality).
    /// - Throws: ``StoreCorruption`` naming the template id (never its data).
    init(decoding bytes: UnsafeRawBufferPointer, id: UInt64, schema version: UInt32 = Store.schemaVersion) throws(StoreCorruption) {
        var fields = bytes
        if version >= 3 {
            guard bytes.count >= 8,
                bytes.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self).littleEndian
                    == Self.recordChecksum(id: id, UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 4)]))
            else { throw StoreCorruption("template \(id): its record does not match its checksum") }
            self.payloadChecksum = bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt32.self).littleEndian
            fields = UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 8)])
        }
        var reader = ByteReader(fields)
        let source: UInt8
        do {
            self.registryId = try reader.read()
            self.galleryId = try reader.read()
            self.registeredAt = try reader.read()
            source = try reader.read()
            let quality = try reader.read(Float.self)
            self.quality = quality.isNaN ? nil : quality
            self.identifier = try reader.readString()
            let landmarkQuality = reader.remaining >= 4 ? try reader.read(Float.self) : .nan
            self.landmarkQuality = landmarkQuality.isNaN ? nil : landmarkQuality
        } catch {
            throw StoreCorruption("template \(id): truncated record")
        }
        guard reader.remaining == 0 else { throw StoreCorruption("template \(id): \(reader.remaining) bytes after its record") }
        guard let decoded = TemplateSource(rawValue: source) else { throw StoreCorruption("template \(id): unknown source \(source)") }
        self.source = decoded
    }
}

/// A gallery, its registries in priority order and its capture-gate policy (the `galleries` value).
///
/// Schema 2 layout: id u32, registry count u16, per registry (id u32, algorithm u32, thresholds 3 × f32,
/// minimum quality f32, minimum auto-enrolment quality f32; NaN: none), liveness policy u8 (bit 0
/// authenticate, 1 identify, 2 register, 3 strict), liveness k f32. Schema 1 stopped after the thresholds.
struct GalleryRecord: Sendable, Equatable {
    struct Registry: Sendable, Equatable {
        var id: UInt32
        var algorithm: UInt32
        var thresholds: Thresholds
        var minimumQuality: Float? = nil
        var minimumAutoEnrolmentQuality: Float? = nil
    }

    var id: UInt32
    var registries: [Registry]
    var liveness: LivenessPolicy = .none
    var livenessK: Float = GalleryConfiguration.defaultLivenessK

    func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.append(self.id)
        writer.append(UInt16(self.registries.count))
        for registry in self.registries {
            writer.append(registry.id)
            writer.append(registry.algorithm)
            writer.append(registry.thresholds.authentication)
            writer.append(registry.thresholds.identification)
            writer.append(registry.thresholds.autoEnrolment)
            writer.append(registry.minimumQuality ?? .nan)
            writer.append(registry.minimumAutoEnrolmentQuality ?? .nan)
        }
        var policy: UInt8 = 0
        if self.liveness.authenticate { policy |= 1 }
        if self.liveness.identify { policy |= 2 }
        if self.liveness.register { policy |= 4 }
        if self.liveness.strict { policy |= 8 }
        writer.append(policy)
        writer.append(self.livenessK)
        return writer.bytes
    }

    init(id: UInt32, registries: [Registry], liveness: LivenessPolicy = .none, livenessK: Float = GalleryConfiguration.defaultLivenessK) {
        self.id = id
        self.registries = registries
        self.liveness = liveness
        self.livenessK = livenessK
    }

    /// Decodes a record of schema `version` (1 or 2).
    init(decoding bytes: UnsafeRawBufferPointer, schema version: UInt32 = Store.schemaVersion) throws(StoreCorruption) {
        var reader = ByteReader(bytes)
        do {
            self.id = try reader.read()
            let count: UInt16 = try reader.read()
            self.registries = []
            for _ in 0..<count {
                let id: UInt32 = try reader.read()
                let algorithm: UInt32 = try reader.read()
                let thresholds = Thresholds(
                    authentication: try reader.read(Float.self),
                    identification: try reader.read(Float.self),
                    autoEnrolment: try reader.read(Float.self))
                var registry = Registry(id: id, algorithm: algorithm, thresholds: thresholds)
                if version >= 2 {
                    let minimum = try reader.read(Float.self)
                    let autoMinimum = try reader.read(Float.self)
                    registry.minimumQuality = minimum.isNaN ? nil : minimum
                    registry.minimumAutoEnrolmentQuality = autoMinimum.isNaN ? nil : autoMinimum
                }
                self.registries.append(registry)
            }
            if version >= 2 {
                let policy: UInt8 = try reader.read()
                self.liveness = LivenessPolicy(
                    authenticate: policy & 1 != 0, identify: policy & 2 != 0, register: policy & 4 != 0, strict: policy & 8 != 0)
                self.livenessK = try reader.read(Float.self)
            }
        } catch {
            throw StoreCorruption("truncated gallery record")
        }
    }
}

/// What an algorithm was when registries of it were created (the `algorithms` value), so that a
/// configuration that later changes its shape is refused instead of misreading stored templates.
struct AlgorithmRecord: Sendable, Equatable {
    var algorithm: Algorithm

    func encoded() -> [UInt8] {
        var writer = ByteWriter()
        switch self.algorithm.kind {
        case .vector(let dimension):
            writer.append(UInt8(0))
            writer.append(UInt32(dimension))
        case .landmarks(let matcher):
            // 1 = the CoMa matcher (the only landmark kind before version 1001), 2 = aligned.
            writer.append(UInt8(matcher == .coma ? 1 : 2))
            writer.append(UInt32(LandmarkVocabulary.count))
        }
        writer.append(string: self.algorithm.scoreFunction.rawValue)
        writer.append(self.algorithm.defaultThreshold)
        writer.append(string: self.algorithm.name)
        return writer.bytes
    }

    init(_ algorithm: Algorithm) {
        self.algorithm = algorithm
    }

    init(version: UInt32, decoding bytes: UnsafeRawBufferPointer) throws(StoreCorruption) {
        var reader = ByteReader(bytes)
        do {
            let kind: UInt8 = try reader.read()
            let dimension: UInt32 = try reader.read()
            guard let scoreFunction = ScoreFunction(rawValue: try reader.readString()) else {
                throw StoreCorruption("unknown score function for algorithm \(version)")
            }
            let threshold = try reader.read(Float.self)
            let name = try reader.readString()
            let templateKind: TemplateKind
            switch kind {
            case 0: templateKind = .vector(dimension: Int(dimension))
            case 1: templateKind = .landmarks(.coma)
            case 2: templateKind = .landmarks(.aligned)
            default: throw StoreCorruption("unknown template kind \(kind) for algorithm \(version)")
            }
            self.algorithm = Algorithm(
                version: version, name: name,
                kind: templateKind,
                scoreFunction: scoreFunction, defaultThreshold: threshold)
        } catch let error as StoreCorruption {
            throw error
        } catch {
            throw StoreCorruption("truncated algorithm record")
        }
    }

    /// Whether stored templates of `stored` can be read and compared as `configured`: same kind,
    /// dimension and score function (names and default thresholds may change).
    static func isCompatible(stored: Algorithm, configured: Algorithm) -> Bool {
        stored.kind == configured.kind && stored.scoreFunction == configured.scoreFunction
    }
}

/// A stored record that cannot be decoded: the store was damaged or written by other software.
struct StoreCorruption: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// How a template's payload is split across `vectors` entries so that disk bytes per template stay
/// close to the template's size (README, storage).
///
/// LMDB moves a value that does not fit half a page into overflow pages, whole pages each: a 2,048-byte
/// (512-float) template would take 4 KiB on 4 KiB pages. Instead the payload is cut into equal parts
/// small enough to stay in leaf pages, choosing the part count whose parts pack pages best. Template
/// ids only grow, so parts are appended (`MDB_APPEND`) and leaf pages fill completely.
enum VectorLayout {
    /// Bytes of one part for a payload of `payloadBytes` on pages of `pageSize` bytes.
    static func partSize(payloadBytes: Int, pageSize: Int) -> Int {
        let usable = pageSize - 16  // page header
        let nodeMax = (usable / 2) & ~1  // LMDB's limit for a value kept in a leaf page
        let perNodeOverhead = 8 + 8 + 2  // node header, 8-byte key, slot pointer
        var best = (pages: Double.infinity, size: payloadBytes)
        for parts in 1...64 {
            let size = (payloadBytes + parts - 1) / parts
            guard 8 + 8 + size <= nodeMax else { continue }
            let perPage = usable / (size + perNodeOverhead + (size & 1))
            let pages = Double(parts) / Double(perPage)
            if pages < best.pages - 1e-9 { best = (pages, size) }
        }
        return best.size
    }
}
