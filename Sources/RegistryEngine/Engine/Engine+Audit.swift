import LMDB
import RegistryModel
import Synchronization

/// Audit entries waiting for the next group commit.
final class AuditBuffer: Sendable {
    private let state = Mutex<(entries: [AuditEntry], flushQueued: Bool)>(([], false))
    let sequence = Atomic<UInt32>(0)

    /// Adds an entry; true when the caller must queue a flush (none is queued yet). The entry moves
    /// into the buffer: no copy of its strings per request.
    func add(_ entry: consuming AuditEntry) -> Bool {
        var entry = Optional(entry)
        return self.state.withLock { state in
            state.entries.append(entry.take()!)
            defer { state.flushQueued = true }
            return !state.flushQueued
        }
    }

    /// Takes every waiting entry; the next `add` queues a new flush.
    func take() -> [AuditEntry] {
        self.state.withLock { state in
            defer {
                state.entries = []
                state.flushQueued = false
            }
            return state.entries
        }
    }
}

/// The entries one flush took, kept across re-runs of its batch (a batch re-runs when the map grows).
private final class TakenEntries: @unchecked Sendable {
    // Only touched by the writer thread.
    var entries: [AuditEntry]?
}

extension Engine {
    /// Adds an entry to the audit trail. It is written with the next group commit, or on its own
    /// within 0.1 s when no write comes, without making the caller wait for it (an identification is
    /// not slowed by its own trail, and a stream of reads costs ten audit fsyncs a second, not one per
    /// request).
    public func recordAudit(_ entry: consuming AuditEntry) {
        guard self.auditBuffer.add(entry) else { return }
        let taken = TakenEntries()
        let request = WriteQueue.Request(
            exclusive: false,
            body: { txn, _ in
                if taken.entries == nil { taken.entries = self.auditBuffer.take() }
                try self.writeAudit(txn, taken.entries ?? [])
                return ()
            },
            completion: { _ in })
        _ = self.writerQueue.submitLazily(request)
    }

    private func writeAudit(_ txn: borrowing Transaction, _ entries: [AuditEntry]) throws {
        // By index: each entry is read in place rather than copied out of the array.
        for index in entries.indices {
            // Time, then a sequence number: one 12-byte key built in one buffer.
            var key = ByteWriter(capacity: 12)
            key.appendBigEndian(UInt64(bitPattern: entries[index].time))
            key.appendBigEndian(self.auditBuffer.sequence.wrappingAdd(1, ordering: .relaxed).oldValue)
            try txn.put(self.store.audit, key: key.bytes, value: entries[index].encoded())
        }
        // Retention: the oldest entries go first, by count and by age.
        let retention = self.auditRetention
        var expired: [[UInt8]] = []
        let count = try txn.count(self.store.audit)
        let excess = retention.maximumEntries.map { max(0, count - $0) } ?? 0
        let cutoff = retention.maximumAgeSeconds.map { Store.now() - $0 * 1_000_000 }
        try txn.forEach(self.store.audit) { key, _ in
            let time = Int64(bitPattern: key.loadBigEndian(as: UInt64.self))
            guard expired.count < excess || (cutoff.map { time < $0 } ?? false) else { return .stop }
            expired.append(Array(key))
            return .continue
        }
        for key in expired { try txn.delete(self.store.audit, key: key) }
    }

    /// The newest audit entries matching `query`, oldest first.
    public func auditEntries(_ query: AuditQuery) async throws -> [AuditEntry] {
        try await self.flushAudit()
        return try self.auditEntriesFlushed(query)
    }

    /// Writes the audit entries waiting for their lazy flush: they ride along with an empty write.
    public func flushAudit() async throws {
        try await self.write { _, _ in () }
    }

    /// The newest audit entries matching `query`, oldest first, as stored now (without flushing the
    /// waiting ones; a blocking read of the store, for a thread that may block).
    public func auditEntriesFlushed(_ query: AuditQuery) throws -> [AuditEntry] {
        guard (1...100_000).contains(query.limit) else { throw RegistryError.malformedRequest("limit must be within 1...100000") }
        return try self.readStore { txn in
            var matches: [AuditEntry] = []
            let start = query.since.map { [UInt8](bigEndian: UInt64(bitPattern: $0)) } ?? []
            try txn.forEach(self.store.audit, from: start) { key, value in
                let time = Int64(bitPattern: key.loadBigEndian(as: UInt64.self))
                if let until = query.until, time >= until { return .stop }
                let entry = try AuditEntry(decoding: value)
                if let identifier = query.identifier, !entry.identifiers.contains(where: { $0.sameIdentifier(as: identifier) }) {
                    return .continue
                }
                if let outcome = query.outcome, entry.outcome != outcome { return .continue }
                matches.append(entry)
                if matches.count > query.limit { matches.removeFirst() }
                return .continue
            }
            return matches
        }
    }
}
