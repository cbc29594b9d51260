import Testing

@testable import RegistryCore

/// Concurrent writes share durable commits without losing their individual outcomes.
@Suite struct GroupCommitTests {
    @Test func concurrentRegistrationsShareCommitsAndAllLand() async throws {
        try await withEngine { engine in
            let (commitsBefore, operationsBefore) = engine.commitStatistics
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<64 {
                    group.addTask {
                        var vector = [Float](repeating: 0, count: 128)
                        vector[index] = 1
                        _ = try await engine.register(identifier: "p\(index)", face: Face(FaceTemplate(algorithm: 24, vector: vector)))
                    }
                }
                try await group.waitForAll()
            }
            let (commits, operations) = engine.commitStatistics
            #expect(operations - operationsBefore == 64)
            #expect(commits - commitsBefore < 64, "64 concurrent registrations should not need 64 commits")
            #expect(try engine.gallery("default").identifierCount == 64)
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
