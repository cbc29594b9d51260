import LMDB
import Synchronization

// Reading one template's row straight out of the store, for scans that keep only codes in memory
// (``StoredRows``): no record lookup, no array per part, and sealed payloads opened on the way.
extension Store {
    /// Copies the payload of vector template `id` into `row` (`bytes` bytes: its float32 row),
    /// opening it when it is sealed. Returns false when the store holds no such payload (the
    /// template was removed after the caller's view of the index was taken) or it is not a row of
    /// that size (a damaged payload, which `verify` reports).
    /// - Parameters:
    ///   - row: room for `bytes` + ``PayloadCipher/overhead`` bytes (a sealed payload is gathered
    ///     there before it is opened).
    func readRow(_ txn: borrowing Transaction, id: UInt64, into row: UnsafeMutableRawPointer, bytes: Int) -> Bool {
        var filled = 0
        var expected = 0
        let capacity = bytes + PayloadCipher.overhead
        var key = (id << 8).bigEndian
        let walked: Void? = try? withUnsafeBytes(of: &key) { key in
            try txn.forEach(self.vectors, from: key) { key, value in
                guard let (owner, part) = try? Self.vectorPart(key), owner == id else { return .stop }
                guard part == expected, filled + value.count <= capacity else { throw StoreCorruption("template \(id): its payload parts") }
                expected += 1
                (row + filled).copyMemory(from: value.baseAddress!, byteCount: value.count)
                filled += value.count
                return .continue
            }
        }
        guard walked != nil else { return false }
        if filled == bytes { return true }
        guard filled == capacity else { return false }
        let sealed = [UInt8](UnsafeRawBufferPointer(start: row, count: filled))
        // The key a scan must open with is the one the payload was sealed with: during a key change
        // the new one seals committed payloads before the index takes it (``pendingCipher``).
        let ciphers = self.cipher.withLock { $0 }.map { [$0] } ?? []
        for cipher in ciphers + (self.pendingCipher.withLock { $0 }.map { [$0] } ?? []) {
            if let plain = try? cipher.open(sealed, templateId: id), plain.count == bytes {
                plain.withUnsafeBytes { row.copyMemory(from: $0.baseAddress!, byteCount: bytes) }
                return true
            }
        }
        return false
    }
}
