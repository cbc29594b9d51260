import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// the README's engine behaviour auto-enrolment through identify, one rule per test.
@Suite struct AutoEnrolmentTests {
    /// arcface thresholds 0.8 (auto-enrolment `arcfaceAuto`), dlib 0.75; alice and bob in arcface only,
    /// both one flip from the probe (0.875), alice registered first so she is the top result.
    private func setUp(_ engine: Engine, arcfaceAuto: Float = 0.8) async throws {
        try await engine.defineGallery(
            twoRegistryGallery(
                "g", arcface: Thresholds(authentication: 0.8, identification: 0.8, autoEnrolment: arcfaceAuto)))
        _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface([0])))
        _ = try await engine.register(gallery: "g", identifier: "bob", face: Face(arcface([8])))
    }

    @Test func onlyTheTopResultIsEnrolledAndOnlyIntoRegistriesLackingIt() async throws {
        try await withEngine { engine in
            try await self.setUp(engine)
            let result = try await engine.identify(gallery: "g", face: Face(arcface(), dlib()))
            #expect(result.matches.map(\.identifier) == ["alice", "bob"])
            #expect(result.autoEnrolment.count == 1)
            guard case .enrolled = result.autoEnrolment.first?.result else {
                Issue.record("expected alice enrolled into dlib, got \(result.autoEnrolment)")
                return
            }
            #expect(try await engine.templates(gallery: "g", identifier: "alice").map(\.source) == [.registered, .autoEnrolled])
            #expect(try await engine.templates(gallery: "g", identifier: "bob").map(\.algorithm) == [24])
            // Identified again: dlib now holds alice, nothing more is enrolled.
            let again = try await engine.identify(gallery: "g", face: Face(arcface(), dlib()))
            #expect(again.autoEnrolment == [AutoEnrolmentOutcome(algorithm: 16, result: .alreadyRegistered)])
            #expect(try await engine.templates(gallery: "g", identifier: "alice").count == 2)
        }
    }

    @Test func belowTheAutoEnrolmentThresholdNothingIsEnrolled() async throws {
        try await withEngine { engine in
            try await self.setUp(engine, arcfaceAuto: 0.9)
            let result = try await engine.identify(gallery: "g", face: Face(arcface(), dlib()))
            #expect(result.autoEnrolment == [AutoEnrolmentOutcome(algorithm: 16, result: .scoreBelowThreshold(score: 0.875, threshold: 0.9))])
            #expect(try engine.migrationStatus(gallery: "g").map(\.identifiersHeld) == [2, 0])
        }
    }

    @Test func autoEnrolmentRunsTheRegisterChecksAndAFailureKeepsTheIdentification() async throws {
        try await withEngine { engine in
            try await self.setUp(engine)
            _ = try await engine.register(gallery: "g", identifier: "carol", face: Face(dlib()))  // dlib only
            // The face's dlib template is carol's face: enrolling it as alice would be a similar face.
            let result = try await engine.identify(gallery: "g", face: Face(arcface(), dlib()), safe: false)
            #expect(result.matches.first?.identifier == "alice")
            #expect(
                result.autoEnrolment == [
                    AutoEnrolmentOutcome(
                        algorithm: 16, result: .refused(RegistrationFinding(algorithm: 16, kind: .similarFace(identifier: "carol", score: 1))))
                ])
            #expect(try await engine.templates(gallery: "g", identifier: "alice").count == 1)
        }
    }

    @Test func theReportCoversEveryOtherRegistry() async throws {
        try await withEngine { engine in
            // default gallery: arcface, r300, dlib, landmarks; alice in arcface and dlib.
            _ = try await engine.register(identifier: "alice", face: Face(arcface([0]), dlib()))
            let result = try await engine.identify(face: Face(arcface(), dlib()), safe: false)
            #expect(result.algorithm == 24)
            #expect(
                result.autoEnrolment == [
                    AutoEnrolmentOutcome(algorithm: 300, result: .noTemplate),
                    AutoEnrolmentOutcome(algorithm: 16, result: .alreadyRegistered),
                    AutoEnrolmentOutcome(algorithm: 1000, result: .noTemplate),
                ])
        }
    }

    @Test func aStorageFailureDuringAutoEnrolmentIsReportedAndTheIdentificationStands() async throws {
        // A store capped at 1 MiB, filled until a one-template write no longer fits.
        let configuration = EngineConfiguration(initialMapSize: 1 << 20, maximumMapSize: 1 << 20)
        try await withEngine(configuration) { engine in
            try await self.setUp(engine)
            var filler = 0
            var full = false
            while !full {
                do {
                    var vector = [Float](repeating: 0.01, count: 128)
                    vector[filler % 128] = 1
                    _ = try await engine.importTemplates(
                        gallery: "g", [ImportItem(identifier: "filler-\(filler)", template: FaceTemplate(algorithm: 16, vector: vector))])
                    filler += 1
                } catch let error as RegistryError where error.code == .storageFull {
                    full = true
                }
            }
            let before = try await StoreSnapshot(engine)
            let result = try await engine.identify(gallery: "g", face: Face(arcface(), dlib([5])), safe: false)
            #expect(result.matches.first?.identifier == "alice")
            guard case .failed(let message) = result.autoEnrolment.first?.result else {
                Issue.record("expected a failed auto-enrolment, got \(result.autoEnrolment)")
                return
            }
            #expect(message.contains("STORAGE_FULL"))
            #expect(try await StoreSnapshot(engine) == before)
        }
    }
}
