import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Encryption at rest

    /// Encrypts every stored template with `key` (32 bytes or 64 hex characters), or re-encrypts them
    /// when the store is already encrypted (key rotation), in one transaction: every template or none.
    /// From then on the store opens only with this key.
    /// - Returns: the number of templates (re-)encrypted.
    public func setEncryptionKey(_ key: [UInt8]) async throws -> Int {
        let newCipher = try PayloadCipher(keyMaterial: key)
        return try await self.write(exclusive: true, local: true) { txn, context in
            // Read every payload with the current key, write it sealed with the new one; the store
            // switches keys only after the commit (an IndexChange), so a failed or re-run batch is safe.
            var ids: [UInt64] = []
            try txn.forEach(self.store.templates) { key, _ in
                ids.append(key.loadBigEndian(as: UInt64.self))
                return .continue
            }
            for id in ids {
                try self.store.rewritePayload(txn, id: id, payload: try self.store.payload(txn, id: id), sealedWith: newCipher)
            }
            try txn.put(
                self.store.meta, key: Keys.encryptionCheck, value: try newCipher.seal(PayloadCipher.checkPlaintext, templateId: 0))
            self.store.pendingCipher.withLock { $0 = newCipher }
            context.record(.setCipher(newCipher))
            return ids.count
        }
    }
}
