import CoreMetrics
import LMDB
import RegistryModel
import Synchronization

/// Audit entries waiting for the next group commit, already encoded (framed, back to back, as a
/// block holds them): recording one copies a few strings into a buffer, and the entry itself is gone
/// when the request is answered.
final class AuditBuffer: Sendable {
    /// `spare`: the bytes of an earlier flush, kept with their capacity. A flush takes thousands of
    /// entries at a high request rate; without it the buffer would grow again by reallocating (and
    /// faulting fresh pages in) between every two flushes.
    private let state = Mutex<(pending: ByteWriter, count: Int, flushQueued: Bool, spare: [UInt8])>((ByteWriter(), 0, false, []))
    let sequence = Atomic<UInt32>(0)

    /// Adds the entry `encode` writes; true when the caller must queue a flush (none is queued yet).
    func add(_ encode: (inout ByteWriter) -> Void) -> Bool {
        self.state.withLock { state in
            AuditBlock.appendFramed(to: &state.pending, encode)
            state.count += 1
            defer { state.flushQueued = true }
            return !state.flushQueued
        }
    }

    /// Takes every waiting entry (framed); the next `add` queues a new flush.
    func take() -> TakenAudit {
        self.state.withLock { state in
            let taken = TakenAudit(framed: state.pending.bytes, count: state.count)
            state.pending = ByteWriter(recycling: state.spare)
            state.spare = []
            state.count = 0
            state.flushQueued = false
            return taken
        }
    }

    /// Most bytes of entries kept waiting across failed flushes (a full or failing disk): beyond it,
    /// a failed flush's entries are dropped (and counted) rather than the daemon's memory growing
    /// without bound while the disk stays unusable.
    static let maximumHeldBytes = 64 << 20

    /// Puts back the entries of a flush whose commit failed, before those recorded since, so that
    /// the next flush writes them in order. Returns whether the caller must queue a flush, and false
    /// for `restored` when they were dropped instead (``maximumHeldBytes``).
    func restore(_ taken: TakenAudit) -> (restored: Bool, queue: Bool) {
        self.state.withLock { state in
            let restored = taken.framed.count + state.pending.bytes.count <= Self.maximumHeldBytes
            if restored {
                var joined = ByteWriter(capacity: taken.framed.count + state.pending.bytes.count)
                joined.append(bytes: taken.framed)
                joined.append(bytes: state.pending.bytes)
                state.pending = joined
                state.count += taken.count
            }
            let queue = state.count > 0 && !state.flushQueued
            if state.count > 0 { state.flushQueued = true }
            return (restored, queue)
        }
    }

    /// Notes that the flush queued for the waiting entries was refused before it took them; true when
    /// the caller must queue another (entries are waiting).
    func flushDidNotRun() -> Bool {
        self.state.withLock { state in
            state.flushQueued = state.count > 0
            return state.count > 0
        }
    }

    /// Gives back the bytes a flush took, once written, for a later `take` to reuse.
    func recycle(_ framed: consuming [UInt8]) {
        var framed = Optional(framed)
        self.state.withLock { state in
            if state.spare.capacity < framed!.capacity { state.spare = framed.take()! }
        }
    }
}

/// The entries one flush took: `count` framed entries back to back.
struct TakenAudit: Sendable {
    var framed: [UInt8]
    var count: Int
}

/// The entries one flush took, kept across re-runs of its batch (a batch re-runs when the map grows).
private final class TakenEntries: @unchecked Sendable {
    // Only touched by the writer thread.
    var taken: TakenAudit?
}

extension Engine {
    /// Adds an entry to the audit trail. It is written with the next group commit, or on its own
    /// within 0.1 s when no write comes, without making the caller wait for it (an identification is
    /// not slowed by its own trail, and a stream of reads costs ten audit fsyncs a second, not one per
    /// request).
    public func recordAudit(_ entry: AuditEntry) {
        self.recordAudit(
            time: entry.time, uid: entry.uid, pid: entry.pid, operation: entry.operation, gallery: entry.gallery,
            identifiers: entry.identifiers, outcome: entry.outcome, score: entry.score, errorCode: entry.errorCode, count: entry.count)
    }

    /// ``recordAudit(_:)`` from an entry's parts, encoded straight into the waiting buffer: no entry
    /// value is built (the server records one per request).
    public func recordAudit(
        time: Int64, uid: UInt32, pid: Int32, operation: String, gallery: String, identifiers: [String], outcome: AuditOutcome,
        score: Float?, errorCode: String?, count: UInt32 = 1
    ) {
        let queue = self.auditBuffer.add { writer in
            AuditEntry.encode(
                into: &writer, time: time, uid: uid, pid: pid, operation: operation, gallery: gallery, identifiers: identifiers,
                outcome: outcome, score: score, errorCode: errorCode, count: count)
        }
        if queue { self.queueAuditFlush() }
    }

