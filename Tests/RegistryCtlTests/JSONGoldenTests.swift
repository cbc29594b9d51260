import FoundationEssentials
import Glibc
import RegistryClient
import RegistryCtlInput
import RegistryModel
import Testing

@testable import registryctl

/// What `--json` prints for results and errors that carry every kind of detail, byte for byte (key
/// order included): the documents scripts read, whatever types produce them.
@Suite struct JSONGoldenTests {
    static let finding = RegistrationFinding(algorithm: 24, kind: .similarFace(identifier: "bob", score: 0.8312))
    static let mismatch = RegistrationFinding(algorithm: 16, kind: .faceMismatch(bestScore: 0.41))

    static let assessment = QualityAssessment(
        score: 0.9811, rating: .excellent, components: [.confidence: 0.98, .angle: 0.9333, .size: 1], weakest: .angle)

    static let verdict = LivenessVerdict(
        live: false, validSamples: 100, statistics: nil, takenFrames: 2, thresholds: .fixedFallback,
        checks: [
            LivenessCheckResult(
                check: .realisticDepth, value: 0.45, values: ["mean": 0.45], condition: "mean 0.45 m in 0.2...3.0 m", threshold: "0.2...3.0 m",
                passed: true),
            LivenessCheckResult(
                check: .centerVariation, value: 0.0013, values: ["centerStdDev": 0.0013], condition: "centerStdDev 0.0013 m < 0.005 m",
                threshold: "≥ 0.005 m", passed: false),
            LivenessCheckResult(
                check: .temporalConsistency, value: .infinity, values: [:], condition: "1 frame ≥ 500 ms apart, 2 required",
                threshold: "largestMeanChange ≤ 0.05 m", passed: false),
        ],
        failed: [.centerVariation, .temporalConsistency], reason: "mandatory check failed: centerVariation")

    static let landmarks = [Landmark(name: "CHIN", x: 0.5, y: -1.25, z: 3e-3), Landmark(name: "NOSE_TIP", x: 0, y: 1, z: -0.125)]

    static let stored = [
        StoredTemplate(
            id: 7, identifier: "alice", algorithm: 24, registeredAt: 1_700_000_000_123_456, source: .registered, quality: 0.9811,
            template: FaceTemplate(algorithm: 24, vector: [0.6, -0.8, 1e-5])),
        StoredTemplate(
            id: 8, identifier: "alice", algorithm: 1000, registeredAt: -1, source: .autoEnrolled, quality: nil,
            template: FaceTemplate(algorithm: 1000, landmarks: Self.landmarks), landmarkQuality: 0.75),
        StoredTemplate(id: 9, identifier: "alice", algorithm: 16, registeredAt: 0, source: .imported, quality: 0.5, template: nil),
        StoredTemplate(id: 10, identifier: "alice", algorithm: 5000, registeredAt: 86_400_000_000, source: .forced, quality: nil, template: nil),
    ]

    /// As a registration reports them: without data (the engine never returns it there).
    static func withoutData(_ stored: StoredTemplate) -> StoredTemplate {
        var copy = stored
        copy.template = nil
        return copy
    }

    static let outcomes: [AutoEnrolmentOutcome] = [
        AutoEnrolmentOutcome(algorithm: 300, result: .enrolled(templateId: 19)),
        AutoEnrolmentOutcome(algorithm: 16, result: .alreadyRegistered),
        AutoEnrolmentOutcome(algorithm: 1000, result: .noTemplate),
        AutoEnrolmentOutcome(algorithm: 1001, result: .scoreBelowThreshold(score: 0.61, threshold: 0.7)),
        AutoEnrolmentOutcome(algorithm: 5000, result: .refused(Self.finding)),
        AutoEnrolmentOutcome(algorithm: 5001, result: .qualityTooLow(score: 0.3, minimum: 0.6)),
        AutoEnrolmentOutcome(algorithm: 5002, result: .qualityTooLow(score: nil, minimum: 0.6)),
        AutoEnrolmentOutcome(algorithm: 5003, result: .livenessRequired),
        AutoEnrolmentOutcome(algorithm: 5004, result: .failed(message: "the store is full")),
    ]

    static let gallery = GalleryInfo(
        name: "door",
        registries: [
            RegistryInfo(
                algorithm: .arcface, thresholds: Thresholds(authentication: 0.6, identification: 0.65, autoEnrolment: 0.7), templateCount: 3,
                identifierCount: 2, minimumQuality: 0.6, minimumAutoEnrolmentQuality: 0.7),
            RegistryInfo(algorithm: .landmarks, thresholds: Thresholds(defaultsFor: .landmarks), templateCount: 0, identifierCount: 0),
        ],
        identifierCount: 2, liveness: LivenessPolicy(authenticate: true, register: true, strict: true), livenessK: 2.5)

    static let profile = LivenessProfile(
        mean: 0.4...0.5, stdDev: 0.01...0.02, range: 0.05...0.08, edgeStdDev: 0.003...0.004, centerStdDev: 0.006...0.009,
        gradientMean: 0.001...0.002, gradientStdDev: 0.0005...0.0015, realisticDepth: 0.3...0.7, k: 2, frameCount: 35)

