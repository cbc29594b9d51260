import LMDB
import Synchronization

// Reading one template's row straight out of the store, for scans that keep only codes in memory
// (``StoredRows``): no record lookup, no array per part, and sealed payloads opened on the way.
extension Store {
    /// What reading a row found.
    enum RowRead: Equatable {
        /// The row is in the caller's buffer.
        case row
        /// No part of the payload is stored: either the template was removed after the caller's view
        /// of the index was taken, or its payload was lost. Only its record tells which
        /// (``templateIsStored(_:id:)``): a removal takes both in one commit.
        case noPayload
        /// The payload is there but is not the row: parts out of order, the wrong size, or sealed
        /// with no key that opens it.
        case damaged(String)
    }

    /// Copies the payload of vector template `id` into `row` (`bytes` bytes: its float32 row),
    /// opening it when it is sealed.
    /// - Parameters:
    ///   - row: room for `bytes` + ``PayloadCipher/overhead`` bytes (a sealed payload is gathered
    ///     there before it is opened).
    ///   - cursor: a cursor on ``vectors`` in a read transaction.
    ///   - sealed: whether the store seals payloads (or is being sealed): the walk then stops at a
    ///     sealed payload's size rather than at the plain one's (either way it stops without reading
    ///     the next template's key, which may be on another page).
    func readRow(_ cursor: borrowing Cursor, id: UInt64, into row: UnsafeMutableRawPointer, bytes: Int, sealed: Bool) -> RowRead {
        var filled = 0
        var expected = 0
        var problem: String?
        let capacity = bytes + PayloadCipher.overhead
        let complete = sealed ? capacity : bytes
        do {
            try Keys.vectorPart(id, part: 0).withUnsafeBytes { key in
                try cursor.walk(from: key) { key, value in
                    guard let (owner, part) = try? Self.vectorPart(key), owner == id else { return .stop }
                    guard part == expected else {
                        problem = "payload part \(part) where \(expected) belongs"
                        return .stop
                    }
                    guard filled + value.count <= capacity else {
                        problem = "its payload is longer than a row of \(bytes / 4) values"
                        return .stop
                    }
                    expected += 1
                    (row + filled).copyMemory(from: value.baseAddress!, byteCount: value.count)
                    filled += value.count
                    return filled == complete ? .stop : .continue
                }
            }
        } catch {
            return .damaged("reading its payload failed (\(error))")
        }
        if let problem { return .damaged(problem) }
        if expected == 0 { return .noPayload }
        if filled == bytes { return .row }
        guard filled == capacity else { return .damaged("its payload holds \(filled) bytes where a row takes \(bytes)") }
        let stored = [UInt8](UnsafeRawBufferPointer(start: row, count: filled))
        // The key a scan must open with is the one the payload was sealed with: during a key change
        // the new one seals committed payloads before the index takes it (``pendingCipher``).
        for cipher in [self.cipher.withLock { $0 }, self.pendingCipher.withLock { $0 }].compactMap({ $0 }) {
            if let plain = try? cipher.open(stored, templateId: id), plain.count == bytes {
                plain.withUnsafeBytes { row.copyMemory(from: $0.baseAddress!, byteCount: bytes) }
                return .row
            }
        }
        return .damaged("its sealed payload does not open with the store's key")
    }

    /// Whether template `id` has a record: tells a template removed since a scan's view was taken
    /// (no record) from one whose payload was lost (a record without it).
    func templateIsStored(_ txn: borrowing Transaction, id: UInt64) throws -> Bool {
        try txn.get(self.templates, key: Keys.template(id)) != nil
    }
}
