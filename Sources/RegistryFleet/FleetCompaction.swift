import Logging
import NIOCore
import PostgresNIO

/// What the log holds after the newest snapshot, up to a node's position: whether a new snapshot
/// is due (``FleetLog/sinceSnapshot(upTo:erasureKind:)``).
public struct FleetLogTail: Sendable, Equatable {
    /// The newest snapshot's position (0: none).
    public var snapshot: Int64
    /// How old it is (nil: none).
    public var snapshotAge: Duration?
    /// Entries after it, up to the position asked about.
    public var entries: Int64
    /// Whether one of them is of the erasure kind (a deletion).
    public var erasures: Bool

    public init(snapshot: Int64, snapshotAge: Duration?, entries: Int64, erasures: Bool) {
        self.snapshot = snapshot
        self.snapshotAge = snapshotAge
        self.entries = entries
        self.erasures = erasures
    }
}

/// What one compaction did.
public struct FleetCompaction: Sendable, Equatable {
    /// The log's trimmed start before and after.
    public var trimmedBefore: Int64
    public var trimmed: Int64
    /// Entries and snapshots removed.
    public var entriesRemoved: Int
    public var snapshotsRemoved: Int

    public init(trimmedBefore: Int64, trimmed: Int64, entriesRemoved: Int, snapshotsRemoved: Int) {
        self.trimmedBefore = trimmedBefore
        self.trimmed = trimmed
        self.entriesRemoved = entriesRemoved
        self.snapshotsRemoved = snapshotsRemoved
    }
}

/// Compaction (docs/fleet.md): snapshots of the replicas' state, written by nodes, and the log
/// trimmed up to the newest snapshot once every node seen within the retention time has applied
/// what is trimmed, or once it is older than the retention time (a node behind the trimmed start
/// loads the newest snapshot instead of the entries it lacks).
extension FleetLog {
    /// The lock that keeps two compactions from running at once (`registry` + 2 in ASCII).
    static let compactionLockKey: Int64 = 0x7265_6769_7374_7279 + 2

    /// The newest snapshot and what the log holds after it, up to `position`.
    public func sinceSnapshot(upTo position: Int64, erasureKind: Int16) async throws -> FleetLogTail {
        try await self.database.withPrimary { client in
            let rows = try await client.query(
                """
                WITH newest AS (SELECT coalesce(max(position), 0)::bigint AS position FROM fleet_snapshots)
                SELECT newest.position,
                       (SELECT (extract(epoch FROM now() - created_at) * 1000000)::bigint FROM fleet_snapshots s
                        WHERE s.position = newest.position),
                       (SELECT count(*) FROM fleet_log l WHERE l.position > newest.position AND l.position <= \(position))::bigint,
                       coalesce((SELECT bool_or(kind = \(erasureKind)) FROM fleet_log l
                                 WHERE l.position > newest.position AND l.position <= \(position)), false)
                FROM newest
                """,
                logger: self.logger)
            for try await (snapshot, age, entries, erasures) in rows.decode((Int64, Int64?, Int64, Bool).self) {
                return FleetLogTail(snapshot: snapshot, snapshotAge: age.map { .microseconds($0) }, entries: entries, erasures: erasures)
            }
            return FleetLogTail(snapshot: 0, snapshotAge: nil, entries: 0, erasures: false)
        }
    }

    /// Stores a snapshot of the state at `position` (its sealed parts, in order) in one transaction.
    /// Returns false when there already is one at `position` or after it (another node wrote it).
    public func writeSnapshot(position: Int64, parts: [[UInt8]]) async throws -> Bool {
        let logger = self.logger
        let node = self.node
        let bytes = Int64(parts.reduce(0) { $0 + $1.count })
        return try await self.database.withPrimary { client in
            try await client.transaction(logger: logger) { connection in
                // One writer at a time: a second node would only write the same state again.
                let locked = try await connection.query("SELECT pg_try_advisory_xact_lock(\(Self.compactionLockKey))", logger: logger)
                for try await got in locked.decode(Bool.self) where !got { return false }
                let newer = try await connection.query(
                    "SELECT count(*)::bigint FROM fleet_snapshots WHERE position >= \(position)", logger: logger)
                for try await count in newer.decode(Int64.self) where count > 0 { return false }
                _ = try await connection.query(
                    "INSERT INTO fleet_snapshots (position, node, parts, bytes) VALUES (\(position), \(node), \(Int32(parts.count)), \(bytes))",
                    logger: logger)
                for (index, part) in parts.enumerated() {
                    _ = try await connection.query(
                        "INSERT INTO fleet_snapshot_parts (position, part, data) VALUES (\(position), \(Int32(index)), \(ByteBuffer(bytes: part)))",
                        logger: logger)
                }
                return true
            }
        }
    }