    static let documents: [(name: String, document: @Sendable () -> String)] = [
        (
            "register",
            {
                JSONOutput.document(
                    RegisterCommand.Result(
                        gallery: "door", identifier: "alice",
                        registration: Registration(
                            stored: Self.stored.prefix(2).map(Self.withoutData), findings: [Self.finding, Self.mismatch], quality: Self.assessment,
                            liveness: Self.verdict)))
            }
        ),
        (
            "identify",
            {
                JSONOutput.document(
                    IdentifyCommand.Result(
                        gallery: "default",
                        identification: Identification(
                            algorithm: 24, matches: [IdentifyMatch(identifier: "alice", score: 0.94, templateId: 7)], autoEnrolment: Self.outcomes,
                            liveness: Self.verdict)))
            }
        ),
        (
            "authenticate",
            {
                JSONOutput.document(
                    AuthenticateCommand.Result(
                        gallery: "default", identifier: "alice",
                        authentication: Authentication(
                            authenticated: true, score: 0.94, templateId: 7, algorithm: 24, autoEnrolment: Array(Self.outcomes.prefix(2)))))
            }
        ),
        (
            "show",
            { JSONOutput.document(ShowCommand.Result(gallery: "default", identifier: "alice", templates: Self.stored)) }
        ),
        ("galleries", { JSONOutput.document(GalleriesCommand.Result([Self.gallery])) }),
        ("gallery-define", { JSONOutput.document(GalleryDefineCommand.Result(Self.gallery)) }),
        ("algorithms", { JSONOutput.document(AlgorithmsCommand.Result(algorithms: Algorithm.builtIn)) }),
        (
            "profile",
            { JSONOutput.document(ProfileShowCommand.result(gallery: "door", identifier: "alice", profile: Self.profile)) }
        ),
        (
            "audit",
            {
                JSONOutput.document(
                    AuditCommand.Result(
                        entries: [
                            AuditEntry(
                                time: 1_700_000_000_000_001, uid: 1000, pid: 42, operation: "authenticate", gallery: "default",
                                identifiers: ["alice"],
                                outcome: .match, score: 0.94),
                            AuditEntry(
                                time: 1_700_000_001_000_000, uid: 0, pid: 7, operation: "register", gallery: "door", identifiers: ["bob"],
                                outcome: .refused, errorCode: "SIMILAR_FACE_REGISTERED"),
                        ]))
            }
        ),
        (
            "error-registration",
            {
                JSONOutput.document(
                    ErrorReport(
                        RegistryError(
                            .similarFaceRegistered, "a similar face is registered as 'bob'",
                            details: .registration(decisive: Self.finding, all: [Self.finding, Self.mismatch]))))
            }
        ),
        (
            "error-quality",
            {
                JSONOutput.document(
                    ErrorReport(
                        RegistryError(
                            .qualityTooLow, "capture quality 0.9811 is below 0.99",
                            details: .qualityTooLow(algorithm: 24, minimum: 0.99, assessment: Self.assessment, missing: []))))
                    + JSONOutput.document(
                        ErrorReport(
                            RegistryError(
                                .qualityTooLow, "missing capture inputs",
                                details: .qualityTooLow(algorithm: 24, minimum: 0.6, assessment: nil, missing: ["imageWidth", "yaw"]))))
            }
        ),
        (
            "error-liveness",
            {
                JSONOutput.document(
                    ErrorReport(RegistryError(.livenessFailed, "the face did not pass the liveness check", details: .livenessFailed(Self.verdict))))
            }
        ),
        (
            "error-templates",
            {
                let problems: [TemplateProblem] = [
                    .wrongDimension(expected: 512, actual: 128), .nonFiniteValue(index: 3), .zeroVector, .notNormalised(norm: 1.5),
                    .tooFewLandmarks(count: 3, minimum: 5), .unknownLandmark(name: "EAR"), .duplicateLandmark(name: "CHIN"),
                    .wrongKind(expected: "landmarks"),
                ]
                return problems.map {
                    JSONOutput.document(
                        ErrorReport(RegistryError(.invalidTemplate, "invalid template: \($0)", details: .invalidTemplate(algorithm: 24, problem: $0)))
                    )
                }
                .joined(separator: "\n")
            }
        ),
        (
            "error-input",
            { JSONOutput.document(ErrorReport(InputFileError(file: "a.json", message: "is empty"))) }
        ),
    ]

    @Test func documentsAreUnchanged() throws {
        let dump = getenv("REGISTRYCTL_GOLDEN_DUMP").map { String(cString: $0) }
        #expect(Set(Self.documents.map(\.name)) == Set(Self.golden.keys))
        for (name, document) in Self.documents {
            let text = document()
            if let dump {
                let file = fopen(dump + "/" + name + ".json", "w")
                fputs(text + "\n", file)
                fclose(file)
            }
            #expect(text == Self.golden[name], "\(name)")
        }
    }
}
