import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Auto-enrolment decides every registry of one request under one reading of the gallery's policy,
/// even when the policy changes while the request is under way.
@Suite struct AutoEnrolmentPolicyTests {
    static let model = Algorithm(version: 4242, name: "model128", kind: .vector(dimension: 128), scoreFunction: .cosine, defaultThreshold: 0.5)

    /// arcface decides; dlib wants a capture quality the faces never carry, so it is refused on
    /// quality; the model has no such minimum, so it enrols. With `live` the gallery requires a live
    /// face to register, which the faces (no depth frames) are not: then both are refused on liveness.
    static func gallery(live: Bool) -> GalleryConfiguration {
        GalleryConfiguration(
            name: "race",
            registries: [
                RegistryConfiguration(algorithm: Algorithm.arcface.version),
                RegistryConfiguration(algorithm: Algorithm.dlib.version, minimumAutoEnrolmentQuality: 0.5),
                RegistryConfiguration(algorithm: Self.model.version),
            ],
            liveness: LivenessPolicy(register: live))
    }

    static func vector(_ random: inout SeededGenerator) -> [Float] { (0..<128).map { _ in Float(random.normal()) } }

    /// Many authentications, each of a person the dlib and model registries do not hold yet, while the
    /// gallery's policy flips between "any face registers" and "live faces only". Each answer must be
    /// one policy's: quality refused and enrolled, or refused on liveness twice; never quality refused
    /// beside a liveness refusal, which is the old policy's shortcut beside the new policy's write.
    @Test func aPolicyChangeDuringAnAuthenticationGivesOnePolicysOutcomes() async throws {
        try await withEngine(EngineConfiguration(algorithms: [Self.model])) { engine in
            try await engine.defineGallery(Self.gallery(live: false))
            var random = SeededGenerator(seed: 2906)
            let people = (0..<240).map { _ in (Self.vector(&random), Self.vector(&random), Self.vector(&random)) }
            for (index, person) in people.enumerated() {
                _ = try await engine.register(
                    gallery: "race", identifier: "p\(index)", face: Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: person.0)))
            }
            let outcomes = try await withThrowingTaskGroup(of: [AutoEnrolmentOutcome.Result].self) { group in
                group.addTask {
                    for flip in 0..<120 { try await engine.defineGallery(Self.gallery(live: flip % 2 == 0)) }
                    return []
                }
                for (index, person) in people.enumerated() {
                    group.addTask {
                        let face = Face(templates: [
                            FaceTemplate(algorithm: Algorithm.arcface.version, vector: person.0),
                            FaceTemplate(algorithm: Algorithm.dlib.version, vector: person.1),
                            FaceTemplate(algorithm: Self.model.version, vector: person.2),
                        ])
                        let result = try await engine.authenticate(gallery: "race", identifier: "p\(index)", face: face)
                        #expect(result.authenticated)
                        return result.autoEnrolment.map(\.result)
                    }
                }
                var all: [[AutoEnrolmentOutcome.Result]] = []
                for try await outcome in group where !outcome.isEmpty { all.append(outcome) }
                return all
            }
            var mixed = 0
            var byPolicy = (open: 0, live: 0)
            for outcome in outcomes {
                switch (outcome.first, outcome.last) {
                case (.qualityTooLow?, .enrolled?): byPolicy.open += 1
                case (.livenessRequired?, .livenessRequired?): byPolicy.live += 1
                default: mixed += 1
                }
            }
            #expect(outcomes.count == people.count && outcomes.allSatisfy { $0.count == 2 })
            #expect(mixed == 0, "\(mixed) of \(outcomes.count) authentications mixed two policies (\(byPolicy.open) open, \(byPolicy.live) live)")
        }
    }
}
