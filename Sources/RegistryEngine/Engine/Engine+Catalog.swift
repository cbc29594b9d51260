import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Galleries and algorithms in the store

    /// Creates or updates a gallery's stored definition. Registries keep their ids (and templates)
    /// when their algorithm stays; a registry dropped from the configuration must be empty.
    func writeGallery(
        _ txn: borrowing Transaction,
        _ configuration: GalleryConfiguration,
        existing: GalleryIndex?
    ) throws -> (record: GalleryRecord, algorithms: [Algorithm]) {
        // The rules that need no store, shared with the configuration check.
        if let problem = configuration.problems(catalog: self.catalog).first { throw problem.error }
        var registries: [GalleryRecord.Registry] = []
        var algorithms: [Algorithm] = []
        for entry in configuration.registries {
            let algorithm = try self.catalog.algorithm(version: entry.algorithm)
            let id = try existing?.registry(algorithm: entry.algorithm)?.id ?? self.store.takeId(txn, Keys.nextRegistryId)
            registries.append(
                GalleryRecord.Registry(
                    id: id, algorithm: entry.algorithm, thresholds: entry.thresholds ?? Thresholds(defaultsFor: algorithm),
                    minimumQuality: entry.minimumQuality, minimumAutoEnrolmentQuality: entry.minimumAutoEnrolmentQuality))
            algorithms.append(algorithm)
            try self.store.putAlgorithm(txn, algorithm)
        }
        let kept = Set(configuration.registries.map(\.algorithm))
        for dropped in existing?.registries ?? [] where !kept.contains(dropped.algorithm.version) && dropped.count > 0 {
            throw RegistryError.malformedRequest(
                "the \(dropped.algorithm) registry of gallery '\(configuration.name)' holds \(dropped.count) templates; delete them before removing it"
            )
        }
        let id = try existing?.id ?? self.store.takeId(txn, Keys.nextGalleryId)
        let record = GalleryRecord(
            id: id, registries: registries, liveness: configuration.liveness, livenessK: configuration.livenessK)
        try self.store.putGallery(txn, name: configuration.name, record)
        return (record, algorithms)
    }

    /// Opens an encrypted store with its key, or starts encrypting a new store; refuses a missing or
    /// wrong key, and a key for a store that holds unencrypted templates.
    func checkEncryption(_ txn: borrowing Transaction, key material: [UInt8]?) throws {
        let check = try txn.get(self.store.meta, key: Keys.encryptionCheck).map { Array($0) }
        guard let material else {
            if check != nil {
                throw RegistryError(
                    .internal, "the store is encrypted: start registryd with its key (--key-file, or the store-key credential)")
            }
            return
        }
        let cipher = try PayloadCipher(keyMaterial: material)
        if let check {
            guard (try? cipher.open(check, templateId: 0)) == PayloadCipher.checkPlaintext else {
                throw RegistryError(.internal, "the encryption key given does not open this store")
            }
        } else {
            guard try txn.count(self.store.templates) == 0 else {
                throw RegistryError(
                    .internal,
                    "the store holds unencrypted templates: start registryd without a key and encrypt it (registryctl encrypt)")
            }
            // A read-only open of an empty store uses the key without adopting it.
            if !txn.isReadOnly {
                try txn.put(self.store.meta, key: Keys.encryptionCheck, value: try cipher.seal(PayloadCipher.checkPlaintext, templateId: 0))
            }
        }
        self.store.cipher.withLock { $0 = cipher }
    }

    /// Refuses to open a store whose registries use an algorithm the configuration dropped or changed.
    func reconcileAlgorithms(_ txn: borrowing Transaction) throws {
        for stored in try self.store.storedAlgorithms(txn) {
            let used = try self.store.storedGalleries(txn).contains { $0.record.registries.contains { $0.algorithm == stored.version } }
            guard used else { continue }
            guard let configured = try? self.catalog.algorithm(version: stored.version) else {
                throw RegistryError(
                    .unknownAlgorithm,
                    "the store has registries of algorithm \(stored), which the configuration no longer defines")
            }
            guard AlgorithmRecord.isCompatible(stored: stored, configured: configured) else {
                throw RegistryError(
                    .unknownAlgorithm,
                    "algorithm \(stored.version) is configured as \(configured.kind), \(configured.scoreFunction.rawValue) but the store holds templates of \(stored.kind), \(stored.scoreFunction.rawValue)"
                )
            }
        }
    }
}
