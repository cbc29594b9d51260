import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Testing

/// Templates at rest encrypted through the daemon: encrypt a running store, restart with the key.
@Suite struct EncryptionEndToEndTests {
    @Test func aRunningStoreIsEncryptedAndThenNeedsItsKeyToStart() async throws {
        let daemon = try Daemon()
        let keyFile = daemon.directory + "/store.key"
        guard let file = fopen(keyFile, "w") else { throw HarnessError("cannot write the key") }
        fputs(String(repeating: "a1b2c3d4", count: 8) + "\n", file)  // 64 hex characters
        fclose(file)
        // A key the daemon takes from a client's request must be private to its owner.
        chmod(keyFile, 0o644)
        var client = try await daemon.client()
        await #expect(throws: RegistryError.self) { _ = try await client.setEncryptionKey(keyFile: keyFile) }
        await client.close()
        chmod(keyFile, 0o600)
        client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(0))))
        _ = try await client.register(identifier: "bob", face: Face(FaceTemplate(algorithm: 24, vector: axis(1))))
        let before = try await client.export().templates
        #expect(try await client.setEncryptionKey(keyFile: keyFile) == 2)
        await client.close()
        #expect(daemon.stop(signal: SIGTERM) == 0)

        // Without the key the daemon refuses to start, with a clear message.
        #expect(throws: HarnessError.self) { try daemon.start() }
        #expect(daemon.log.contains("the store is encrypted"))

        let keyed = try Daemon(reusing: daemon, arguments: ["--key-file", keyFile])
        client = try await keyed.client()
        #expect(try await client.export().templates == before)
        let identified = try await client.identify(face: Face(FaceTemplate(algorithm: 24, vector: axis(1))), autoEnrol: false)
        #expect(identified.matches.map(\.identifier) == ["bob"])
        await client.close()
    }
}
