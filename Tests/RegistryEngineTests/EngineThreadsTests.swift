import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Scans run on the engine's own threads, never on a caller's: `Matching` asserts it on every scan
/// (debug builds, so every test), and these show the mark it asserts is what it says.
@Suite struct EngineThreadsTests {
    @Test func onlyTheEnginesThreadsAreMarked() async throws {
        #expect(!Matching.onEngineThread, "a test's own thread (the cooperative pool) is not the engine's")
        try await withEngine { engine in
            #expect(try await engine.reads.run { Matching.onEngineThread })
            let onWriter = try await engine.write { _, _ in Matching.onEngineThread }
            #expect(onWriter)
            // Identify from a task: its scan ran on the read pool, or the assertion would have stopped the test.
            var random = SeededGenerator(seed: 3)
            let vector = (0..<128).map { _ in Float(random.normal()) }
            _ = try await engine.register(identifier: "alice", face: Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: vector)))
            let found = try await engine.identify(face: Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: vector)), autoEnrol: false)
            #expect(found.matches.first?.identifier == "alice")
        }
    }

    /// Each thread says what it is where an operator looks (`top -H`, `perf`, /proc/PID/task/TID/comm),
    /// rather than carrying the name of whichever thread created it.
    @Test func theEnginesThreadsAreNamed() async throws {
        try await withEngine { engine in
            let reader = try await engine.reads.run { Self.threadName() }
            let writer = try await engine.write { _, _ in Self.threadName() }
            #expect(reader == "registryd-read")
            #expect(writer == "registryd-write")
        }
    }

    static func threadName() -> String {
        String(decoding: (readFileBytes("/proc/thread-self/comm") ?? []).filter { $0 != 10 }, as: UTF8.self)
    }
}
