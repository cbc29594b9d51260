import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Listing

    /// Runs `body` in a read transaction on the engine's read pool (``ReadPool``), never on the
    /// caller's thread; storage errors surface as ``RegistryError``s (`SHUTTING_DOWN` once closed).
    func readStore<T: Sendable>(_ body: @escaping @Sendable (borrowing Transaction) throws -> T) async throws -> T {
        try await self.reads.run {
            do {
                return try self.store.environment.read(body)
            } catch let error as LMDBError {
                throw RegistryError.storage(error)
            }
        }
    }

    /// Begins and ends a read transaction on the calling thread: whether the store still answers (the
    /// watchdog's health check). Unlike the reads above it may run anywhere: it reads no page but
    /// LMDB's meta pages and waits for no other transaction, so a read pool busy with long reads (two
    /// backups) cannot make a healthy daemon look stuck.
    public func checkStoreAnswers() throws {
        do {
            try self.store.environment.read { _ in }
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
    ) async throws -> IdentifierPage {
        guard (1...10_000).contains(limit) else { throw RegistryError.malformedRequest("limit must be within 1...10000") }
        let galleryId = try self.indexLock.withReadLock { () throws(RegistryError) in try self.gallery(named: name).id }
        let (identifiers, more) = try await self.readStore { txn in
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
    ) async throws -> [StoredTemplate] {
        try Names.validateIdentifier(identifier)
        let (galleryId, algorithmOf) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return (gallery.id, Dictionary(uniqueKeysWithValues: gallery.registries.map { ($0.id, $0.algorithm) }))
        }
        let result = try await self.readStore { txn in
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
                    source: record.source, quality: record.quality, template: template, landmarkQuality: record.landmarkQuality)
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

extension Engine {
}
