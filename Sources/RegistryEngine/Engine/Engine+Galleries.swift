import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Galleries

    /// The galleries, by name.
    public func galleries() -> [GalleryInfo] {
        self.indexLock.withReadLock {
            self.state.values.sorted { $0.name.identifierPrecedes($1.name) }.map(Self.info)
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
                    identifierCount: $0.identifierCount, minimumQuality: $0.minimumQuality,
                    minimumAutoEnrolmentQuality: $0.minimumAutoEnrolmentQuality)
            },
            identifierCount: gallery.identifierCount, liveness: gallery.liveness, livenessK: gallery.livenessK)
    }

    /// Creates a gallery, or reconfigures an existing one: registry order (priority), thresholds, new
    /// registries. A registry left out must be empty.
    /// - Throws: ``RegistryError`` (`malformedRequest`, `unknownAlgorithm`).
    @discardableResult
    public func defineGallery(_ configuration: GalleryConfiguration) async throws -> GalleryInfo {
        try await self.defineGalleries([configuration])[0]
    }

    /// Defines several galleries in one transaction: all of them, or — when any is refused — none.
    /// (A configuration reload must not leave the galleries before a bad one changed and those after
    /// it not.)
    /// - Throws: the first refusal, as ``defineGallery(_:)`` would; nothing is changed then.
    @discardableResult
    public func defineGalleries(_ configurations: [GalleryConfiguration]) async throws -> [GalleryInfo] {
        var names = Set<String>()
        for configuration in configurations {
            try Names.validateGallery(configuration.name)
            guard names.insert(configuration.name).inserted else {
                throw RegistryError.malformedRequest("gallery '\(configuration.name)' is defined twice")
            }
        }
        guard !configurations.isEmpty else { return [] }
        try await self.write(exclusive: true) { txn, context in
            for configuration in configurations {
                let existing = self.state[configuration.name]
                let (record, algorithms) = try self.writeGallery(txn, configuration, existing: existing)
                context.record(.defineGallery(name: configuration.name, record: record, algorithms: algorithms))
            }
        }
        return try configurations.map { try self.gallery($0.name) }
    }

    /// Deletes a gallery with every template and liveness profile in it. `default` cannot be deleted
    /// (it always exists); delete its identifiers instead.
    /// - Returns: the number of templates erased.
    public func deleteGallery(_ name: String) async throws -> Int {
        try Names.validateGallery(name)
        guard name != GalleryConfiguration.defaultName else {
            throw RegistryError.malformedRequest("the default gallery always exists and cannot be deleted")
        }
        return try await self.write(exclusive: true, useReserve: true) { txn, context in
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
}
