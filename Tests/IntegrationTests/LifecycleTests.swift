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
        guard let file = fopen(configuration, "w") else {
            Issue.record("this guard did not hold: let file = fopen(configuration, \"w\")")
            return
        }
        fputs("{ not json", file)
        fclose(file)
        kill(daemon.pid, SIGHUP)
        // Waits for the daemon to have acted on the signal (its log says the reload failed), so that the
        // check below cannot pass merely because the signal was not handled yet.
        for _ in 0..<100 where !daemon.log.contains("SIGHUP: reload refused, nothing changed") {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(daemon.log.contains("SIGHUP: reload refused, nothing changed"), "the broken configuration was not reported")
        staff = try await client.galleries().first { $0.name == "staff" }
        #expect(staff?.registries.first?.thresholds.identification == 0.9)
        await client.close()
    }

    /// Before, the galleries before a refused one were applied and the rest not: half a configuration.
    @Test func aSighupReloadAppliesEverythingOrNothing() async throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let configuration = directory + "/registryd.json"
        func write(_ text: String) throws {
            guard let file = fopen(configuration, "w") else { throw HarnessError("cannot write \(configuration)") }
            fputs(text, file)
            fclose(file)
        }
        try write(
            """
            {"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface", "identification": 0.7}]},
                           {"name": "lobby", "registries": [{"algorithm": "arcface"}, {"algorithm": "dlib"}]}]}
            """)
        let daemon = try Daemon(arguments: ["--config", configuration])
        let client = try await daemon.client()
        var dlib = [Float](repeating: 0, count: 128)
        dlib[3] = 1
        _ = try await client.register(gallery: "lobby", identifier: "ann", face: Face(FaceTemplate(algorithm: 16, vector: dlib)))

        // staff's threshold changes, and lobby drops its dlib registry, which holds ann: the store refuses
        // that, so staff must not change either.
        try write(
            """
            {"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface", "identification": 0.9}]},
                           {"name": "lobby", "registries": [{"algorithm": "arcface"}]}]}
            """)
        kill(daemon.pid, SIGHUP)
        for _ in 0..<100 where !daemon.log.contains("SIGHUP: reload refused, nothing changed") {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(daemon.log.contains("SIGHUP: reload refused, nothing changed"))
        let galleries = try await client.galleries()
        #expect(galleries.first { $0.name == "staff" }?.registries.first?.thresholds.identification == 0.7)
        #expect(galleries.first { $0.name == "lobby" }?.registries.map(\.algorithm.version) == [24, 16])

        // A misspelt key is refused too (before, it was ignored and its setting left at the default).
        try write(#"{"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface", "identfication": 0.9}]}]}"#)
        let refusals = daemon.log.components(separatedBy: "reload refused").count
        kill(daemon.pid, SIGHUP)
        for _ in 0..<100 where daemon.log.components(separatedBy: "reload refused").count == refusals {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(daemon.log.contains(#"unknown key \"identfication\""#) || daemon.log.contains(#"unknown key "identfication""#))
        #expect(try await client.galleries().first { $0.name == "staff" }?.registries.first?.thresholds.identification == 0.7)
        await client.close()
    }

    @Test func checkConfigReportsEveryProblemAndExitsWithoutServing() async throws {
        let directory = TemporaryDirectory("registryd-check").path
        defer { _ = system("rm -rf '\(directory)'") }
        let binary = try #require(siblingExecutable("registryd"))
        func check(_ json: String) throws -> (status: Int32, output: String) {
            let path = directory + "/registryd.json"
            guard let file = fopen(path, "w") else { throw HarnessError("cannot write \(path)") }
            fputs(json, file)
            fclose(file)
            return try run(
                [binary, "--check-config", path, "--socket", directory + "/s.sock", "--data", directory + "/data"], log: directory + "/check.log")
        }
        let bad = try check(#"{"socketPth": "x", "limits": {"maximumConnections": "many"}}"#)
        #expect(bad.status == 1)
        #expect(bad.output.contains(#"unknown key "socketPth" at the top level (did you mean "socketPath"?)"#), "\(bad.output)")
        let good = try check(#"{"galleries": [{"name": "staff", "registries": [{"algorithm": "landmarks-aligned"}]}]}"#)
        #expect(good.status == 0, "\(good.output)")
        #expect(good.output.contains("gallery      staff: landmarks-aligned"))
        // Checking opens nothing: no socket, no store.
        #expect(access(directory + "/s.sock", F_OK) != 0 && access(directory + "/data", F_OK) != 0)
    }
}
