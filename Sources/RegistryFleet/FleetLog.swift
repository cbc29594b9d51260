import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// An append that failed: whether its entries may have been committed all the same (the failure
/// came with the `COMMIT`: the answer was lost), or certainly were not.
public struct FleetAppendError: Error, CustomStringConvertible {
    public let mayHaveCommitted: Bool
    public let underlying: any Error

    public var description: String {
        "\(self.mayHaveCommitted ? "the commit of an append was not confirmed" : "an append failed"): \(String(reflecting: self.underlying).prefix(300))"
    }
}

/// How far an append got, for a caller that stops waiting for it (a deadline): either its `COMMIT`
/// was sent (it may have been committed), or the caller gave it up first, and then it never sends
/// one. The second matters: an append given up is cancelled but not stopped (PostgresNIO may go on
/// with its statements once a server answers), and one that committed after its caller was told
/// "not carried out" would be a write refused to its client yet applied on every node (found by the
/// fleet fault loop: PostgreSQL restarted while an append waited for a connection).
public final class FleetAppendProgress: Sendable {
    private static let open = 0
    private static let commitSent = 1
    private static let givenUp = 2
    private let state = Atomic<Int>(FleetAppendProgress.open)

    public init() {}

    /// The append is about to send its `COMMIT`; false when its caller gave it up (then it must not).
    func sendingCommit() -> Bool {
        self.state.compareExchange(expected: Self.open, desired: Self.commitSent, ordering: .acquiringAndReleasing).exchanged
            || self.state.load(ordering: .acquiring) == Self.commitSent
    }

    /// Gives the append up unless its `COMMIT` was sent: true when it was given up (so nothing of it
    /// is or will be committed), false when it may have committed.
    public func giveUp() -> Bool {
        self.state.compareExchange(expected: Self.open, desired: Self.givenUp, ordering: .acquiringAndReleasing).exchanged
            || self.state.load(ordering: .acquiring) == Self.givenUp
    }
}

/// One change in the fleet's log: its place in the one fleet-wide order, its gallery, the node that
/// wrote it, its kind and its entry (opaque here: the engine's encoding, templates sealed).
public struct FleetEntry: Sendable, Hashable {
    public let position: Int64
    public let gallery: String
    public let node: String
    public let kind: Int16
    public let entry: [UInt8]
    /// When it was committed (PostgreSQL's clock, microseconds since 1970).
    public let committedAt: Int64

    public init(position: Int64, gallery: String, node: String, kind: Int16, entry: [UInt8], committedAt: Int64 = 0) {
        self.position = position
        self.gallery = gallery
        self.node = node
        self.kind = kind
        self.entry = entry
        self.committedAt = committedAt
    }
}

/// The fleet's change log in PostgreSQL, as one node uses it (docs/fleet.md, "The log").
///
/// Positions are taken, and committed, under one fleet-wide advisory lock held to the commit, so
/// they commit in their order: a reader that has read up to position p never later finds an entry below p (with
/// positions taken outside it, a transaction holding a smaller one could commit after a reader had
/// passed it, and the entry would be skipped for good).
public struct FleetLog: Sendable {
    /// The primary of the fleet's database, where every query goes.
    public let database: FleetDatabase
    /// This node's name, recorded with what it writes and what it applies.
    public let node: String
    let logger: Logger

    /// The lock that orders positions (`registry` + 1 in ASCII, apart from the schema's).
    public static let orderLockKey: Int64 = 0x7265_6769_7374_7279 + 1

    public init(database: FleetDatabase, node: String, logger: Logger) {
        self.database = database
        self.node = node
        self.logger = logger
    }

    /// The log on one server's pool, which the caller runs.
    public init(client: PostgresClient, node: String, logger: Logger) {
        self.init(database: FleetDatabase(client: client, logger: logger), node: node, logger: logger)
    }

