import Logging
import PostgresNIO
import RegistryFleet
import TestSupport
import Testing

/// Compaction against a real PostgreSQL: the log trimmed up to the newest snapshot only as far as
/// every node seen lately has applied it (or as far as the retention time says), the head kept,
/// older snapshots removed, a snapshot read whole.
@Suite(.serialized) struct FleetCompactionTests {
    static let erasure: Int16 = 3

    @Test
    func theLogIsTrimmedUpToTheSnapshotAsFarAsEveryNodeApplied() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        try await FleetLogTests.withLog(server, node: "a") { a in
            let positions = try await a.append((1...10).map { ("staff", $0 == 7 ? Self.erasure : 1, [UInt8($0)]) })
            #expect(positions == Array(1...10))
            try await a.recordApplied(10)
            try await FleetLogTests.withLog(server, node: "b") { b in try await b.recordApplied(4) }
            // Nothing to trim to before a snapshot exists.
            #expect(try await a.compact(retention: .seconds(3600))?.trimmed == 0)
            #expect(
                try await a.sinceSnapshot(upTo: 6, erasureKind: Self.erasure)
                    == FleetLogTail(snapshot: 0, snapshotAge: nil, entries: 6, erasures: false))
            #expect(try await a.sinceSnapshot(upTo: 10, erasureKind: Self.erasure).erasures)

            #expect(try await a.writeSnapshot(position: 8, parts: [[1, 2], [3], []]))
            #expect(try await !a.writeSnapshot(position: 6, parts: [[9]]))  // an older state than the newest
            let tail = try await a.sinceSnapshot(upTo: 10, erasureKind: Self.erasure)
            #expect(tail.snapshot == 8 && tail.entries == 2 && !tail.erasures && tail.snapshotAge != nil)
            // b has applied 4: the log keeps what b still needs.
            #expect(
                try await a.compact(retention: .seconds(3600))
                    == FleetCompaction(trimmedBefore: 0, trimmed: 4, entriesRemoved: 4, snapshotsRemoved: 0))
            #expect(try await a.read(after: 4).trimmed == 4)
            #expect(try await a.entries(after: 0).map(\.position) == Array(5...10))
            // A reader behind the trimmed start learns it with what it reads, in the same statement.
            let behind = try await a.read(after: 2)
            #expect(behind.trimmed == 4 && behind.entries.map(\.position) == Array(5...10))
            try await FleetLogTests.withLog(server, node: "b") { b in try await b.recordApplied(10) }
            #expect(try await a.compact(retention: .seconds(3600))?.trimmed == 8)
            // A snapshot at the head: the whole log goes, the head stays where it was, and positions go on after it.
            #expect(try await a.writeSnapshot(position: 10, parts: [[10, 11]]))
            #expect(
                try await a.compact(retention: .seconds(3600))
                    == FleetCompaction(trimmedBefore: 8, trimmed: 10, entriesRemoved: 2, snapshotsRemoved: 1))
            #expect(server.psql("SELECT count(*) FROM fleet_log") == "0")
            let nothing = try await a.read(after: 8)
            #expect(nothing.trimmed == 10 && nothing.entries.isEmpty)
            #expect(try await a.head() == 10)
            #expect(try await a.lag(after: 10).head == 10)
            let snapshot = try #require(try await a.newestSnapshot())
            #expect(snapshot.position == 10 && snapshot.parts == [[10, 11]])
            #expect(server.psql("SELECT count(*) FROM fleet_snapshot_parts") == "1")
            #expect(try await a.append([("staff", 1, [11])]) == [11])
        }
    }

    @Test
    func theRetentionTimeLetsTheLogGoPastNodesThatStayedAway() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        try await FleetLogTests.withLog(server, node: "a") { a in
            _ = try await a.append((1...6).map { _ in ("staff", 1, [0]) })
            try await a.recordApplied(6)
            try await FleetLogTests.withLog(server, node: "gone") { gone in try await gone.recordApplied(2) }
            try await FleetLogTests.withLog(server, node: "slow") { slow in try await slow.recordApplied(3) }
            #expect(try await a.writeSnapshot(position: 6, parts: [[6]]))
            #expect(try await a.compact(retention: .seconds(3600))?.trimmed == 2)
            // Not seen for two hours: no longer waited for.
            #expect(server.psql("UPDATE fleet_nodes SET seen_at = now() - interval '2 hours' WHERE node = 'gone'") == "UPDATE 1")
            #expect(try await a.compact(retention: .seconds(3600))?.trimmed == 3)
            // Entries older than the retention time go even though slow, seen lately, lacks them.
            #expect(server.psql("UPDATE fleet_log SET committed_at = now() - interval '2 hours' WHERE position <= 5") == "UPDATE 2")
            #expect(try await a.compact(retention: .seconds(3600))?.trimmed == 5)
            #expect(try await a.entries(after: 3).map(\.position) == [6])
        }
    }

    @Test
    func aSnapshotWithAPartMissingIsRefused() async throws {
        let server = try TestPostgres()
        defer { server.remove() }
        try await FleetLogTests.withLog(server, node: "a") { a in
            let none = try await a.newestSnapshot()
            #expect(none == nil)
            #expect(try await a.writeSnapshot(position: 3, parts: [[1], [2], [3]]))
            #expect(server.psql("DELETE FROM fleet_snapshot_parts WHERE part = 1") == "DELETE 1")
            let error = await #expect(throws: FleetSnapshotMissing.self) { _ = try await a.newestSnapshot() }
            #expect(error?.description.contains("lacks part 1") == true)
        }
    }
}
