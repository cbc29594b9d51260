import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

@Suite struct AuditTests {
    func entry(_ operation: String, _ identifiers: [String], outcome: String = "ok", time: Int64 = AuditEntry.now(), uid: UInt32 = 1000) -> AuditEntry
    {
        AuditEntry(time: time, uid: uid, pid: 42, operation: operation, gallery: "default", identifiers: identifiers, outcome: outcome)
    }

    @Test func entriesAreWrittenWithTheNextCommitAndQueriedByIdentifierOutcomeAndTime() async throws {
        try await withEngine { engine in
            let start = AuditEntry.now()
            engine.recordAudit(self.entry("register", ["alice"]))
            engine.recordAudit(self.entry("identify", ["alice", "bob"], outcome: "match"))
            engine.recordAudit(
                AuditEntry(
                    time: AuditEntry.now(), uid: 1001, pid: 43, operation: "delete_identifier", gallery: "default", identifiers: [],
                    outcome: "refused", errorCode: "PERMISSION_DENIED"))
            _ = try await engine.register(identifier: "carol", face: Face(arcface()))  // a later write: the trail is flushed by then
            let all = try await engine.auditEntries(AuditQuery())
            #expect(all.map(\.operation) == ["register", "identify", "delete_identifier"])
            #expect(all.allSatisfy { $0.time >= start })
            #expect(try await engine.auditEntries(AuditQuery(identifier: "bob")).map(\.operation) == ["identify"])
            let refused = try await engine.auditEntries(AuditQuery(outcome: "refused"))
            #expect(refused.first?.errorCode == "PERMISSION_DENIED" && refused.first?.uid == 1001 && refused.first?.pid == 43)
            #expect(try await engine.auditEntries(AuditQuery(until: start)).isEmpty)
            #expect(try await engine.auditEntries(AuditQuery(limit: 2)).map(\.operation) == ["identify", "delete_identifier"])
        }
    }

    @Test func retentionTrimsTheOldestEntriesByCountAndByAge() async throws {
        var configuration = EngineConfiguration()
        configuration.auditRetention = AuditRetention(maximumEntries: 5, maximumAgeSeconds: 3600)
        try await withEngine(configuration) { engine in
            let old = AuditEntry.now() - 2 * 3600 * 1_000_000
            engine.recordAudit(self.entry("identify", ["ancient"], time: old))
            for index in 0..<7 { engine.recordAudit(self.entry("identify", ["p\(index)"])) }
            _ = try await engine.register(identifier: "carol", face: Face(arcface()))
            let kept = try await engine.auditEntries(AuditQuery())
            #expect(kept.map(\.identifiers) == (2..<7).map { ["p\($0)"] }, "\(kept.map(\.identifiers))")
        }
    }

    @Test func theTrailSurvivesAReopen() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        do {
            let engine = try Engine(path: directory.path)
            engine.recordAudit(self.entry("authenticate", ["alice"], outcome: "no-match"))
            engine.close()  // the queued flush runs before the writer stops
        }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        #expect(try await engine.auditEntries(AuditQuery()).map(\.outcome) == ["no-match"])
    }
}
