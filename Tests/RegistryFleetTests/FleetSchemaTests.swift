import Glibc
import Logging
import PostgresNIO
import RegistryFleet
import TestSupport
import Testing

/// The fleet's schema against a real PostgreSQL started for the test (Debian's server, initdb and
/// pg_ctl in a temporary directory).
@Suite(.serialized) struct FleetSchemaTests {
    static let logger = Logger(label: "fleet-schema-tests")

    /// Runs `body` with a client of the test server's fleet database (its run loop beside it).
    static func withClient<T: Sendable>(_ server: TestPostgres, _ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let location = try FleetLocation(url: server.url())
        let client = PostgresClient(configuration: location.clientConfiguration(password: nil), backgroundLogger: Self.logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// A first node creates the tables and the fleet's identity; the next finds them and keeps it;
    /// nodes preparing at once all see one fleet.
    @Test(.enabled(if: geteuid() == 0, "initdb runs as the postgres user, which needs root to switch to"))
    func theSchemaIsCreatedOnceAndFoundAfter() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        let first = try await Self.withClient(server) { try await FleetSchema.prepare($0, logger: Self.logger) }
        #expect(first.found == nil)
        #expect(server.psql("SELECT value FROM registry_fleet_meta WHERE key = 'schema_version'") == "\(FleetSchema.version)")
        #expect(server.psql("SELECT count(*) FROM fleet_log") == "0")
        #expect(server.psql("SELECT count(*) FROM fleet_nodes") == "0")
        let again = try await Self.withClient(server) { try await FleetSchema.prepare($0, logger: Self.logger) }
        #expect(again == FleetSchema.Prepared(found: FleetSchema.version, fleetId: first.fleetId))
        // Eight nodes at once: the advisory lock makes one create, the others find.
        let together = try await withThrowingTaskGroup(of: FleetSchema.Prepared.self) { group in
            for _ in 0..<8 { group.addTask { try await Self.withClient(server) { try await FleetSchema.prepare($0, logger: Self.logger) } } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(together.map(\.fleetId)) == [first.fleetId])
        #expect(server.psql("SELECT count(*) FROM registry_fleet_meta") == "2")
    }

    /// Nodes of two new empty databases start two fleets: their identities differ, which is what
    /// lets a store of one fleet be told from another's.
    @Test(.enabled(if: geteuid() == 0, "initdb runs as the postgres user, which needs root to switch to"))
    func newerSchemasAreRefusedAndFleetsDiffer() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        let first = try await Self.withClient(server) { try await FleetSchema.prepare($0, logger: Self.logger) }
        #expect(server.psql("UPDATE registry_fleet_meta SET value = 99 WHERE key = 'schema_version'") == "UPDATE 1")
        do {
            _ = try await Self.withClient(server) { try await FleetSchema.prepare($0, logger: Self.logger) }
            Issue.record("a newer schema was accepted")
        } catch let error as FleetSchemaError {
            #expect(error == .newer(found: 99, known: FleetSchema.version))
            #expect(error.description.contains("upgrade registryd"))
        }
        // Nothing was changed by the refusal.
        #expect(server.psql("SELECT value FROM registry_fleet_meta WHERE key = 'schema_version'") == "99")
        #expect(server.psql("CREATE DATABASE other", database: "postgres").hasPrefix("CREATE DATABASE"))
        let otherLocation = try FleetLocation(url: server.url(database: "other"))
        let client = PostgresClient(configuration: otherLocation.clientConfiguration(password: nil), backgroundLogger: Self.logger)
        let other = try await withThrowingTaskGroup(of: FleetSchema.Prepared?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await FleetSchema.prepare(client, logger: Self.logger)
        }
        #expect(other.found == nil && other.fleetId != first.fleetId)
    }
}