    /// Queues the write of the waiting entries, to join the next batch (or run alone within 0.1 s).
    /// A flush whose commit fails (or that the storage reserve refuses) puts its entries back, ahead of
    /// newer ones, and queues another: a full disk delays the trail, it does not lose it (up to
    /// ``AuditBuffer/maximumHeldBytes``).
    private func queueAuditFlush() {
        let taken = TakenEntries()
        // Not from the storage reserve, which is kept for deletions: a trail that grows by requests
        // anyone may send must not be what fills it. While the reserve is reached the entries wait
        // (up to ``AuditBuffer/maximumHeldBytes``) and go with the first flush after space is freed.
        let request = WriteQueue.Request(
            exclusive: false,
            useReserve: false,
            { txn, _ in
                if taken.taken == nil { taken.taken = self.auditBuffer.take() }
                if let entries = taken.taken { try self.writeAudit(txn, entries) }
            },
            completion: { result in
                // On the writer thread, after the commit: the batch does not run again. Taken out,
                // so that the bytes are uniquely held when they are reused.
                guard let entries = taken.taken.take() else {
                    // Refused before its body ran (the storage reserve): the entries are still
                    // waiting, and the next flush is queued now (lazily: within 0.1 s, or with the
                    // next write), not left to the next entry, which may never come.
                    if self.auditBuffer.flushDidNotRun() { self.queueAuditFlush() }
                    return
                }
                guard case .failure = result else {
                    self.auditBuffer.recycle(entries.framed)
                    return
                }
                let (restored, queue) = self.auditBuffer.restore(entries)
                if !restored { self.metrics.auditEntriesDropped.increment(by: entries.count) }
                if queue { self.queueAuditFlush() }
            })
        _ = self.writerQueue.submitLazily(request)
    }

    /// Writes a flush's entries as blocks of at most ``AuditBlock/maximumEntries``, then applies the
    /// retention.
    private func writeAudit(_ txn: borrowing Transaction, _ taken: TakenAudit) throws {
        var written = 0
        var firstKey: [UInt8]?
        try taken.framed.withUnsafeBytes { framed in
            var offset = 0
            while offset < framed.count {
                // The next block: up to `maximumEntries` frames from `offset`.
                var (end, first) = (offset, Int64?.none)
                for _ in 0..<AuditBlock.maximumEntries {
                    guard let entry = AuditBlock.entry(in: framed, at: end) else { break }
                    first = first ?? AuditBlock.time(of: entry)
                    end += 4 + entry.count
                }
                // The buffer frames every entry it holds; a frame that does not fit is a bug here.
                guard let first else { preconditionFailure("an audit entry framed past the end of its buffer") }
                let block = AuditBlock.block(framed: UnsafeRawBufferPointer(rebasing: framed[offset..<end]))
                var key = ByteWriter(capacity: 12)
                key.appendBigEndian(UInt64(bitPattern: first))
                key.appendBigEndian(self.auditBuffer.sequence.wrappingAdd(1, ordering: .relaxed).oldValue)
                try txn.put(self.store.audit, key: key.bytes, value: block)
                firstKey = firstKey ?? key.bytes
                written += block.count
                offset = end
            }
        }
        let total = try self.store.readUInt64(txn, Keys.auditEntries) ?? 0
        // A store written before the trail was bounded in bytes has no count yet: its blocks are
        // counted once (the blocks just written included).
        let bytes = try self.store.readUInt64(txn, Keys.auditBytes).map { Int($0) + written } ?? self.storedAuditBytes(txn)
        try self.applyAuditRetention(txn, total: Int(total) + taken.count, bytes: bytes, keeping: firstKey)
    }

    /// The stored size of every audit block.
    private func storedAuditBytes(_ txn: borrowing Transaction) throws -> Int {
        var bytes = 0
        try txn.forEach(self.store.audit) { _, value in
            bytes += value.count
            return .continue
        }
        return bytes
    }

