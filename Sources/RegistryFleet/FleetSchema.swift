import Logging
import PostgresNIO

/// The fleet's tables in PostgreSQL, versioned like the LMDB schema: every node creates or migrates
/// them when it joins, under one transaction-scoped advisory lock, so two nodes starting at once
/// neither race nor half-create; a database of a newer schema is refused (its nodes run a newer
/// `registryd`).
///
/// Version 1:
///
///     registry_fleet_meta  key text → value bigint: schema_version, fleet_id (random, fixed when the
///                          fleet is created: a node's store records it, so a store of another fleet
///                          is refused)
///     fleet_log            position bigserial: one fleet-wide order of changes; gallery, the node
///                          that wrote it, its kind and the entry (sealed template data, never clear)
///     fleet_nodes          node → the log position it has applied, and when it was last seen
///                          (the log is trimmed below the lowest applied position)
///
/// Version 2 (compaction, docs/fleet.md):
///
///     fleet_snapshots      position → the replicas' state at that position (a sealed state image,
///                          in parts), written by a node, so that the log before it can be trimmed
///     fleet_snapshot_parts (position, part) → the sealed bytes of one part
///     registry_fleet_meta  trimmed: the last position removed from the log (a node behind it
///                          loads the newest snapshot instead of the entries it lacks)
public enum FleetSchema {
    /// The version this build creates and understands.
    public static let version: Int64 = 2

    /// The advisory lock key the schema's creation and migration hold (`registryd` in ASCII).
    static let lockKey: Int64 = 0x7265_6769_7374_7279

    /// What ``prepare(_:logger:)`` found and did.
    public struct Prepared: Sendable, Equatable {
        /// The schema version before (nil: the database held no fleet).
        public let found: Int64?
        /// The fleet's identity.
        public let fleetId: Int64

        public init(found: Int64?, fleetId: Int64) {
            self.found = found
            self.fleetId = fleetId
        }
    }

    /// Creates the tables in an empty database, or checks (and, once there are older versions,
    /// migrates) those there.
    /// - Throws: ``FleetSchemaError`` for a newer schema; PostgreSQL's errors as they come.
    public static func prepare(_ client: PostgresClient, logger: Logger) async throws -> Prepared {
        try await client.transaction(logger: logger) { connection in
            // Every query names its logger: without it, PostgresNIO picks its future-returning API,
            // which nothing awaits inside a transaction (the transaction then commits nothing).
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: logger)
            _ = try await connection.query(
                "CREATE TABLE IF NOT EXISTS registry_fleet_meta (key text PRIMARY KEY, value bigint NOT NULL)", logger: logger)
            let found = try await Self.meta("schema_version", connection, logger: logger)
            if let found, found > Self.version {
                throw FleetSchemaError.newer(found: found, known: Self.version)
            }
            if found == nil {
                for statement in Self.version1 { _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                _ = try await connection.query("INSERT INTO registry_fleet_meta (key, value) VALUES ('schema_version', 1)", logger: logger)
                // A random identity, fixed for the fleet's life.
                _ = try await connection.query(
                    "INSERT INTO registry_fleet_meta (key, value) VALUES ('fleet_id', (random() * 9.2e18)::bigint)", logger: logger)
            }
            // Each version's migration in turn, from the one found (a new database starts at 1).
            for (target, statements) in Self.migrations where target > (found ?? 1) {
                for statement in statements { _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                _ = try await connection.query(
                    "UPDATE registry_fleet_meta SET value = \(target) WHERE key = 'schema_version'", logger: logger)
            }
            guard let fleetId = try await Self.meta("fleet_id", connection, logger: logger) else {
                throw FleetSchemaError.damaged("registry_fleet_meta has a schema version but no fleet_id")
            }
            return Prepared(found: found, fleetId: fleetId)
        }
    }

    /// Version 1's tables, created in the transaction that records the version.
    static let version1 = [
        """
        CREATE TABLE fleet_log (
            position bigserial PRIMARY KEY,
            gallery text NOT NULL,
            node text NOT NULL,
            kind smallint NOT NULL,
            entry bytea NOT NULL,
            committed_at timestamptz NOT NULL DEFAULT now())
        """,
        // An append's check reads its gallery's entries after a position.
        "CREATE INDEX fleet_log_gallery ON fleet_log (gallery, position)",
        """
        CREATE TABLE fleet_nodes (
            node text PRIMARY KEY,
            applied bigint NOT NULL DEFAULT 0,
            seen_at timestamptz NOT NULL DEFAULT now())
        """,
    ]

    /// The statements that take the schema from the version before to the key's, in order.
    static let migrations: [(Int64, [String])] = [(2, Self.version2)]

    /// Version 2: snapshots of the replicas' state, and the log's trimmed start.
    static let version2 = [
        """
        CREATE TABLE fleet_snapshots (
            position bigint PRIMARY KEY,
            node text NOT NULL,
            parts integer NOT NULL,
            bytes bigint NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now())
        """,
        """
        CREATE TABLE fleet_snapshot_parts (
            position bigint NOT NULL REFERENCES fleet_snapshots (position) ON DELETE CASCADE,
            part integer NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (position, part))
        """,
        "INSERT INTO registry_fleet_meta (key, value) VALUES ('trimmed', 0)",
    ]

    private static func meta(_ key: String, _ connection: PostgresConnection, logger: Logger) async throws -> Int64? {
        let rows = try await connection.query("SELECT value FROM registry_fleet_meta WHERE key = \(key)", logger: logger)
        for try await value in rows.decode(Int64.self) { return value }
        return nil
    }
}

/// A fleet database this build cannot use.
public enum FleetSchemaError: Error, Sendable, Equatable, CustomStringConvertible {
    case newer(found: Int64, known: Int64)
    case damaged(String)

    public var description: String {
        switch self {
        case .newer(let found, let known):
            "the fleet database has schema version \(found); this registryd knows up to \(known): upgrade registryd on this node"
        case .damaged(let what): "the fleet database is damaged: \(what)"
        }
    }
}

extension FleetLocation {
    /// The PostgresNIO client configuration for `endpoint` (the first server by default), with
    /// `password` (read from a file by the caller; nil: none, as with peer or trust authentication).
    public func clientConfiguration(password: String?, endpoint: Endpoint? = nil) -> PostgresClient.Configuration {
        let endpoint = endpoint ?? self.endpoint
        return switch endpoint {
        case .tcp(let host, let port):
            PostgresClient.Configuration(host: host, port: port, username: self.user, password: password, database: self.database, tls: .disable)
        case .unixSocket:
            PostgresClient.Configuration(unixSocketPath: endpoint.socketPath!, username: self.user, password: password, database: self.database)
        }
    }
}