    /// Appends `entries` in one transaction, in their order, and returns the positions they were
    /// given (ascending). A node's group of writes is one append, as it is one LMDB commit.
    /// - Throws: ``FleetAppendError`` saying whether the entries were certainly not committed (the
    ///   failure came before `COMMIT` was sent) or may have been (it came with `COMMIT`).
    /// - Parameter progress: told when the `COMMIT` is sent, for a caller that gives up waiting (a
    ///   timeout): before it, nothing can have been committed.
    public func append(
        _ entries: [(gallery: String, kind: Int16, entry: [UInt8])], progress: FleetAppendProgress = FleetAppendProgress()
    ) async throws(FleetAppendError) -> [Int64] {
        guard !entries.isEmpty else { return [] }
        let logger = self.logger
        let galleries = entries.map(\.gallery)
        let nodes = [String](repeating: self.node, count: entries.count)
        let kinds = entries.map(\.kind)
        // bytea binds from a ByteBuffer (an array of bytes would bind as "char"[]).
        let bytes = entries.map { ByteBuffer(bytes: $0.entry) }
        do {
            return try await self.database.withPrimary { client in
                try await client.withConnection { connection in
                    var positions: [Int64] = []
                    do {
                        _ = try await connection.query("BEGIN", logger: logger)
                        _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.orderLockKey))", logger: logger)
                        // One statement for the group; rows inserted in the arrays' order take ascending positions.
                        let rows = try await connection.query(
                            """
                            INSERT INTO fleet_log (gallery, node, kind, entry)
                            SELECT g, n, k, e FROM unnest(\(galleries)::text[], \(nodes)::text[], \(kinds)::int2[], \(bytes)::bytea[])
                                WITH ORDINALITY AS t(g, n, k, e, i) ORDER BY i
                            RETURNING position
                            """,
                            logger: logger)
                        for try await position in rows.decode(Int64.self) { positions.append(position) }
                        // Delivered at the commit to every node listening (``listen(_:)``): they follow at
                        // once instead of polling.
                        _ = try await connection.query(PostgresQuery(unsafeSQL: "NOTIFY \(Self.channel)"), logger: logger)
                    } catch {
                        _ = try? await connection.query("ROLLBACK", logger: logger)
                        throw FleetAppendError(mayHaveCommitted: false, underlying: error)
                    }
                    guard progress.sendingCommit() else {
                        // Its caller stopped waiting and told its clients that nothing was written.
                        _ = try? await connection.query("ROLLBACK", logger: logger)
                        throw FleetAppendError(mayHaveCommitted: false, underlying: FleetTimeout())
                    }
                    do {
                        _ = try await connection.query("COMMIT", logger: logger)
                    } catch {
                        throw FleetAppendError(mayHaveCommitted: true, underlying: error)
                    }
                    return positions.sorted()
                }
            }
        } catch let error as FleetAppendError {
            throw error
        } catch {
            // No connection (nothing reached the server), or the call was ended from outside
            // (``FleetDatabase/withPrimary(_:)``): then whether its COMMIT was sent says.
            throw FleetAppendError(mayHaveCommitted: !progress.giveUp(), underlying: error)
        }
    }

    /// The notification channel appends are announced on.
    static let channel = "registry_fleet_log"

    /// Calls `appended` whenever an append commits anywhere in the fleet, until cancelled or the
    /// connection fails (then it throws; the caller listens again).
    public func listen(_ appended: @escaping @Sendable () -> Void) async throws {
        try await self.database.withPrimary { client in
            try await client.withConnection { connection in
                try await connection.listen(on: Self.channel) { notifications in
                    appended()  // what was appended before the listening began
                    for try await _ in notifications { appended() }
                }
            }
        }
    }

    /// Up to `limit` entries after `position`, in order (every gallery).
    public func entries(after position: Int64, limit: Int = 1000) async throws -> [FleetEntry] {
        try await self.read(after: position, limit: limit).entries
    }

    /// Up to `limit` entries after `position`, in order, and the log's trimmed start, read in one
    /// statement (one snapshot of the database): a trimmed start at or below `position` means that
    /// nothing after `position` was trimmed, so the entries read are all there is up to the last.
    public func read(after position: Int64, limit: Int = 1000) async throws -> (entries: [FleetEntry], trimmed: Int64) {
        try await self.database.withPrimary { client in
            // The trimmed start rides on every row, and on one row of nulls when there is no entry.
            let rows = try await client.query(
                """
                SELECT \(unescaped: Self.trimmedSQL),
                       l.position, l.gallery, l.node, l.kind, l.entry, l.committed
                FROM (SELECT 1) AS one LEFT JOIN LATERAL (
                    SELECT position, gallery, node, kind, entry, (extract(epoch FROM committed_at) * 1000000)::bigint AS committed
                    FROM fleet_log WHERE position > \(position) ORDER BY position LIMIT \(Int64(limit))) AS l ON true
                """,
                logger: self.logger)
            var trimmed: Int64 = 0
            var found: [FleetEntry] = []
            for try await (start, position, gallery, node, kind, entry, committedAt) in rows.decode(
                (Int64, Int64?, String?, String?, Int16?, ByteBuffer?, Int64?).self)
            {
                trimmed = start
                guard let position, let gallery, let node, let kind, let entry, let committedAt else { continue }
                found.append(
                    FleetEntry(position: position, gallery: gallery, node: node, kind: kind, entry: Array(buffer: entry), committedAt: committedAt))
            }
            return (found, trimmed)
        }
    }

    /// The last position committed (0 for an empty log; the trimmed start when the whole log was
    /// trimmed), read once every append in progress has ended: it takes the appends' order lock,
    /// which an append holds until its transaction ends, its wait for a synchronous standby
    /// included. An append whose COMMIT was sent but not confirmed is then in the log below this
    /// head, or never will be. (Read without the lock, a head could miss an append still waiting
    /// for its standby, which then committed behind it: the fault loop found writes refused so and
    /// stored on every node.)
    public func head() async throws -> Int64 {
        try await self.database.withPrimary { client in
            try await client.transaction(logger: self.logger) { connection in
                _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.orderLockKey))", logger: self.logger)
                let rows = try await connection.query("SELECT \(unescaped: Self.headSQL)", logger: self.logger)
                for try await head in rows.decode(Int64.self) { return head }
                return 0
            }
        }
    }

    /// The head as one SQL expression (a compaction may have removed every entry: the positions
    /// taken go on after its trimmed start).
    static let headSQL = "greatest(coalesce((SELECT max(position) FROM fleet_log), 0), \(trimmedSQL))"

    /// The log's trimmed start as one SQL expression (0: never trimmed): the last position removed
    /// from the log, below which a node cannot follow it and loads the newest snapshot instead.
    static let trimmedSQL = "coalesce((SELECT value FROM registry_fleet_meta WHERE key = 'trimmed'), 0)::bigint"

    /// The last position committed, and when the first entry after `position` was committed
    /// (microseconds since 1970, as ``FleetEntry/committedAt``; nil: none is), for a node's lag.
    public func lag(after position: Int64) async throws -> (head: Int64, oldest: Int64?) {
        try await self.database.withPrimary { client in
            let rows = try await client.query(
                """
                SELECT \(unescaped: Self.headSQL),
                       (SELECT (extract(epoch FROM committed_at) * 1000000)::bigint FROM fleet_log WHERE position > \(position)
                        ORDER BY position LIMIT 1)
                """,
                logger: self.logger)
            for try await (head, oldest) in rows.decode((Int64, Int64?).self) { return (head, oldest) }
            return (0, nil)
        }
    }

    /// Records that this node has applied the log up to `position` (and that it was seen now).
    public func recordApplied(_ position: Int64) async throws {
        try await self.database.withPrimary { client in
            _ = try await client.query(
                """
                INSERT INTO fleet_nodes (node, applied, seen_at) VALUES (\(self.node), \(position), now())
                ON CONFLICT (node) DO UPDATE SET applied = greatest(fleet_nodes.applied, excluded.applied), seen_at = now()
                """,
                logger: self.logger)
        }
    }
}

extension PostgresClient {
    /// `withTransaction`, with an error thrown by `body` itself (a refused check, a newer schema)
    /// given back as it was thrown once the transaction rolled back, instead of wrapped as the
    /// transaction's failure; PostgreSQL's own errors and failed rollbacks stay wrapped.
    func transaction<T>(logger: Logger, _ body: (PostgresConnection) async throws -> sending T) async throws -> sending T {
        do {
            return try await self.withTransaction(logger: logger, body)
        } catch let error as PostgresTransactionError {
            if let own = error.closureError, !(own is PSQLError), error.rollbackError == nil { throw own }
            throw error
        }
    }
}
