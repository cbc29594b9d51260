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
    ///   - cursor: a cursor on ``vectors`` in a read transaction.
    ///   - sealed: whether the store seals payloads (or is being sealed): the walk then stops at a
    ///     sealed payload's size rather than at the plain one's (either way it stops without reading
    ///     the next template's key, which may be on another page).
    func readRow(_ cursor: borrowing Cursor, id: UInt64, into row: UnsafeMutableRawPointer, bytes: Int, sealed: Bool) -> Bool {
        var filled = 0
        var expected = 0
        let capacity = bytes + PayloadCipher.overhead
        let complete = sealed ? capacity : bytes
        let walked: Void? = try? Keys.vectorPart(id, part: 0).withUnsafeBytes { key in
            try cursor.walk(from: key) { key, value in
                guard let (owner, part) = try? Self.vectorPart(key), owner == id else { return .stop }
                guard part == expected, filled + value.count <= capacity else { throw StoreCorruption("template \(id): its payload parts") }
                expected += 1
                (row + filled).copyMemory(from: value.baseAddress!, byteCount: value.count)
                filled += value.count
                return filled == complete ? .stop : .continue
            }
        }
        guard walked != nil else { return false }
        if filled == bytes { return true }
        guard filled == capacity else { return false }
        let stored = [UInt8](UnsafeRawBufferPointer(start: row, count: filled))
        // The key a scan must open with is the one the payload was sealed with: during a key change
        // the new one seals committed payloads before the index takes it (``pendingCipher``).
        for cipher in [self.cipher.withLock { $0 }, self.pendingCipher.withLock { $0 }].compactMap({ $0 }) {
            if let plain = try? cipher.open(stored, templateId: id), plain.count == bytes {
                plain.withUnsafeBytes { row.copyMemory(from: $0.baseAddress!, byteCount: bytes) }
                return true
            }
        }
        return false
    }
}
