import Foundation
import TestSupport
import Testing

@testable import RegistryServer

/// The `fleet` section's bounds, at them and just past them, with real files: the node's name (1 to
/// 64 bytes of letters, digits, `.`, `_`, `-`), the password file (1024 bytes), the key (32 bytes).
@Suite final class FleetSettingsTests {
    let directory = TemporaryDirectory("fleet-settings")

    deinit {
        self.directory.remove()
    }

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = self.directory.path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    func settings(
        node: String, password: [UInt8]? = nil, key: [UInt8] = [UInt8](repeating: 7, count: 32), compaction: Int? = nil, retention: Int? = nil
    ) throws -> FleetSettings? {
        var configuration = ServerConfiguration()
        configuration.fleet = .init(
            url: "postgresql://registry@db/registry", node: node, keyFile: try self.file("fleet.key", key),
            passwordFile: try password.map { try self.file("password", $0) }, compactionSeconds: compaction, retentionSeconds: retention)
        return try configuration.fleetSettings()
    }

    @Test func theNodeNameIsBoundedAt64Bytes() throws {
        #expect(try self.settings(node: String(repeating: "n", count: 64))?.node.count == 64)
        #expect(try self.settings(node: "door-1.site_a")?.node == "door-1.site_a")
        for refused in [String(repeating: "n", count: 65), "", "door 1", "tür"] {
            let error = #expect(throws: ConfigurationError.self) { try self.settings(node: refused) }
            #expect(error?.description.contains("fleet.node must be 1 to 64") == true, "\(refused)")
        }
    }

    @Test func thePasswordFileIsBoundedAt1024Bytes() throws {
        let atTheLimit = [UInt8](repeating: UInt8(ascii: "p"), count: 1024)
        #expect(try self.settings(node: "door-1", password: atTheLimit)?.password == String(repeating: "p", count: 1024))
        // One line: the newline an editor adds is not part of it.
        #expect(try self.settings(node: "door-1", password: Array("secret\n".utf8))?.password == "secret")
        let error = #expect(throws: ConfigurationError.self) { try self.settings(node: "door-1", password: atTheLimit + [UInt8(ascii: "p")]) }
        #expect(error?.description.contains("holds more than 1024 bytes") == true)
    }

    @Test func theKeyIs32BytesOr64HexadecimalCharacters() throws {
        #expect(try self.settings(node: "door-1")?.key == [UInt8](repeating: 7, count: 32))
        #expect(
            try self.settings(node: "door-1", key: Array((String(repeating: "0a", count: 32) + "\n").utf8))?.key == [UInt8](repeating: 10, count: 32))
        for refused in [[UInt8](repeating: 7, count: 31), [UInt8](repeating: 7, count: 33), Array(String(repeating: "0a", count: 31).utf8)] {
            #expect(throws: ConfigurationError.self) { try self.settings(node: "door-1", key: refused) }
        }
    }

    @Test func compactionAndRetentionAreBoundedAndDefaultToAMinuteAndAWeek() throws {
        let defaults = try #require(try self.settings(node: "door-1"))
        #expect(defaults.compactionInterval == .seconds(60) && defaults.retention == .seconds(7 * 86_400))
        let atTheLimits = try #require(try self.settings(node: "door-1", compaction: 86_400, retention: 31_536_000))
        #expect(atTheLimits.compactionInterval == .seconds(86_400) && atTheLimits.retention == .seconds(31_536_000))
        #expect(try self.settings(node: "door-1", compaction: 1, retention: 1)?.retention == .seconds(1))
        for (compaction, retention) in [(0, 60), (86_401, 60), (60, 0), (60, 31_536_001), (-1, -1)] {
            let error = #expect(throws: ConfigurationError.self) { try self.settings(node: "door-1", compaction: compaction, retention: retention) }
            #expect(error?.description.contains(compaction == 60 ? "fleet.retentionSeconds" : "fleet.compactionSeconds") == true)
        }
    }
}
