import Glibc
import Logging
import PostgresNIO
import RegistryFleet
import Synchronization
import TestSupport
import Testing

/// The fleet's log against a real PostgreSQL: appends in order, checks that see what others
/// committed, refusals that append nothing, and positions that never appear behind a reader.
@Suite(.serialized) struct FleetLogTests {
    /// A prepared fleet database on a fresh server, and `body` with a log client for `node`.
    static func withLog<T: Sendable>(
        _ server: TestPostgres, node: String, _ body: @Sendable (FleetLog) async throws -> T
    ) async throws -> T {
        try await withFleetClient(server) { client in
            _ = try await FleetSchema.prepare(client, logger: fleetTestLogger)
            return try await body(FleetLog(client: client, node: node, logger: fleetTestLogger))
        }
    }

    struct Refused: Error {}

    /// Appending tasks still running.
    final class Writers: Sendable {
        let count = Atomic<Int>(8)
    }

    @Test(.enabled(if: geteuid() == 0, "initdb runs as the postgres user, which needs root to switch to"))
    func appendsAreReadBackInOrderAndChecksSeeOthersWrites() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        try await Self.withLog(server, node: "door-1") { door in
            #expect(try await door.head() == 0)
            let first = try await door.append(gallery: "staff", after: 0, [(1, [1, 2, 3]), (1, [0, 255])])
            #expect(first.count == 2 && first[0] < first[1])
            let read = try await door.entries(after: 0)
            #expect(read.map(\.entry) == [[1, 2, 3], [0, 255]] && read.allSatisfy { $0.node == "door-1" && $0.gallery == "staff" })
            #expect(try await door.head() == first[1])
            try await Self.withLog(server, node: "desk") { desk in
                // The desk has applied nothing: its check sees door-1's two entries of the gallery,
                // and none of another gallery.
                _ = try await door.append(gallery: "visitors", after: 0, [(2, [9])])
                let seen = Mutex<[FleetEntry]>([])
                let mine = try await desk.append(gallery: "staff", after: 0, [(1, [7])]) { newer in seen.withLock { $0 = newer } }
                #expect(seen.withLock { $0.map(\.position) } == first)
                // A refused check appends nothing.
                await #expect(throws: Refused.self) {
                    _ = try await desk.append(gallery: "staff", after: mine[0], [(1, [8])]) { _ in throw Refused() }
                }
                #expect(try await desk.entries(after: 0).map(\.entry) == [[1, 2, 3], [0, 255], [9], [7]])
                try await desk.recordApplied(mine[0])
                try await desk.recordApplied(1)  // never backwards
            }
            #expect(server.psql("SELECT node || ':' || applied FROM fleet_nodes") == "desk:4")
        }
    }

    /// Eight nodes append to two galleries at once while a reader follows the log: every entry is
    /// read exactly once, in increasing positions, and none ever appears behind what was already read.
    @Test(.enabled(if: geteuid() == 0, "initdb runs as the postgres user, which needs root to switch to"))
    func aReaderNeverFindsAnEntryBehindWhatItRead() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        let perNode = 25
        try await Self.withLog(server, node: "reader") { reader in
            let writing = Writers()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for node in 0..<8 {
                    group.addTask {
                        defer { writing.count.subtract(1, ordering: .releasing) }
                        try await Self.withLog(server, node: "node-\(node)") { log in
                            for index in 0..<perNode {
                                _ = try await log.append(gallery: node % 2 == 0 ? "a" : "b", after: 0, [(1, [UInt8(node), UInt8(index)])])
                            }
                        }
                    }
                }
                // Follows the log as a replica does, until the writers are done and it is caught up.
                var last: Int64 = 0
                var read: [FleetEntry] = []
                while true {
                    let done = writing.count.load(ordering: .acquiring) == 0
                    let page = try await reader.entries(after: last, limit: 7)
                    for entry in page {
                        #expect(entry.position > last)
                        last = entry.position
                    }
                    read += page
                    if page.isEmpty {
                        if done { break }
                        try await Task.sleep(for: .milliseconds(2))
                    }
                }
                try await group.waitForAll()
                // Nothing committed behind the reader: it read every entry the table holds.
                let all = try await reader.entries(after: 0, limit: 10_000)
                #expect(all.count == 8 * perNode)
                #expect(read == all, "\(all.count - read.count) entries committed behind the reader were never read")
            }
        }
    }
}
