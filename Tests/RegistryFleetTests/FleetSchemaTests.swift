import Glibc
import Logging
import PostgresNIO
import TestSupport
import Testing

@testable import RegistryFleet

/// The fleet's schema against a real PostgreSQL started for the test (Debian's server, initdb and
/// pg_ctl in a temporary directory).
@Suite(.serialized) struct FleetSchemaTests {
    /// A first node creates the tables and the fleet's identity; the next finds them and keeps it;
    /// nodes preparing at once all see one fleet.
    @Test
    func theSchemaIsCreatedOnceAndFoundAfter() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        let first = try await withFleetClient(server) { try await FleetSchema.prepare($0, logger: fleetTestLogger) }
        #expect(first.found == nil)
        #expect(server.psql("SELECT value FROM registry_fleet_meta WHERE key = 'schema_version'") == "\(FleetSchema.version)")
        #expect(server.psql("SELECT count(*) FROM fleet_log") == "0")
        #expect(server.psql("SELECT count(*) FROM fleet_nodes") == "0")
        let again = try await withFleetClient(server) { try await FleetSchema.prepare($0, logger: fleetTestLogger) }
        #expect(again == FleetSchema.Prepared(found: FleetSchema.version, fleetId: first.fleetId))
        // Eight nodes at once: the advisory lock makes one create, the others find.
        let together = try await withThrowingTaskGroup(of: FleetSchema.Prepared.self) { group in
            for _ in 0..<8 { group.addTask { try await withFleetClient(server) { try await FleetSchema.prepare($0, logger: fleetTestLogger) } } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(together.map(\.fleetId)) == [first.fleetId])
        #expect(server.psql("SELECT count(*) FROM registry_fleet_meta") == "3")
    }

    /// A database of schema 1 (its log and nodes kept) is migrated to this build's version, once.
    @Test
    func aVersion1DatabaseIsMigrated() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        for statement in ["CREATE TABLE registry_fleet_meta (key text PRIMARY KEY, value bigint NOT NULL)"] + FleetSchema.version1 + [
            "INSERT INTO registry_fleet_meta (key, value) VALUES ('schema_version', 1), ('fleet_id', 77)",
            "INSERT INTO fleet_log (gallery, node, kind, entry) VALUES ('staff', 'a', 1, '\\x01')",
        ] {
            _ = server.psql(statement)
        }
        let prepared = try await withFleetClient(server) { try await FleetSchema.prepare($0, logger: fleetTestLogger) }
        #expect(prepared == FleetSchema.Prepared(found: 1, fleetId: 77))
        #expect(server.psql("SELECT value FROM registry_fleet_meta WHERE key = 'schema_version'") == "\(FleetSchema.version)")
        #expect(server.psql("SELECT value FROM registry_fleet_meta WHERE key = 'trimmed'") == "0")
        #expect(server.psql("SELECT count(*) FROM fleet_log") == "1")
        #expect(server.psql("SELECT count(*) FROM fleet_snapshots") == "0")
        let again = try await withFleetClient(server) { try await FleetSchema.prepare($0, logger: fleetTestLogger) }
        #expect(again.found == FleetSchema.version)
    }

    /// Nodes of two new empty databases start two fleets: their identities differ, which is what
    /// lets a store of one fleet be told from another's.
    @Test
    func newerSchemasAreRefusedAndFleetsDiffer() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        let first = try await withFleetClient(server) { try await FleetSchema.prepare($0, logger: fleetTestLogger) }
        #expect(server.psql("UPDATE registry_fleet_meta SET value = 99 WHERE key = 'schema_version'") == "UPDATE 1")
        do {
            _ = try await withFleetClient(server) { try await FleetSchema.prepare($0, logger: fleetTestLogger) }
            Issue.record("a newer schema was accepted")
        } catch let error as FleetSchemaError {
            #expect(error == .newer(found: 99, known: FleetSchema.version))
            #expect(error.description.contains("upgrade registryd"))
        }
        // Nothing was changed by the refusal.
        #expect(server.psql("SELECT value FROM registry_fleet_meta WHERE key = 'schema_version'") == "99")
        #expect(server.psql("CREATE DATABASE other", database: "postgres").hasPrefix("CREATE DATABASE"))
        let other = try await withFleetClient(server, database: "other") { try await FleetSchema.prepare($0, logger: fleetTestLogger) }
        #expect(other.found == nil && other.fleetId != first.fleetId)
    }
}