    /// The newest snapshot: its position and its sealed parts in order (nil: there is none). One
    /// statement, so a compaction that removes it meanwhile does not cut it short.
    public func newestSnapshot() async throws -> (position: Int64, parts: [[UInt8]])? {
        try await self.database.withPrimary { client in
            let rows = try await client.query(
                """
                SELECT s.position, s.parts, p.part, p.data FROM fleet_snapshots s JOIN fleet_snapshot_parts p USING (position)
                WHERE s.position = (SELECT max(position) FROM fleet_snapshots) ORDER BY p.part
                """,
                logger: self.logger)
            var position: Int64?
            var expected: Int32 = 0
            var parts: [[UInt8]] = []
            for try await (at, count, part, data) in rows.decode((Int64, Int32, Int32, ByteBuffer).self) {
                guard part == Int32(parts.count) else { throw FleetSnapshotMissing(position: at, part: Int32(parts.count)) }
                position = at
                expected = count
                parts.append(Array(buffer: data))
            }
            guard let position else { return nil }
            guard parts.count == Int(expected) else { throw FleetSnapshotMissing(position: position, part: Int32(parts.count)) }
            return (position, parts)
        }
    }

    /// Trims the log up to the newest snapshot, as far as every node seen within `retention` has
    /// applied it, or up to the last entry older than `retention` if that is further (a node that far
    /// behind loads the snapshot); then removes the snapshots older than the newest. Returns nil when
    /// another node's compaction is under way.
    public func compact(retention: Duration) async throws -> FleetCompaction? {
        let logger = self.logger
        let seconds = Double(retention.components.seconds) + Double(retention.components.attoseconds) / 1e18
        return try await self.database.withPrimary { client in
            try await client.transaction(logger: logger) { connection -> FleetCompaction? in
                let locked = try await connection.query("SELECT pg_try_advisory_xact_lock(\(Self.compactionLockKey))", logger: logger)
                for try await got in locked.decode(Bool.self) where !got { return nil }
                let bounds = try await connection.query(
                    """
                    SELECT \(unescaped: Self.trimmedSQL),
                           coalesce((SELECT max(position) FROM fleet_snapshots), 0)::bigint,
                           (SELECT min(applied) FROM fleet_nodes WHERE seen_at > now() - make_interval(secs => \(seconds)))::bigint,
                           coalesce((SELECT max(position) FROM fleet_log WHERE committed_at < now() - make_interval(secs => \(seconds))), 0)::bigint
                    """,
                    logger: logger)
                var found: (trimmed: Int64, snapshot: Int64, applied: Int64?, expired: Int64) = (0, 0, nil, 0)
                for try await row in bounds.decode((Int64, Int64, Int64?, Int64).self) { found = row }
                let target = min(found.snapshot, max(found.applied ?? found.snapshot, found.expired))
                var result = FleetCompaction(trimmedBefore: found.trimmed, trimmed: found.trimmed, entriesRemoved: 0, snapshotsRemoved: 0)
                if target > found.trimmed {
                    let removed = try await connection.query(
                        "WITH gone AS (DELETE FROM fleet_log WHERE position <= \(target) RETURNING 1) SELECT count(*)::bigint FROM gone",
                        logger: logger)
                    for try await count in removed.decode(Int64.self) { result.entriesRemoved = Int(count) }
                    _ = try await connection.query("UPDATE registry_fleet_meta SET value = \(target) WHERE key = 'trimmed'", logger: logger)
                    result.trimmed = target
                }
                let snapshots = try await connection.query(
                    "WITH gone AS (DELETE FROM fleet_snapshots WHERE position < \(found.snapshot) RETURNING 1) SELECT count(*)::bigint FROM gone",
                    logger: logger)
                for try await count in snapshots.decode(Int64.self) { result.snapshotsRemoved = Int(count) }
                return result
            }
        }
    }
}

/// A snapshot whose parts are not all there (the database was changed by hand, or is damaged).
public struct FleetSnapshotMissing: Error, CustomStringConvertible {
    public let position: Int64
    public let part: Int32

    public var description: String { "the fleet's snapshot at position \(self.position) lacks part \(self.part)" }
}
