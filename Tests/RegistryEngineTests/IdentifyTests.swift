import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// the README's engine behaviour identify, one rule per test.
@Suite struct IdentifyTests {
    /// A gallery where arcface thresholds are 0.8, so identifiers one flip from the probe (0.875) are
    /// found while being only 0.75 to each other (not similar at registration).
    static let strict = GalleryConfiguration(
        name: "strict",
        registries: [
            RegistryConfiguration(algorithm: 24, thresholds: Thresholds(authentication: 0.8, identification: 0.8, autoEnrolment: 0.8))
        ])

    @Test func identifyReturnsOneResultPerIdentifierWithItsBestTemplate() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "alice", face: Face(arcface(flips(0, 3))))  // 0.625
            let best = try await engine.register(identifier: "alice", face: Face(arcface([0])))  // 0.875
            let result = try await engine.identify(face: Face(arcface()), autoEnrol: false)
            #expect(result.matches == [IdentifyMatch(identifier: "alice", score: 0.875, templateId: best.stored[0].id)])
            #expect(result.algorithm == 24)
        }
    }

    @Test func resultsAreSortedByScoreWithTiesInRegistrationOrder() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(Self.strict)
            for name in ["bob", "carol", "dave"] {  // each one flip from the probe: 0.875 each
                let flip = ["bob": 0, "carol": 8, "dave": 4][name]!
                _ = try await engine.register(gallery: "strict", identifier: name, face: Face(arcface([flip])))
            }
            _ = try await engine.register(gallery: "strict", identifier: "alice", face: Face(arcface(flips(12, 4))))  // 0.5: below
            _ = try await engine.register(gallery: "strict", identifier: "zed", face: Face(arcface()), force: true)  // 1.0
            let result = try await engine.identify(gallery: "strict", face: Face(arcface()), autoEnrol: false)
            #expect(result.matches.map(\.identifier) == ["zed", "bob", "carol", "dave"])
            #expect(result.matches.map(\.score) == [1, 0.875, 0.875, 0.875])

            // The same people registered in the opposite order come back in that order.
            try await engine.defineGallery(GalleryConfiguration(name: "reversed", registries: Self.strict.registries))
            for (name, flip) in [("dave", 4), ("carol", 8), ("bob", 0)] {
                _ = try await engine.register(gallery: "reversed", identifier: name, face: Face(arcface([flip])))
            }
            let reversed = try await engine.identify(gallery: "reversed", face: Face(arcface()), autoEnrol: false)
            #expect(reversed.matches.map(\.identifier) == ["dave", "carol", "bob"])
        }
    }

    @Test func scoresBelowTheIdentificationThresholdAreNotResultsAndEqualOnesAre() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))  // 0.75
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface(flips(0, 2))))  // 0.75
            _ = try await engine.register(gallery: "g", identifier: "bob", face: Face(arcface(flips(4, 3))))  // 0.625
            let result = try await engine.identify(gallery: "g", face: Face(arcface()), autoEnrol: false)
            #expect(result.matches.map(\.identifier) == ["alice"])
            #expect(result.matches.first?.score == 0.75)
        }
    }

    @Test func limitCapsTheNumberOfResults() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(Self.strict)
            for (name, flip) in [("bob", 0), ("carol", 8), ("dave", 4)] {
                _ = try await engine.register(gallery: "strict", identifier: name, face: Face(arcface([flip])))
            }
            let result = try await engine.identify(gallery: "strict", face: Face(arcface()), autoEnrol: false, limit: 2)
            #expect(result.matches.map(\.identifier) == ["bob", "carol"])
            await expectRegistryError(.malformedRequest) {
                _ = try await engine.identify(gallery: "strict", face: Face(arcface()), limit: 0)
            }
        }
    }

    /// alice is in arcface and dlib; bob only in dlib (arcface lacks him).
    private func migratingGallery(_ engine: Engine) async throws {
        try await engine.defineGallery(twoRegistryGallery("g"))
        _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface(), dlib()))
        _ = try await engine.register(gallery: "g", identifier: "bob", face: Face(dlib(flips(0, 8))))  // 0.5 to alice
    }

    @Test func safeIdentifySearchesTheFirstRegistryThatHoldsEveryIdentifier() async throws {
        try await withEngine { engine in
            try await self.migratingGallery(engine)
            let result = try await engine.identify(gallery: "g", face: Face(arcface(), dlib()), autoEnrol: false)
            #expect(result.algorithm == 16)  // arcface comes first but lacks bob
            #expect(result.matches.map(\.identifier) == ["alice"])
            #expect(result.matches.first?.score == 1)
        }
    }

    @Test func safeIdentifyNeverFallsThroughToAnotherRegistry() async throws {
        try await withEngine { engine in
            try await self.migratingGallery(engine)
            // dlib (the safe registry) finds nobody: cos 0 to alice gives 0.5, cos -1 to bob gives 0.
            // arcface would find alice at 1.0, but it does not hold bob, so it is not consulted.
            let result = try await engine.identify(gallery: "g", face: Face(arcface(), dlib(flips(8, 8))), autoEnrol: false)
            #expect(result.algorithm == 16)
            #expect(result.matches.isEmpty)
        }
    }

    @Test func safeIdentifyWithoutARegistryHoldingEveryoneThrowsIncompatibleTemplates() async throws {
        try await withEngine { engine in
            try await self.migratingGallery(engine)
            await expectRegistryError(.incompatibleTemplates) {
                _ = try await engine.identify(gallery: "g", face: Face(arcface()))  // only arcface, which lacks bob
            }
        }
    }

    @Test func unsafeIdentifyReturnsTheFirstNonEmptyResultInPriorityOrder() async throws {
        try await withEngine { engine in
            try await self.migratingGallery(engine)
            // arcface first: it finds alice, so dlib is not consulted.
            let first = try await engine.identify(gallery: "g", face: Face(arcface(), dlib(flips(0, 8))), safe: false, autoEnrol: false)
            #expect(first.algorithm == 24)
            #expect(first.matches.map(\.identifier) == ["alice"])
            // arcface finds nobody (cos 0): the dlib result (bob) is returned.
            let second = try await engine.identify(gallery: "g", face: Face(arcface(flips(8, 8)), dlib(flips(0, 8))), safe: false, autoEnrol: false)
            #expect(second.algorithm == 16)
            #expect(second.matches.map(\.identifier) == ["bob"])
            // Nobody anywhere: empty, not an error.
            let none = try await engine.identify(gallery: "g", face: Face(arcface(flips(8, 8))), safe: false, autoEnrol: false)
            #expect(none.matches.isEmpty)
        }
    }

    @Test func anEmptyGalleryIdentifiesNobody() async throws {
        try await withEngine { engine in
            let result = try await engine.identify(face: Face(arcface()))
            #expect(result.matches.isEmpty)
            #expect(result.autoEnrolment.isEmpty)
        }
    }

    @Test func landmarkTemplatesAreIdentifiedWithTheLandmarkAlgorithm() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "lena", face: Face(landmarkFace(seed: 1)))
            _ = try await engine.register(identifier: "otto", face: Face(landmarkFace(seed: 2, jitter: 60)))
            let result = try await engine.identify(face: Face(landmarkFace(seed: 1, jitter: 1)), autoEnrol: false)
            #expect(result.algorithm == 1000)
            #expect(result.matches.map(\.identifier) == ["lena"])
            #expect(result.matches[0].score > 0.9)
        }
    }
}
