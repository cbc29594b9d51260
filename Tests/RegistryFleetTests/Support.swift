import Logging
import PostgresNIO
import RegistryFleet
import TestSupport

let fleetTestLogger = Logger(label: "fleet-tests")

/// Runs `body` with a client of `database` on the test server, its run loop beside it, ended after.
func withFleetClient<T: Sendable>(
    _ server: TestPostgres, database: String = "registry", _ body: @Sendable (PostgresClient) async throws -> T
) async throws -> T {
    let location = try FleetLocation(url: server.url(database: database))
    let client = PostgresClient(configuration: location.clientConfiguration(password: nil), backgroundLogger: fleetTestLogger)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            await client.run()
            return nil
        }
        defer { group.cancelAll() }
        return try await body(client)
    }
}
