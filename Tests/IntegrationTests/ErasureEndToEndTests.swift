import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// Erasure through the daemon, as an operator or an auditor would check it: the deleted templates'
/// stored values are searched for in data.mdb after the reply, and after a SIGKILL that comes right
/// after the reply (before the erasure's own commit, which follows within 0.1 s) and a restart.
@Suite struct ErasureEndToEndTests {
    /// The first four stored values of a template (unit-length float32s, as `show` returns them).
    static func firstValues(_ template: StoredTemplate) throws -> [UInt8] {
        guard case .vector(let values) = template.template?.data else { throw HarnessError("template \(template.id) came without its values") }
        return Array(values.prefix(4)).withUnsafeBytes { Array($0) }
    }

    static func count(_ patterns: [[UInt8]], in dataPath: String) throws -> Int { try DataFileScan(directory: dataPath).count(patterns) }

    @Test func deletedTemplatesAreGoneFromTheFileAfterTheReplyAndAfterAKillRightAfterIt() async throws {
        let daemon = try Daemon()
        var generator = SystemRandomNumberGenerator()
        var client = try await daemon.client()
        var stored: [String: [UInt8]] = [:]
        for person in 0..<30 {
            let vector = (0..<128).map { _ in Float.random(in: -1...1, using: &generator) }
            _ = try await client.register(identifier: "p\(person)", face: Face(FaceTemplate(algorithm: 24, vector: vector)), force: true)
            let template = try #require(try await client.templates(identifier: "p\(person)", includeData: true).first)
            stored["p\(person)"] = try Self.firstValues(template)
        }
        let order = stored.keys.shuffled(using: &generator)
        let erasedLive = Array(order.prefix(8))
        let erasedBeforeKill = Array(order.dropFirst(8).prefix(8))
        let kept = Array(order.dropFirst(16))

        // Served: gone within a second of the replies.
        for name in erasedLive { #expect(try await client.deleteIdentifier(identifier: name) == 1) }
        try await Task.sleep(for: .seconds(1))
        #expect(try Self.count(erasedLive.map { stored[$0]! }, in: daemon.dataPath) == 0)

        // Killed right after the replies: the next start erases before it serves.
        for name in erasedBeforeKill { #expect(try await client.deleteIdentifier(identifier: name) == 1) }
        await client.close()
        daemon.stop(signal: SIGKILL)
        try daemon.start()
        client = try await daemon.client()
        #expect(try await client.verify().checked == kept.count)
        #expect(try Self.count((erasedLive + erasedBeforeKill).map { stored[$0]! }, in: daemon.dataPath) == 0)
        #expect(try Self.count(kept.map { stored[$0]! }, in: daemon.dataPath) == kept.count)
        let verification = try await client.verify()
        #expect(verification.problems.isEmpty)
        await client.close()
        daemon.stop()
    }
}
