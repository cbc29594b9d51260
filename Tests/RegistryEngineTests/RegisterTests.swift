import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// the README's engine behaviour register, one rule per test. Scores are exact: see `signs(_:)` in Support.swift.
/// The default gallery's arcface registry uses the algorithm's threshold 0.6 for all three thresholds.
@Suite struct RegisterTests {
    let probe = arcface()  // the face being registered in most tests

    @Test func registerStoresTemplatesAndReturnsTheirIds() async throws {
        try await withEngine { engine in
            let registration = try await engine.register(identifier: "alice", face: Face(self.probe))
            #expect(registration.stored.count == 1)
            #expect(registration.findings.isEmpty)
            let stored = try await engine.templates(identifier: "alice")
            #expect(stored.map(\.id) == registration.stored.map(\.id))
            #expect(stored[0].source == .registered)
            #expect(stored[0].algorithm == 24)
        }
    }

    @Test func similarFaceErrorNamesTheBestScoringOtherIdentifierNotTheFirstFound() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "alice", face: Face(arcface(flips(0, 3))))  // 0.625 to the probe
            _ = try await engine.register(identifier: "bob", face: Face(arcface([8])))  // 0.875 to the probe
            let error = await expectRegistryError(.similarFaceRegistered) {
                _ = try await engine.register(identifier: "carol", face: Face(self.probe))
            }
            guard case .registration(let decisive, _) = error?.details else {
                Issue.record("no registration details")
                return
            }
            #expect(decisive == RegistrationFinding(algorithm: 24, kind: .similarFace(identifier: "bob", score: 0.875)))
            #expect(error?.message.contains("'bob'") == true)
        }
    }

    @Test func similarFaceWinsOverFaceMismatch() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "carol", face: Face(arcface(flips(0, 8))))  // 0 to the probe
            _ = try await engine.register(identifier: "bob", face: Face(arcface([8])))  // 0.875 to the probe
            // Registering the probe as carol both mismatches carol (0 < 0.6) and resembles bob.
            let error = await expectRegistryError(.similarFaceRegistered) {
                _ = try await engine.register(identifier: "carol", face: Face(self.probe))
            }
            guard case .registration(let decisive, _) = error?.details else {
                Issue.record("this guard did not hold: case .registration(let decisive, _) = error?.details")
                return
            }
            #expect(decisive.kind == .similarFace(identifier: "bob", score: 0.875))
        }
    }

    @Test func faceMismatchCarriesTheIdentifiersBestScore() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "carol", face: Face(arcface(flips(0, 8))))  // 0 to the probe
            _ = try await engine.register(identifier: "carol", face: Face(arcface(flips(0, 6))))  // 0.25 to the probe
            let error = await expectRegistryError(.faceMismatch) {
                _ = try await engine.register(identifier: "carol", face: Face(self.probe))
            }
            guard case .registration(let decisive, _) = error?.details else {
                Issue.record("this guard did not hold: case .registration(let decisive, _) = error?.details")
                return
            }
            #expect(decisive == RegistrationFinding(algorithm: 24, kind: .faceMismatch(bestScore: 0.25)))
            #expect(try await engine.templates(identifier: "carol").count == 2)
        }
    }

    @Test func anIdentifierNewToTheRegistrySkipsTheMismatchCheck() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(dlib()))
            // In dlib, alice exists: a different face mismatches ((0 + 1) / 2 = 0.5 < 0.75).
            await expectRegistryError(.faceMismatch) {
                _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(dlib(flips(0, 8))))
            }
            // In arcface, alice is new: the same kind of face is stored, there is nothing to mismatch.
            let registration = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface(flips(0, 8))))
            #expect(registration.stored.map(\.algorithm) == [24])
        }
    }

    @Test func aScoreEqualToTheIdentificationThresholdIsASimilarFace() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))  // thresholds 0.75
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(self.probe))
            await expectRegistryError(.similarFaceRegistered) {  // exactly 0.75
                _ = try await engine.register(gallery: "g", identifier: "bob", face: Face(arcface(flips(0, 2))))
            }
            // 0.625 is below: accepted.
            _ = try await engine.register(gallery: "g", identifier: "bob", face: Face(arcface(flips(0, 3))))
        }
    }

    @Test func aScoreEqualToTheAuthenticationThresholdIsNoMismatch() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(self.probe))
            let registration = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface([2, 3])))  // 0.75
            #expect(registration.findings.isEmpty)
            await expectRegistryError(.faceMismatch) {  // 0.625 to both of alice's templates' best
                _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface([5, 6, 7])))
            }
        }
    }

    @Test func forceStoresDespiteTheFindingsAndReportsThem() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "bob", face: Face(arcface([8])))
            let forced = try await engine.register(identifier: "carol", face: Face(self.probe), force: true)
            #expect(forced.findings == [RegistrationFinding(algorithm: 24, kind: .similarFace(identifier: "bob", score: 0.875))])
            #expect(forced.stored.map(\.source) == [.forced])
            #expect(try await engine.templates(identifier: "carol").map(\.source) == [.forced])
            // force with nothing to override is an ordinary registration.
            let clean = try await engine.register(identifier: "dave", face: Face(arcface(flips(0, 16))), force: true)
            #expect(clean.findings.isEmpty)
            #expect(clean.stored.map(\.source) == [.registered])
        }
    }

    @Test func aMultiRegistryRegistrationIsAllOrNothing() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))
            _ = try await engine.register(gallery: "g", identifier: "bob", face: Face(dlib()))
            let before = try await StoreSnapshot(engine)
            // arcface would be fine, dlib is bob's face: nothing may be stored.
            await expectRegistryError(.similarFaceRegistered) {
                _ = try await engine.register(gallery: "g", identifier: "carol", face: Face(arcface(), dlib()))
            }
            #expect(try await StoreSnapshot(engine) == before)
            await expectRegistryError(.identifierNotRegistered) { _ = try await engine.templates(gallery: "g", identifier: "carol") }

            let both = try await engine.register(gallery: "g", identifier: "dave", face: Face(dlib(flips(0, 8)), arcface(flips(0, 8))))
            #expect(both.stored.map(\.algorithm) == [24, 16])  // registry priority order, not request order
            #expect(both.stored[1].id == both.stored[0].id + 1)
        }
    }

    @Test func concurrentRegistrationsOfOneFaceUnderTwoIdentifiersCannotBothSucceed() async throws {
        try await withEngine { engine in
            for round in 0..<12 {
                // A face of its own per round (orthogonal unit vectors), registered twice at once.
                var vector = [Float](repeating: 0, count: 128)
                vector[20 + round] = 1
                let face = Face(FaceTemplate(algorithm: 24, vector: vector))
                async let first = Result(catching: { try await engine.register(identifier: "a\(round)", face: face) })
                async let second = Result(catching: { try await engine.register(identifier: "b\(round)", face: face) })
                let outcomes = await [first, second]
                let successes = outcomes.filter { if case .success = $0 { true } else { false } }
                #expect(successes.count == 1, "round \(round)")
                for case .failure(let error) in outcomes {
                    #expect((error as? RegistryError)?.code == .similarFaceRegistered)
                }
            }
            let gallery = try engine.gallery("default")
            #expect(gallery.identifierCount == 12)
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