    /// Drops the oldest entries beyond the retention's count, age and bytes: whole blocks where it can,
    /// then the leading entries of the first block it keeps. Stores the trail's new entry count and
    /// size. `keeping`: the first block written by this flush, which the byte bound never removes (nor
    /// any after it): the entries just recorded outlive a bound smaller than themselves.
    func applyAuditRetention(_ txn: borrowing Transaction, total: Int, bytes: Int = 0, keeping: [UInt8]? = nil) throws {
        let retention = self.auditRetention
        var total = total
        var bytes = bytes
        var excess = retention.maximumEntries.map { max(0, total - $0) } ?? 0
        let cutoff = retention.maximumAgeSeconds.map { Store.now() - $0 * 1_000_000 }
        var expired: [[UInt8]] = []
        var trimmed: (key: [UInt8], value: [UInt8])?
        try txn.forEach(self.store.audit) { key, value in
            let header = try AuditBlock.header(value)
            let overBytes = retention.maximumBytes.map { bytes > $0 } ?? false
            let written = keeping.map { key.elementsEqual($0) } ?? false
            if excess >= header.count || (cutoff.map { header.newest < $0 } ?? false) || (overBytes && !written) {
                expired.append(Array(key))
                excess = max(0, excess - header.count)
                total -= header.count
                bytes -= value.count
                return .continue
            }
            guard excess > 0 || (cutoff.map { header.oldest < $0 } ?? false) else { return .stop }
            // The first block kept loses its leading entries: the excess, and those past the age.
            let entries = try AuditBlock.entries(value)
            var drop = excess
            if let cutoff {
                var old = 0
                while old < entries.count && AuditBlock.time(of: entries[old]) < cutoff { old += 1 }
                drop = max(drop, old)
            }
            guard drop > 0 else { return .stop }
            // The kept entries' frames run from the first kept one to the block's end. Kept under its
            // key: a key is where a block sorts, and the header says what it holds.
            let start = entries[drop].baseAddress! - 4 - value.baseAddress!
            let block = AuditBlock.block(framed: UnsafeRawBufferPointer(rebasing: value[start...]))
            bytes += block.count - value.count
            trimmed = (Array(key), block)
            total -= drop
            return .stop
        }
        for key in expired { try txn.delete(self.store.audit, key: key) }
        if let trimmed { try txn.put(self.store.audit, key: trimmed.key, value: trimmed.value) }
        // Never below zero, even when the stored count was damaged: it then recovers as blocks go.
        try self.store.writeInteger(txn, Keys.auditEntries, UInt64(max(0, total)))
        try self.store.writeInteger(txn, Keys.auditBytes, UInt64(max(0, bytes)))
    }

    /// The newest audit entries matching `query`, oldest first, among those of the galleries `visible`
    /// accepts ("" for operations on the whole store): the caller's right decides what it may read.
    public func auditEntries(_ query: AuditQuery, visible: @escaping @Sendable (String) -> Bool = { _ in true }) async throws -> [AuditEntry] {
        guard (1...100_000).contains(query.limit) else { throw RegistryError.malformedRequest("limit must be within 1...100000") }
        // Entries waiting for their lazy flush first, so the answer includes every operation
        // finished before the query; then the scan, which may read many pages.
        try await self.flushAudit()
        return try await self.readStore { txn in try self.storedAuditEntries(txn, query, visible: visible) }
    }

    /// Writes the audit entries waiting for their lazy flush: they ride along with an empty write.
    public func flushAudit() async throws {
        try await self.write(useReserve: true, local: true) { _, _ in () }
    }

    /// The newest audit entries matching `query`, oldest first, as stored in `txn`.
    private func storedAuditEntries(_ txn: borrowing Transaction, _ query: AuditQuery, visible: (String) -> Bool) throws -> [AuditEntry] {
        var matches: [AuditEntry] = []
        try txn.forEach(self.store.audit) { _, value in
            let header = try AuditBlock.header(value)
            if let since = query.since, header.newest < since { return .continue }
            if let until = query.until, header.oldest >= until { return .continue }
            for encoded in try AuditBlock.entries(value) {
                let time = AuditBlock.time(of: encoded)
                if let since = query.since, time < since { continue }
                if let until = query.until, time >= until { continue }
                let entry = try AuditEntry(decoding: encoded)
                if let identifier = query.identifier, !entry.identifiers.contains(where: { $0.sameIdentifier(as: identifier) }) {
                    continue
                }
                if let outcome = query.outcome, entry.outcome != outcome { continue }
                guard visible(entry.gallery) else { continue }
                matches.append(entry)
                // The newest `limit` are kept: older ones dropped in bulk, not one by one.
                if matches.count >= 2 * query.limit { matches.removeFirst(matches.count - query.limit) }
            }
            return .continue
        }
        return Array(matches.suffix(query.limit))
    }
}
