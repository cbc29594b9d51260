import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// registryd --verify-store and --restore: a backup checked and put in place with the daemon stopped.
@Suite struct RestoreTests {
    /// Runs registryd with `arguments`; its exit status and what it printed.
    func registryd(_ arguments: [String], in directory: String) throws -> (status: Int32, output: String) {
        try run([try registrydBinary()] + arguments, log: directory + "/offline.log")
    }

    static func face(_ seed: Int) -> Face {
        var values = [Float](repeating: 0, count: 128)
        values[seed % 128] = 1
        values[(seed * 7 + 3) % 128] = 0.5
        return Face(FaceTemplate(algorithm: 24, vector: values))
    }

    @Test func aBackupIsVerifiedAndRestoredWithTheDaemonStopped() async throws {
        let daemon = try Daemon()
        var client = try await daemon.client()
        for index in 0..<6 { _ = try await client.register(identifier: "p\(index)", face: Self.face(index), force: true) }
        let backup = try await client.backup().directory
        for index in 6..<9 { _ = try await client.register(identifier: "p\(index)", face: Self.face(index), force: true) }

        // The daemon holds its store: neither works on it while it runs.
        var result = try self.registryd(["--restore", backup, "--data", daemon.dataPath], in: daemon.directory)
        #expect(result.status == 1 && result.output.contains("another process has it open"), "\(result.output)")
        await client.close()
        #expect(daemon.stop(signal: SIGTERM) == 0)

        result = try self.registryd(["--verify-store", daemon.dataPath], in: daemon.directory)
        #expect(result.status == 0 && result.output.contains("9 templates checked, no problems"), "\(result.output)")

        // A damaged backup is refused before anything changes.
        let damaged = daemon.directory + "/damaged"
        #expect(system("cp -r '\(backup)' '\(damaged)' && printf x | dd of='\(damaged)/data.mdb' bs=1 seek=6000 conv=notrunc 2>/dev/null") == 0)
        result = try self.registryd(["--restore", damaged, "--data", daemon.dataPath], in: daemon.directory)
        #expect(result.status == 1 && result.output.contains("does not match its manifest"), "\(result.output)")

        result = try self.registryd(["--restore", backup, "--data", daemon.dataPath], in: daemon.directory)
        #expect(result.status == 0 && result.output.contains("6 templates, verified, matching its manifest"), "\(result.output)")
        #expect(result.output.contains("the store that was there is kept in \(daemon.dataPath).before-restore-"))

        // The daemon serves the backup's state: what was registered after it is gone.
        try daemon.start()
        client = try await daemon.client()
        #expect(try await client.identifiers().identifiers.count == 6)
        #expect(try await client.verify().problems.isEmpty)
        await client.close()
    }

    /// Every file in `directory` with its bytes (no subdirectories in a store or a backup).
    static func contents(of directory: String) throws -> [String: [UInt8]] {
        let stream = try #require(opendir(directory))
        defer { closedir(stream) }
        var files: [String: [UInt8]] = [:]
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard name != "." && name != ".." else { continue }
            files[name] = readFileBytes(directory + "/" + name)
        }
        return files
    }

    /// What an operator does before a restore: check the backup, then restore it. The check opens
    /// both the backup and the stopped store read-only and changes no byte of either, leaves no lock
    /// file behind, and the verified backup then restores.
    @Test func verifyingChangesNothingAndAVerifiedBackupRestores() async throws {
        let daemon = try Daemon()
        var client = try await daemon.client()
        for index in 0..<8 { _ = try await client.register(identifier: "p\(index)", face: Self.face(index), force: true) }
        #expect(try await client.deleteIdentifier(identifier: "p3") == 1)
        let backup = try await client.backup().directory
        var result = try self.registryd(["--verify-store", daemon.dataPath], in: daemon.directory)
        #expect(result.status == 1 && result.output.contains("another process has it open"), "\(result.output)")
        await client.close()
        #expect(daemon.stop(signal: SIGTERM) == 0)

        for directory in [backup, daemon.dataPath] {
            let before = try Self.contents(of: directory)
            result = try self.registryd(["--verify-store", directory], in: daemon.directory)
            #expect(result.status == 0 && result.output.contains("7 templates checked, no problems"), "\(result.output)")
            #expect(try Self.contents(of: directory) == before, "--verify-store changed \(directory)")
        }
        #expect(result.output.contains("matching its manifest") == false)
        result = try self.registryd(["--verify-store", backup], in: daemon.directory)
        #expect(result.output.contains("no problems, matching its manifest"), "\(result.output)")
        #expect(try Self.contents(of: backup).keys.sorted() == ["data.mdb", "manifest.json"])

        // A backup whose file no longer matches its manifest fails the check.
        let damaged = daemon.directory + "/damaged"
        #expect(system("cp -r '\(backup)' '\(damaged)' && printf x | dd of='\(damaged)/data.mdb' bs=1 seek=6000 conv=notrunc 2>/dev/null") == 0)
        result = try self.registryd(["--verify-store", damaged], in: daemon.directory)
        #expect(result.status == 1 && result.output.contains("does not match the backup's manifest"), "\(result.output)")

        result = try self.registryd(["--restore", backup, "--data", daemon.dataPath], in: daemon.directory)
        #expect(result.status == 0 && result.output.contains("7 templates, verified, matching its manifest"), "\(result.output)")
        try daemon.start()
        client = try await daemon.client()
        #expect(try await client.identifiers().identifiers.count == 7)
        #expect(try await client.verify().problems.isEmpty)
        await client.close()
    }
}
