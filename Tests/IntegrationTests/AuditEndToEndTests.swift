import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Testing

/// The audit trail through the daemon: an entry per operation with the peer's uid and pid.
@Suite struct AuditEndToEndTests {
    /// The trail is written with the next group commit after the reply: poll briefly.
    static func entries(_ client: RegistryConnection, _ query: AuditQuery, atLeast count: Int) async throws -> [AuditEntry] {
        for _ in 0..<100 {
            let entries = try await client.audit(query)
            if entries.count >= count { return entries }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await client.audit(query)
    }

    @Test func everyOperationLeavesAnEntryWithWhoWhatAndTheOutcome() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        let alice = Face(FaceTemplate(algorithm: 24, vector: axis(0)))
        _ = try await client.register(identifier: "alice", face: alice)
        _ = try? await client.register(identifier: "mallory", face: alice)  // refused: similar face
        _ = try await client.identify(face: alice, autoEnrol: false)
        _ = try await client.authenticate(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(1))), autoEnrol: false)
        _ = try await client.deleteIdentifier(identifier: "alice")

        let entries = try await Self.entries(client, AuditQuery(), atLeast: 5)
        #expect(entries.map(\.operation) == ["register", "register", "identify", "authenticate", "delete_identifier"])
        #expect(entries.map(\.outcome) == [.ok, .refused, .match, .noMatch, .ok])
        #expect(entries[1].errorCode == "SIMILAR_FACE_REGISTERED")
        #expect(entries[1].identifiers == ["mallory"])
        #expect(entries[2].identifiers == ["alice"] && entries[2].score == 1)
        #expect(entries.allSatisfy { $0.uid == getuid() && $0.pid == getpid() && $0.gallery == "default" })
        // Filters.
        #expect(try await client.audit(AuditQuery(identifier: "mallory")).count == 1)
        #expect(try await client.audit(AuditQuery(outcome: .noMatch)).map(\.operation) == ["authenticate"])
        // A misspelt outcome is refused, not answered with nothing.
        await #expect(throws: RegistryError.self) { _ = try await client.audit(AuditQuery(outcome: AuditOutcome(rawValue: "nomatch"))) }
        // error_code: the code's name, only on refusals.
        #expect(entries.filter { $0.outcome == .refused }.allSatisfy { !($0.errorCode ?? "").isEmpty })
        #expect(entries.filter { $0.outcome != .refused }.allSatisfy { ($0.errorCode ?? "").isEmpty })
        // The trail survives a restart.
        await client.close()
        #expect(daemon.stop(signal: SIGTERM) == 0)
        try daemon.start()
        let reopened = try await daemon.client()
        let after = try await reopened.audit(AuditQuery(limit: 1000))
        #expect(Array(after.prefix(5)).map(\.operation) == entries.map(\.operation))
        await reopened.close()
    }
}
