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
            identifiers: entry.identifiers, outcome: entry.outcome, score: entry.score, errorCode: entry.errorCode)
    }

    /// ``recordAudit(_:)`` from an entry's parts, encoded straight into the waiting buffer: no entry
    /// value is built (the server records one per request).
    public func recordAudit(
        time: Int64, uid: UInt32, pid: Int32, operation: String, gallery: String, identifiers: [String], outcome: AuditOutcome,
        score: Float?, errorCode: String?
    ) {
        let queue = self.auditBuffer.add { writer in
            AuditEntry.encode(
                into: &writer, time: time, uid: uid, pid: pid, operation: operation, gallery: gallery, identifiers: identifiers,
                outcome: outcome, score: score, errorCode: errorCode)
        }
        if queue { self.queueAuditFlush() }
    }

    /// Queues the write of the waiting entries, to join the next batch (or run alone within 0.1 s).
    /// A flush whose commit fails puts its entries back, ahead of newer ones, and queues another:
    /// a full disk delays the trail, it does not lose it (up to ``AuditBuffer/maximumHeldBytes``).
    private func queueAuditFlush() {
        let taken = TakenEntries()
        let request = WriteQueue.Request(
            exclusive: false,
            useReserve: true,
            body: { txn, _ in
                if taken.taken == nil { taken.taken = self.auditBuffer.take() }
                if let entries = taken.taken { try self.writeAudit(txn, entries) }
                return ()
            },
            completion: { result in
                // On the writer thread, after the commit: the batch does not run again. Taken out,
                // so that the bytes are uniquely held when they are reused.
                guard let entries = taken.taken.take() else { return }
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
                let block = UnsafeRawBufferPointer(rebasing: framed[offset..<end])
                var key = ByteWriter(capacity: 12)
                key.appendBigEndian(UInt64(bitPattern: first))
                key.appendBigEndian(self.auditBuffer.sequence.wrappingAdd(1, ordering: .relaxed).oldValue)
                try txn.put(self.store.audit, key: key.bytes, value: AuditBlock.block(framed: block))
                offset = end
            }
        }
        let total = try self.store.readUInt64(txn, Keys.auditEntries) ?? 0
        try self.applyAuditRetention(txn, total: Int(total) + taken.count)
    }

    /// Drops the oldest entries beyond the retention's count and age: whole blocks where it can, then
    /// the leading entries of the first block it keeps. Stores the trail's new entry count.
    func applyAuditRetention(_ txn: borrowing Transaction, total: Int) throws {
        let retention = self.auditRetention
        var total = total
        var excess = retention.maximumEntries.map { max(0, total - $0) } ?? 0
        let cutoff = retention.maximumAgeSeconds.map { Store.now() - $0 * 1_000_000 }
        var expired: [[UInt8]] = []
        var trimmed: (key: [UInt8], value: [UInt8])?
        try txn.forEach(self.store.audit) { key, value in
            let header = try AuditBlock.header(value)
            if excess >= header.count || (cutoff.map { header.newest < $0 } ?? false) {
                expired.append(Array(key))
                excess = max(0, excess - header.count)
                total -= header.count
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
            trimmed = (Array(key), AuditBlock.block(framed: UnsafeRawBufferPointer(rebasing: value[start...])))
            total -= drop
            return .stop
        }
        for key in expired { try txn.delete(self.store.audit, key: key) }
        if let trimmed { try txn.put(self.store.audit, key: trimmed.key, value: trimmed.value) }
        // Never below zero, even when the stored count was damaged: it then recovers as blocks go.
        try self.store.writeInteger(txn, Keys.auditEntries, UInt64(max(0, total)))
    }

    /// The newest audit entries matching `query`, oldest first.
    public func auditEntries(_ query: AuditQuery) async throws -> [AuditEntry] {
        guard (1...100_000).contains(query.limit) else { throw RegistryError.malformedRequest("limit must be within 1...100000") }
        // Entries waiting for their lazy flush first, so the answer includes every operation
        // finished before the query; then the scan, which may read many pages.
        try await self.flushAudit()
        return try await self.readStore { txn in try self.storedAuditEntries(txn, query) }
    }

    /// Writes the audit entries waiting for their lazy flush: they ride along with an empty write.
    public func flushAudit() async throws {
        try await self.write(useReserve: true) { _, _ in () }
    }

    /// The newest audit entries matching `query`, oldest first, as stored in `txn`.
    private func storedAuditEntries(_ txn: borrowing Transaction, _ query: AuditQuery) throws -> [AuditEntry] {
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
                matches.append(entry)
                // The newest `limit` are kept: older ones dropped in bulk, not one by one.
                if matches.count >= 2 * query.limit { matches.removeFirst(matches.count - query.limit) }
            }
            return .continue
        }
        return Array(matches.suffix(query.limit))
    }
}
