import Glibc
import LMDB
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Durability: what the engine acknowledged survives closing, reopening and being killed.
@Suite struct PersistenceTests {
    @Test func theWholeEndStateIsIdenticalAfterClosingAndReopening() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let before: StoreSnapshot
        let identifications: [Identification]
        do {
            let engine = try Engine(path: directory.path)
            try await Scenario.run(on: engine)
            before = try await StoreSnapshot(engine)
            identifications = try await Scenario.identifications(on: engine)
            engine.close()
        }
        let reopened = try Engine(path: directory.path)
        defer { reopened.close() }
        #expect(try await StoreSnapshot(reopened) == before)
        #expect(try await Scenario.identifications(on: reopened) == identifications)
        #expect(before.templates.count >= 6, "the scenario should leave several identifiers behind")
    }

    /// One registration at a time, and 16 at once (the writer then groups them into shared commits,
    /// so the kill lands in the middle of batches).
    @Test(arguments: [1, 16])
    func aRegistrationAcknowledgedBeforeSIGKILLIsReadableByTheNextOpen(concurrency: Int) async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let probe = try #require(siblingExecutable("registry-crash-probe"))

        var pipe: [Int32] = [0, 0]
        #expect(Glibc.pipe(&pipe) == 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(probe), strdup(directory.path), strdup("100"), strdup("\(concurrency)"), nil]
        defer { for pointer in argv { free(pointer) } }
        #expect(posix_spawn(&pid, probe, &actions, nil, argv, environ) == 0)
        posix_spawn_file_actions_destroy(&actions)
        close(pipe[1])

        // Read acknowledgements until 25 arrived, then kill the writer mid-stream.
        var acknowledged: [String] = []
        var pending = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        while acknowledged.count < 25 {
            let count = read(pipe[0], &buffer, buffer.count)
            guard count > 0 else { break }
            pending += String(decoding: buffer[0..<count], as: UTF8.self)
            while let newline = pending.firstIndex(of: "\n") {
                let line = String(pending[..<newline])
                pending.removeSubrange(...newline)
                if line.hasPrefix("acknowledged ") { acknowledged.append(String(line.dropFirst(13))) }
            }
        }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        close(pipe[0])
        #expect(acknowledged.count >= 25, "the probe stopped early")

        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        for identifier in acknowledged {
            let templates = try await engine.templates(identifier: identifier)
            #expect(templates.count == 1, "\(identifier) was acknowledged but is missing")
        }
        // And the store is usable: the index agrees with LMDB, and new writes work.
        let gallery = try engine.gallery("default")
        #expect(gallery.identifierCount >= acknowledged.count)
        _ = try await engine.register(identifier: "after-crash", face: Face(arcface()))
    }

    @Test func aStoreWithANewerSchemaIsRefused() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        do {
            let engine = try Engine(path: directory.path)
            try engine.store.environment.write { txn in
                try engine.store.writeInteger(txn, Keys.schemaVersion, Store.schemaVersion + 1)
            }
            engine.close()
        }
        let error = await expectRegistryError(.internal) { _ = try Engine(path: directory.path) }
        #expect(error?.message.contains("newer") == true)
        // The refused open released the directory: after a repair it opens again.
        let environmentOnly = try Store(path: directory.path, configuration: EngineConfiguration())
        try environmentOnly.environment.write { txn in try environmentOnly.writeInteger(txn, Keys.schemaVersion, Store.schemaVersion) }
        environmentOnly.close()
        try Engine(path: directory.path).close()
    }

    @Test func aStoreWhoseAlgorithmTheConfigurationDroppedIsRefused() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let model512 = Algorithm(version: 5000, name: "model512", kind: .vector(dimension: 512), scoreFunction: .cosine, defaultThreshold: 0.5)
        do {
            let engine = try Engine(path: directory.path, configuration: EngineConfiguration(algorithms: [model512]))
            try await engine.defineGallery(GalleryConfiguration(name: "m", registries: [RegistryConfiguration(algorithm: 5000)]))
            engine.close()
        }
        await expectRegistryError(.unknownAlgorithm) { _ = try Engine(path: directory.path) }
        var changed = model512
        changed.kind = .vector(dimension: 256)
        await expectRegistryError(.unknownAlgorithm) {
            _ = try Engine(path: directory.path, configuration: EngineConfiguration(algorithms: [changed]))
        }
        try Engine(path: directory.path, configuration: EngineConfiguration(algorithms: [model512])).close()
    }

    @Test func aStoreOpenInAnotherProcessCannotBeOpened() async throws {
        try await withEngine { engine in
            let probe = try #require(siblingExecutable("registry-crash-probe"))
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = [strdup(probe), strdup(engine.store.environment.path), strdup("1"), nil]
            defer { for pointer in argv { free(pointer) } }
            #expect(posix_spawn(&pid, probe, nil, nil, argv, environ) == 0)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            // The probe must fail to open the store (it would otherwise print and wait to be killed).
            #expect(status != 0, "a second process opened a store this process holds")
        }
    }

    @Test func aDirectoryOpenInThisProcessCannotBeOpenedTwice() async throws {
        try await withEngine { engine in
            #expect(throws: (any Error).self) { _ = try Engine(path: engine.store.environment.path) }
        }
    }
}
