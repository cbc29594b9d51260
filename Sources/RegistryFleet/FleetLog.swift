import Logging
import NIOCore
import PostgresNIO

/// One change in the fleet's log: its place in the one fleet-wide order, its gallery, the node that
/// wrote it, its kind and its entry (opaque here: the engine's encoding, templates sealed).
public struct FleetEntry: Sendable, Hashable {
    public let position: Int64
    public let gallery: String
    public let node: String
    public let kind: Int16
    public let entry: [UInt8]

    public init(position: Int64, gallery: String, node: String, kind: Int16, entry: [UInt8]) {
        self.position = position
        self.gallery = gallery
        self.node = node
        self.kind = kind
        self.entry = entry
    }
}

/// The fleet's change log in PostgreSQL, as one node uses it (docs/fleet.md, "The log").
///
/// Appends to a gallery are serialised by a transaction-scoped advisory lock on the gallery's name:
/// the append's check (a registration's similar-face check) sees every entry of the gallery committed
/// before it anywhere, and nothing of the gallery commits between the check and the append. Positions
/// are taken, and committed, under one fleet-wide advisory lock held to the commit, so they commit in
/// their order: a reader that has read up to position p never later finds an entry below p (with
/// positions taken outside it, a transaction holding a smaller one could commit after a reader had
/// passed it, and the entry would be skipped for good).
public struct FleetLog: Sendable {
    let client: PostgresClient
    /// This node's name, recorded with what it writes and what it applies.
    public let node: String
    let logger: Logger

    /// The lock that orders positions (`registry` + 1 in ASCII, apart from the schema's).
    static let orderLockKey: Int64 = 0x7265_6769_7374_7279 + 1

    public init(client: PostgresClient, node: String, logger: Logger) {
        self.client = client
        self.node = node
        self.logger = logger
    }

    /// Appends `entries` (kind, entry) to `gallery`'s changes in one transaction, after `check` has
    /// seen the gallery's entries committed after position `after` (what this node has not applied
    /// yet) and not refused: both under the gallery's lock.
    /// - Returns: the positions given to the entries, in order.
    /// - Throws: what `check` throws (nothing is appended), or PostgreSQL's errors.
    public func append(
        gallery: String, after: Int64, _ entries: [(kind: Int16, entry: [UInt8])],
        check: @Sendable ([FleetEntry]) throws -> Void = { _ in }
    ) async throws -> [Int64] {
        let logger = self.logger
        let node = self.node
        return try await self.client.transaction(logger: logger) { connection in
            _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(gallery), 0))", logger: logger)
            try check(try await Self.entries(connection, gallery: gallery, after: after, logger: logger))
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.orderLockKey))", logger: logger)
            var positions: [Int64] = []
            for (kind, entry) in entries {
                // bytea binds from a ByteBuffer (an array of bytes would bind as "char"[]).
                let bytes = ByteBuffer(bytes: entry)
                let rows = try await connection.query(
                    "INSERT INTO fleet_log (gallery, node, kind, entry) VALUES (\(gallery), \(node), \(kind), \(bytes)) RETURNING position",
                    logger: logger)
                for try await position in rows.decode(Int64.self) { positions.append(position) }
            }
            return positions
        }
    }

    /// Up to `limit` entries after `position`, in order (every gallery).
    public func entries(after position: Int64, limit: Int = 1000) async throws -> [FleetEntry] {
        let rows = try await self.client.query(
            "SELECT position, gallery, node, kind, entry FROM fleet_log WHERE position > \(position) ORDER BY position LIMIT \(Int64(limit))",
            logger: self.logger)
        return try await Self.decode(rows)
    }

    /// The last position committed (0 for an empty log).
    public func head() async throws -> Int64 {
        let rows = try await self.client.query("SELECT coalesce(max(position), 0)::bigint FROM fleet_log", logger: self.logger)
        for try await head in rows.decode(Int64.self) { return head }
        return 0
    }

    /// Records that this node has applied the log up to `position` (and that it was seen now).
    public func recordApplied(_ position: Int64) async throws {
        _ = try await self.client.query(
            """
            INSERT INTO fleet_nodes (node, applied, seen_at) VALUES (\(self.node), \(position), now())
            ON CONFLICT (node) DO UPDATE SET applied = greatest(fleet_nodes.applied, excluded.applied), seen_at = now()
            """,
            logger: self.logger)
    }

    /// A gallery's entries after `position`, in order, inside an append's transaction.
    private static func entries(_ connection: PostgresConnection, gallery: String, after position: Int64, logger: Logger) async throws
        -> [FleetEntry]
    {
        try await Self.decode(
            connection.query(
                "SELECT position, gallery, node, kind, entry FROM fleet_log WHERE gallery = \(gallery) AND position > \(position) ORDER BY position",
                logger: logger))
    }

    /// Rows of (position, gallery, node, kind, entry) as entries.
    private static func decode(_ rows: PostgresRowSequence) async throws -> [FleetEntry] {
        var found: [FleetEntry] = []
        for try await (position, gallery, node, kind, entry) in rows.decode((Int64, String, String, Int16, ByteBuffer).self) {
            found.append(FleetEntry(position: position, gallery: gallery, node: node, kind: kind, entry: Array(buffer: entry)))
        }
        return found
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
