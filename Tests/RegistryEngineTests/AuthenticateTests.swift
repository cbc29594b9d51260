import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// the README's engine behaviour authenticate, one rule per test.
@Suite struct AuthenticateTests {
    @Test func anUnregisteredIdentifierFailsBeforeAnythingIsCompared() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "alice", face: Face(arcface()))
            // The face would be incompatible with everything; the identifier check comes first.
            await expectRegistryError(.identifierNotRegistered) {
                _ = try await engine.authenticate(identifier: "zed", face: Face(dlib()))
            }
            // alice exists, but only in arcface: a dlib-only face cannot be compared.
            await expectRegistryError(.incompatibleTemplates) {
                _ = try await engine.authenticate(identifier: "alice", face: Face(dlib()))
            }
        }
    }

    @Test func itComparesOnlyWithTheIdentifiersOwnTemplates() async throws {
        try await withEngine { engine in
            let alice = try await engine.register(identifier: "alice", face: Face(arcface(flips(0, 6))))  // 0.25 to the probe
            _ = try await engine.register(identifier: "bob", face: Face(arcface()))  // 1.0 to the probe
            let result = try await engine.authenticate(identifier: "alice", face: Face(arcface()), autoEnrol: false)
            #expect(result.authenticated == false)
            #expect(result.score == 0.25)
            #expect(result.templateId == alice.stored[0].id)
        }
    }

    @Test func aNonMatchIsAResultAndAScoreEqualToTheThresholdAuthenticates() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))  // 0.75
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface()))
            let equal = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface(flips(4, 2))))
            #expect(equal.authenticated)
            #expect(equal.score == 0.75)
            let below = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface(flips(4, 3))))
            #expect(!below.authenticated)
            #expect(below.score == 0.625)
        }
    }

    @Test func theFirstRegistryHoldingTheIdentifierWithATemplateInTheFaceDecides() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface(flips(8, 8)), dlib()))
            // arcface decides (score 0) although dlib would have matched (1.0).
            let both = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface(), dlib()), autoEnrol: false)
            #expect(both.algorithm == 24)
            #expect(!both.authenticated)
            #expect(both.score == 0)
            // Without an arcface template, dlib decides.
            let dlibOnly = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(dlib()), autoEnrol: false)
            #expect(dlibOnly.algorithm == 16)
            #expect(dlibOnly.authenticated)
        }
    }

    @Test func itAutoEnrolsOnlyWhenAuthenticatedAndAtOrAboveTheAutoEnrolmentThreshold() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(
                twoRegistryGallery(
                    "g", arcface: Thresholds(authentication: 0.75, identification: 0.75, autoEnrolment: 0.875)))
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface()))

            // Not authenticated (0.5): no auto-enrolment at all.
            let rejected = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface(flips(0, 4)), dlib()))
            #expect(!rejected.authenticated)
            #expect(rejected.autoEnrolment.isEmpty)
            // Authenticated (0.75) but below 0.875: skipped, and said why.
            let below = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface(flips(0, 2)), dlib()))
            #expect(below.authenticated)
            #expect(below.autoEnrolment == [AutoEnrolmentOutcome(algorithm: 16, result: .scoreBelowThreshold(score: 0.75, threshold: 0.875))])
            // autoEnrol: false: nothing, even at 1.0.
            let off = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface(), dlib()), autoEnrol: false)
            #expect(off.autoEnrolment.isEmpty)
            #expect(try engine.migrationStatus(gallery: "g").map(\.identifiersHeld) == [1, 0])
            // Exactly at the threshold (0.875): enrolled into dlib.
            let enrolled = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface([3]), dlib()))
            guard case .enrolled(let id) = enrolled.autoEnrolment.first?.result else {
                Issue.record("expected an enrolment, got \(enrolled.autoEnrolment)")
                return
            }
            let stored = try await engine.templates(gallery: "g", identifier: "alice")
            #expect(stored.map(\.algorithm) == [24, 16])
            #expect(stored.last?.id == id)
            #expect(stored.last?.source == .autoEnrolled)
        }
    }
}
