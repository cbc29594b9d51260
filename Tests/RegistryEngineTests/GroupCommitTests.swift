import LMDB
import MetricsTestKit
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Concurrent writes share durable commits without losing their individual outcomes.
@Suite struct GroupCommitTests {
    /// `count` registrations of distinct faces (p0, p1, …), all at once.
    static func registerConcurrently(_ count: Int, in engine: Engine) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    var vector = [Float](repeating: 0, count: 128)
                    vector[index] = 1
                    _ = try await engine.register(identifier: "p\(index)", face: Face(FaceTemplate(algorithm: 24, vector: vector)))
                }
            }
            try await group.waitForAll()
        }
    }

    /// A flat write (run in its batch's own transaction, not a nested one) that fails after writing
    /// leaves nothing behind, and the writes sharing its batch still land.
    @Test func aFlatWriteThatFailsAfterWritingLeavesNothingAndItsBatchLands() async throws {
        try await withEngine { engine in
            let profiles = engine.store.profiles
            let (commitsBefore, _) = engine.commitStatistics
            let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
                for index in 0..<48 {
                    group.addTask {
                        let key = "k\(index)"
                        do {
                            try await engine.write(flat: index % 2 == 0) { txn, _ in
                                try txn.put(profiles, key: Array(key.utf8), value: [1])
                                if index % 3 == 0 { throw RegistryError(.malformedRequest, "refused after writing") }
                            }
                            return (key, true)
                        } catch let error as RegistryError where error.code == .malformedRequest {
                            return (key, false)
                        }
                    }
                }
                return try await group.reduce(into: [String: Bool]()) { $0[$1.0] = $1.1 }
            }
            #expect(engine.commitStatistics.commits - commitsBefore < 48, "the writes did not share batches")
            let stored = try engine.store.environment.read { txn in
                try outcomes.keys.filter { try txn.get(profiles, key: Array($0.utf8)) != nil }
            }
            #expect(Set(stored) == Set(outcomes.filter(\.value).keys))
            #expect(outcomes.values.filter { !$0 }.count == 16)
        }
    }

    @Test func concurrentRegistrationsShareCommitsAndAllLand() async throws {
        try await withEngine { engine in
            let (commitsBefore, operationsBefore) = engine.commitStatistics
            try await Self.registerConcurrently(64, in: engine)
            let (commits, operations) = engine.commitStatistics
            #expect(operations - operationsBefore == 64)
            #expect(commits - commitsBefore < 64, "64 concurrent registrations should not need 64 commits")
            #expect(try engine.gallery("default").identifierCount == 64)
        }
    }

    @Test func theWriterReportsItsQueueDepthAndEachCommitsLatencyAndSize() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let metrics = TestMetrics()
        let engine = try Engine(path: directory.path, metrics: metrics)
        defer { engine.close() }
        let (commitsBefore, operationsBefore) = engine.commitStatistics
        try await Self.registerConcurrently(64, in: engine)
        let (commits, operations) = engine.commitStatistics
        let depth = try metrics.expectGauge(EngineMetrics.queueDepthLabel).values
        // Every submission and every batch taken reports the depth; 64 registrations queued faster
        // than one fsync: some waited; at the end, none.
        #expect(depth.count >= 64 + commits - commitsBefore)
        #expect(depth.max()! > 1)
        #expect(depth.last == 0)
        let durations = try metrics.expectTimer(EngineMetrics.commitDurationLabel).values
        #expect(durations.count == commits - commitsBefore)
        #expect(durations.allSatisfy { $0 > 0 })
        let sizes = try metrics.expectRecorder(EngineMetrics.batchSizeLabel).values
        #expect(sizes.count == commits - commitsBefore && Int(sizes.reduce(0, +)) == operations - operationsBefore)
    }

    /// Many concurrent registrations, most conflicting (one face under several identifiers, and one
    /// identifier twice), sharing commits: the end state must be one that some serial order of the
    /// same calls produces. In any serial order, per face, the first identifier registered wins; every
    /// other identifier is refused naming it; the winner's second registration succeeds if it is
    /// "c-0"'s. And what was acknowledged is what is stored.
    ///
    /// With 3,000 unrelated templates stored first, the checks go through the int8 prefilter (it
    /// starts at 2,048 rows): the same end state is required of them.
    @Test(arguments: [0, 3_000])
    func conflictingConcurrentRegistrationsEndInTheStateOfSomeSerialOrder(background: Int) async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // 16 faces, pairwise 4+ sign flips apart (score <= 0.5 < the 0.6 threshold): blocks of 4 of the
        // 16 signed values flipped by the bits of the face number.
        func face(_ number: Int) -> Face {
            Face(arcface(Set((0..<4).filter { number & (1 << $0) != 0 }.flatMap { flips($0 * 4, 4) })))
        }
        struct Call: Sendable {
            let face: Int
            let identifier: String
        }
        let calls = (0..<16).flatMap { number in
            (0..<5).map { Call(face: number, identifier: "c\(number)-\($0)") } + [Call(face: number, identifier: "c\(number)-0")]
        }
        var outcomes: [(call: Call, result: Result<Registration, RegistryError>)] = []
        do {
            let engine = try Engine(path: directory.path)
            defer { engine.close() }
            if background > 0 {
                var random = SeededGenerator(seed: 17)
                let items = (0..<background).map { index in
                    ImportItem(
                        identifier: "bg\(index)", template: FaceTemplate(algorithm: 24, vector: (0..<128).map { _ in Float(random.normal()) }))
                }
                _ = try await engine.importTemplates(items)
                #expect(Prefilter.applies(to: engine.state[GalleryConfiguration.defaultName]!.registries[0]) == Prefilter.isEnabled)
            }
            outcomes = try await withThrowingTaskGroup(of: (Call, Result<Registration, RegistryError>).self) { group in
                for call in calls.shuffled() {
                    group.addTask {
                        do {
                            return (call, .success(try await engine.register(identifier: call.identifier, face: face(call.face))))
                        } catch let error as RegistryError {
                            return (call, .failure(error))
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let (commits, operations) = engine.commitStatistics
            #expect(commits < operations, "the registrations should have shared commits")
        }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        for number in 0..<16 {
            let mine = outcomes.filter { $0.call.face == number }
            let winners = Set(mine.compactMap { outcome in (try? outcome.result.get()).map { _ in outcome.call.identifier } })
            #expect(winners.count == 1, "face \(number): winners \(winners)")
            guard let winner = winners.first else { continue }
            for outcome in mine where outcome.call.identifier != winner {
                guard case .failure(let error) = outcome.result, case .registration(let decisive, _) = error.details,
                    case .similarFace(let named, _) = decisive.kind
                else {
                    Issue.record("face \(number): \(outcome.call.identifier) should be refused as similar to \(winner)")
                    continue
                }
                #expect(named == winner)
            }
            // Both registrations of c-0 succeed when it won, and neither otherwise.
            let stored = try await engine.templates(identifier: winner)
            #expect(stored.count == (winner == "c\(number)-0" ? 2 : 1))
            for loser in (0..<5).map({ "c\(number)-\($0)" }) where loser != winner {
                await expectRegistryError(.identifierNotRegistered) { _ = try await engine.templates(identifier: loser) }
            }
        }
    }

    @Test func aRefusedOperationInABatchDoesNotUndoTheOthers() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "taken", face: Face(arcface()))
            let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
                for index in 0..<32 {
                    group.addTask {
                        // Even indexes register the taken face (refused), odd ones a face of their own.
                        var vector = [Float](repeating: 0, count: 128)
                        vector[32 + index] = 1
                        let face = index.isMultiple(of: 2) ? Face(arcface()) : Face(FaceTemplate(algorithm: 24, vector: vector))
                        let result = await Result(catching: { try await engine.register(identifier: "q\(index)", face: face) })
                        if case .success = result { return (index, true) }
                        return (index, false)
                    }
                }
                return await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
            }
            for (index, succeeded) in outcomes {
                #expect(succeeded == !index.isMultiple(of: 2), "q\(index)")
            }
            #expect(try engine.gallery("default").identifierCount == 17)
        }
    }
}
