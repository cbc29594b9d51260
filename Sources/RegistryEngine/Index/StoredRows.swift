import LMDB
import Synchronization

/// Where a vector registry reads its float32 rows when they are not kept in memory: the store's own
/// payloads. The registry keeps only its int8 codes and bound terms (about a quarter of the float32)
/// in memory it owns; a scan reads from the store just the rows the bound cannot exclude, through
/// LMDB's map, whose pages the kernel may evict whenever memory is short and read again when needed.
/// Scores stay exact: every one still comes from the float32 kernel, on the row as stored. A sealed
/// store's rows are opened one by one, so no plaintext row, code or term of it reaches the disk.
final class StoredRows: Sendable {
    let store: Store
    /// The most float32 row bytes a registry reading from here keeps in memory instead
    /// (``keepsRows(_:stride:)``; `EngineConfiguration.residentRowBytes`).
    let residentBytes: Int

    init(store: Store, residentBytes: Int = 0) {
        self.store = store
        self.residentBytes = residentBytes
    }

    /// Whether a registry keeps `count` rows of `stride` floats in memory rather than reading them
    /// from here: while their float32 values take at most ``residentBytes`` (never when it is 0).
    func keepsRows(_ count: Int, stride: Int) -> Bool { self.residentBytes > 0 && count * 4 * stride <= self.residentBytes }

    /// Calls `body` with a function that reads row `index` of `registry` and returns it, valid until
    /// the function is called again (nil: skip the row). The rows are read in one LMDB read
    /// transaction (renewed, not begun: a scan calls this once per chunk): call it under the index
    /// read lock (or on the writer thread), once per stretch of scanning.
    ///
    /// Exact or an error: a row comes back only if its float32 values give back the int8 codes the
    /// registry holds for it (what the prefilter let through is the row as registered). The function
    /// returns nil for a template removed after the caller's view was taken (no record left: the scan
    /// answers as of after the removal) and for one it cannot read; the second makes this throw once
    /// `body` returns, naming the first such template.
    /// - Throws: ``RowFault`` for a row whose payload is missing while its record stays, whose parts
    ///   are out of order or the wrong size, that no key opens or that disagrees with its codes; and
    ///   when no read transaction can be had (the store is closing).
    func withReader<T>(_ registry: RegistryIndex, _ body: (_ row: (Int) -> UnsafePointer<Float>?) -> T) throws(RowFault) -> T {
        let bytes = 4 * registry.stride
        let codeBytes = registry.codeStride
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: bytes + PayloadCipher.overhead + codeBytes, alignment: 64)
        defer {
            // The last row read leaves no copy in freed memory (erasure covers the index's memory).
            scratch.initializeMemory(as: UInt8.self, repeating: 0, count: bytes + PayloadCipher.overhead + codeBytes)
            scratch.deallocate()
        }
        let row = UnsafePointer(scratch.bindMemory(to: Float.self, capacity: registry.stride))
        let code = (scratch + bytes + PayloadCipher.overhead).bindMemory(to: Int8.self, capacity: max(1, codeBytes))
        var reads = 0
        defer { self.count(reads) }
        var fault: RowFault?
        // Templates with no payload: removed since the view was taken, unless their record stays.
        var withoutPayload: [UInt64] = []
        let result = registry.templateIds.withUnsafeBufferPointer { ids -> T? in
            let store = self.store
            let sealed = store.cipher.withLock { $0 != nil } || store.pendingCipher.withLock { $0 != nil }
            return try? store.environment.readReusing { txn in
                let value = try txn.withCursor(store.vectors) { cursor in
                    body { index in
                        reads += 1
                        let id = ids[index]
                        switch store.readRow(cursor, id: id, into: scratch, bytes: bytes, sealed: sealed) {
                        case .row:
                            guard registry.codeMatches(row: index, values: row, scratch: code) else {
                                if fault == nil {
                                    fault = RowFault(templateId: id, problem: "its stored values do not give back the codes the index made from them")
                                }
                                return nil
                            }
                            return row
                        case .noPayload:
                            withoutPayload.append(id)
                            return nil
                        case .damaged(let problem):
                            if fault == nil { fault = RowFault(templateId: id, problem: problem) }
                            return nil
                        }
                    }
                }
                if fault == nil, let lost = try withoutPayload.first(where: { try store.templateIsStored(txn, id: $0) }) {
                    fault = RowFault(templateId: lost, problem: "its record is stored but its payload is missing")
                }
                return value
            }
        }
        if let fault { throw fault }
        guard let result else {
            // No read transaction (the store is closing, or a reader slot could not be had).
            Self.unreadable.add(1, ordering: .relaxed)
            throw RowFault(templateId: nil, problem: "the store could not be read")
        }
        return result
    }

    /// Rows read since the store's map was last released.
    private let readSinceRelease = Atomic<Int>(0)

    /// The rows a scan reads stay in the page cache, but the pages of LMDB's map they were read
    /// through (and their neighbours, which the kernel maps along on a fault: up to 16 pages a
    /// fault, whatever the advice) would otherwise stay in this process's resident set for good,
    /// until it held most of the store. Every ``releaseEvery`` rows read, the map's pages are
    /// released (``Environment/releaseResidentPages()``): they stay cached, the kernel's to keep or
    /// evict, and the next read maps what it needs again.
    private func count(_ rows: Int) {
        guard rows > 0 else { return }
        let total = self.readSinceRelease.add(rows, ordering: .relaxed).newValue
        guard total >= Self.releaseEvery,
            self.readSinceRelease.compareExchange(expected: total, desired: 0, ordering: .relaxed).exchanged
        else { return }
        self.store.environment.releaseResidentPages()
    }

    /// Rows read between two releases of the map's pages. Counted in rows, not bytes: what a read
    /// leaves mapped is the fault's neighbourhood (64 KiB), whatever the row's length. At 512 rows
    /// that is at most 32 MiB (measured on a million 512-d templates, 20 top-10 identifications:
    /// see docs/scans.md).
    static let releaseEvery = 512

    /// Scans that could not open a read transaction at all (tests expect none).
    static let unreadable = Atomic<Int>(0)
}
