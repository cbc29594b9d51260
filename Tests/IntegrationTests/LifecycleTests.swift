import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

/// The daemon's socket ownership and configuration reload.
@Suite struct LifecycleTests {
    @Test func aLiveDaemonsSocketIsNeverTakenOverAndAStaleOneIsReplaced() async throws {
        let daemon = try Daemon()
        // A second daemon on the same socket refuses to start; the first keeps serving.
        #expect(throws: HarnessError.self) { _ = try Daemon(sharingSocketOf: daemon) }
        var client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(0))))
        await client.close()

        // SIGKILL leaves the socket file behind; the next start replaces it.
        daemon.stop(signal: SIGKILL)
        var info = stat()
        #expect(lstat(daemon.socketPath, &info) == 0, "the crashed daemon's socket file should still be there")
        try daemon.start()
        client = try await daemon.client()
        #expect(try await client.templates(identifier: "alice").count == 1)
        await client.close()
    }

    @Test func sighupReloadsTheGalleriesThresholdsFromTheConfigurationFile() async throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let configuration = directory + "/registryd.json"
        func writeConfiguration(identification: Float) throws {
            let text = """
                {"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface", "identification": \(identification)}]}]}
                """
            guard let file = fopen(configuration, "w") else { throw HarnessError("cannot write \(configuration)") }
            fputs(text, file)
            fclose(file)
        }
        try writeConfiguration(identification: 0.7)
        let daemon = try Daemon(arguments: ["--config", configuration])
        let client = try await daemon.client()
        var staff = try await client.galleries().first { $0.name == "staff" }
        #expect(staff?.registries.first?.thresholds.identification == 0.7)

        try writeConfiguration(identification: 0.9)
        kill(daemon.pid, SIGHUP)
        for _ in 0..<100 {
            staff = try await client.galleries().first { $0.name == "staff" }
            if staff?.registries.first?.thresholds.identification == 0.9 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(staff?.registries.first?.thresholds.identification == 0.9)
        // A broken file on SIGHUP keeps the previous configuration and the daemon serving.
        guard let file = fopen(configuration, "w") else { return }
        fputs("{ not json", file)
        fclose(file)
        kill(daemon.pid, SIGHUP)
        // Waits for the daemon to have acted on the signal (its log says the reload failed), so that the
        // check below cannot pass merely because the signal was not handled yet.
        for _ in 0..<100 where !daemon.log.contains("SIGHUP: reload failed") {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(daemon.log.contains("SIGHUP: reload failed"), "the broken configuration was not reported")
        staff = try await client.galleries().first { $0.name == "staff" }
        #expect(staff?.registries.first?.thresholds.identification == 0.9)
        await client.close()
    }
}
