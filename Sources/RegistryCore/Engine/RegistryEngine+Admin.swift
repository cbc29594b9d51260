import LMDB
import Locks

extension RegistryEngine {
    // MARK: Galleries

    /// The galleries, by name.
    public func galleries() -> [GalleryInfo] {
        self.indexLock.withReadLock {
            self.state.values.sorted { $0.name < $1.name }.map(Self.info)
        }
    }

    /// One gallery.
    /// - Throws: ``RegistryError`` (`unknownGallery`).
    public func gallery(_ name: String) throws(RegistryError) -> GalleryInfo {
        try self.indexLock.withReadLock { () throws(RegistryError) in Self.info(try self.gallery(named: name)) }
    }

    private static func info(_ gallery: GalleryIndex) -> GalleryInfo {
        GalleryInfo(
            name: gallery.name,
            registries: gallery.registries.map {
                RegistryInfo(
                    algorithm: $0.algorithm, thresholds: $0.thresholds, templateCount: $0.count,
                    identifierCount: $0.identifierCount)
            },
            identifierCount: gallery.identifierCount)
    }

    /// Creates a gallery, or reconfigures an existing one: registry order (priority), thresholds, new
    /// registries. A registry left out must be empty.
    /// - Throws: ``RegistryError`` (`malformedRequest`, `unknownAlgorithm`).
    @discardableResult
    public func defineGallery(_ configuration: GalleryConfiguration) async throws -> GalleryInfo {
        try Names.validateGallery(configuration.name)
        try await self.write(exclusive: true) { txn, context in
            let existing = self.state[configuration.name]
            let (record, algorithms) = try self.writeGallery(txn, configuration, existing: existing)
            context.record(.defineGallery(name: configuration.name, id: record.id, registries: record.registries, algorithms: algorithms))
        }
        return try self.gallery(configuration.name)
    }

    /// Deletes a gallery with every template and liveness profile in it. `default` cannot be deleted
    /// (it always exists); delete its identifiers instead.
    /// - Returns: the number of templates erased.
    public func deleteGallery(_ name: String) async throws -> Int {
        try Names.validateGallery(name)
        guard name != GalleryConfiguration.defaultName else {
            throw RegistryError.malformedRequest("the default gallery always exists and cannot be deleted")
        }
        return try await self.write(exclusive: true) { txn, context in
            let gallery = try self.gallery(named: name)
            let ids = try self.store.templateIds(txn, galleryId: gallery.id)
            for id in ids { try self.store.deleteTemplate(txn, id: id) }
            try self.store.deleteProfiles(txn, galleryId: gallery.id)
            try self.store.deleteGalleryRecord(txn, name: name)
            context.record(.deleteGallery(name: name))
            return ids.count
        }
    }

    /// Bytes of the store's map in use (LMDB pages up to the last one written).
    public var storeBytesInUse: Int { self.store.environment.usedBytes }

    // MARK: Deletion

    /// Deletes one template of a gallery.
    /// - Returns: whether it existed (in that gallery).
    public func deleteTemplate(gallery name: String = GalleryConfiguration.defaultName, id: UInt64) async throws -> Bool {
        try Names.validateGallery(name)
        return try await self.write { txn, context in
            let gallery = try self.gallery(named: name)
            guard let record = try self.store.templateRecord(txn, id: id), record.galleryId == gallery.id else { return false }
            try self.store.deleteTemplate(txn, id: id)
            context.record(.remove(id: id, galleryId: gallery.id, registryId: record.registryId))
            return true
        }
    }

    /// Erases an identifier from a gallery: its templates in every registry and its liveness profile.
    /// - Returns: the number of templates erased (0 when it was not registered).
    public func deleteIdentifier(gallery name: String = GalleryConfiguration.defaultName, identifier: String) async throws -> Int {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        return try await self.write { txn, context in
            let gallery = try self.gallery(named: name)
            let ids = try self.store.templateIds(txn, galleryId: gallery.id, identifier: identifier)
            for id in ids {
                guard let record = try self.store.deleteTemplate(txn, id: id) else { continue }
                context.record(.remove(id: id, galleryId: gallery.id, registryId: record.registryId))
            }
            try self.store.deleteProfile(txn, galleryId: gallery.id, identifier: identifier)
            return ids.count
        }
    }

    // MARK: Listing

    /// A read transaction whose storage errors surface as ``RegistryError``s (`SHUTTING_DOWN` once closed).
    private func readStore<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        do {
            return try self.store.environment.read(body)
        } catch let error as LMDBError {
            throw RegistryError.storage(error)
        }
    }

    /// A page of a gallery's identifiers in byte order, starting after `after`.
    /// - Parameters:
    ///   - limit: page size, 1...10,000.
    public func identifiers(
        gallery name: String = GalleryConfiguration.defaultName,
        after: String? = nil,
        limit: Int = 100
    ) throws -> IdentifierPage {
        guard (1...10_000).contains(limit) else { throw RegistryError.malformedRequest("limit must be within 1...10000") }
        let galleryId = try self.indexLock.withReadLock { () throws(RegistryError) in try self.gallery(named: name).id }
        let (identifiers, more) = try self.readStore { txn in
            try self.store.identifierPage(txn, galleryId: galleryId, after: after, limit: limit)
        }
        return IdentifierPage(identifiers: identifiers, next: more ? identifiers.last : nil)
    }

    /// An identifier's templates, in registration order: metadata, and the templates themselves when
    /// `includeData` (an admin export; vectors as stored).
    /// - Throws: ``RegistryError`` (`identifierNotRegistered` when it has none).
    public func templates(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        includeData: Bool = false
    ) throws -> [StoredTemplate] {
        try Names.validateIdentifier(identifier)
        let (galleryId, algorithmOf) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return (gallery.id, Dictionary(uniqueKeysWithValues: gallery.registries.map { ($0.id, $0.algorithm) }))
        }
        let result = try self.readStore { txn in
            try self.store.templateIds(txn, galleryId: galleryId, identifier: identifier).compactMap { id -> StoredTemplate? in
                guard let record = try self.store.templateRecord(txn, id: id), let algorithm = algorithmOf[record.registryId] else {
                    return nil
                }
                var template: FaceTemplate?
                if includeData {
                    let payload = try self.store.payload(txn, id: id)
                    let data = payload.withUnsafeBytes { PreparedTemplate.decodePayload($0, algorithm: algorithm) }
                    template = FaceTemplate(algorithm: algorithm.version, data: data)
                }
                return StoredTemplate(
                    id: id, identifier: identifier, algorithm: algorithm.version, registeredAt: record.registeredAt,
                    source: record.source, quality: record.quality, template: template)
            }
        }
        guard !result.isEmpty else {
            throw RegistryError(.identifierNotRegistered, "'\(identifier)' is not registered in gallery '\(name)'")
        }
        return result
    }

    /// Per registry (priority order): identifiers held out of the gallery's total.
    public func migrationStatus(gallery name: String = GalleryConfiguration.defaultName) throws(RegistryError) -> [MigrationStatus] {
        try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return gallery.registries.map {
                MigrationStatus(
                    algorithm: $0.algorithm.version, identifiersHeld: $0.identifierCount,
                    galleryIdentifiers: gallery.identifierCount)
            }
        }
    }
}
