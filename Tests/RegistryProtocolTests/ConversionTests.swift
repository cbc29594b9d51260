import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Testing

// Engine value → wire message → bytes → wire message → engine value must give back what went in: that
// is what lets a client see exactly what the engine decided. Every round trip goes through the
// serialized bytes, so presence rules (optional fields, oneofs, proto3 defaults) are exercised too.

/// `message` after a trip through its binary encoding.
func overTheWire<M: SwiftProtobuf.Message>(_ message: M) throws -> M {
    let bytes: [UInt8] = try message.serializedBytes()
    return try M(serializedBytes: bytes)
}

// MARK: Fixtures

let arcfaceVector: [Float] = (0..<128).map { Float($0 % 7) / 7 - 0.43 }
let landmarkList: [Landmark] = [
    Landmark(name: "LEFT_EYE", x: -31.5, y: 12.25, z: 0.125),
    Landmark(name: "RIGHT_EYE", x: 31.5, y: 12.5, z: -0.125),
    Landmark(name: "NOSE_TIP", x: 0, y: -3.75, z: 18),
]

let similarFinding = RegistrationFinding(algorithm: 24, kind: .similarFace(identifier: "alice", score: 0.91))
let mismatchFinding = RegistrationFinding(algorithm: 300, kind: .faceMismatch(bestScore: 0.125))

let storedWithEverything = StoredTemplate(
    id: 42, identifier: "bob", algorithm: 1000, registeredAt: 1_717_000_000_123_456, source: .autoEnrolled,
    quality: 0.75, template: FaceTemplate(algorithm: 1000, landmarks: landmarkList))
let storedBare = StoredTemplate(
    id: 7, identifier: "carol", algorithm: 24, registeredAt: 1, source: .imported, quality: nil, template: nil)

/// One outcome of every kind, in the order of PROTOCOL.md's table.
let everyOutcome: [AutoEnrolmentOutcome] = [
    AutoEnrolmentOutcome(algorithm: 300, result: .alreadyRegistered),
    AutoEnrolmentOutcome(algorithm: 16, result: .noTemplate),
    AutoEnrolmentOutcome(algorithm: 1000, result: .scoreBelowThreshold(score: 0.62, threshold: 0.7)),
    AutoEnrolmentOutcome(algorithm: 5000, result: .refused(RegistrationFinding(algorithm: 5000, kind: .similarFace(identifier: "dave", score: 0.8)))),
    AutoEnrolmentOutcome(algorithm: 5001, result: .enrolled(templateId: 99)),
    AutoEnrolmentOutcome(algorithm: 5002, result: .failed(message: "storage error: MDB_MAP_FULL")),
]

// MARK: Faces and templates

@Suite("Conversions: faces and templates")
struct FaceConversionTests {
    @Test("a face with a vector template")
    func vectorFace() throws {
        let face = Face(FaceTemplate(algorithm: 24, vector: arcfaceVector))
        let message = try overTheWire(Registry_V1_Face(face))
        #expect(message.templates.count == 1)
        #expect(message.templates[0].vector == arcfaceVector)
        #expect(message.templates[0].landmarks.isEmpty)
        #expect(Face(message) == face)
    }

    @Test("a face with a landmark template")
    func landmarkFace() throws {
        let face = Face(FaceTemplate(algorithm: 1000, landmarks: landmarkList))
        let message = try overTheWire(Registry_V1_Face(face))
        #expect(message.templates[0].vector.isEmpty)
        #expect(message.templates[0].landmarks.map(\.name) == ["LEFT_EYE", "RIGHT_EYE", "NOSE_TIP"])
        #expect(Face(message) == face)
    }

    @Test("a face with templates of several algorithms keeps their order")
    func mixedFace() throws {
        let face = Face(
            FaceTemplate(algorithm: 300, vector: [Float](repeating: 0.044194173, count: 512)),
            FaceTemplate(algorithm: 1000, landmarks: landmarkList),
            FaceTemplate(algorithm: 24, vector: arcfaceVector))
        #expect(Face(try overTheWire(Registry_V1_Face(face))) == face)
    }

    @Test("non-finite vector values cross the wire unchanged, so validation can name their index")
    func nonFiniteValues() throws {
        let face = Face(FaceTemplate(algorithm: 24, vector: [1, .infinity, -.infinity, 0]))
        let back = Face(try overTheWire(Registry_V1_Face(face)))
        #expect(back == face)
        let nan = Face(try overTheWire(Registry_V1_Face(Face(FaceTemplate(algorithm: 24, vector: [.nan])))))
        guard case .vector(let values) = nan.templates.first?.data else {
            Issue.record("expected a vector")
            return
        }
        #expect(values.count == 1 && values[0].isNaN)
    }

    @Test("an empty template arrives as an empty vector (validation then reports its dimension)")
    func emptyTemplate() throws {
        let back = Face(try overTheWire(Registry_V1_Face(Face(FaceTemplate(algorithm: 24, vector: [])))))
        #expect(back == Face(FaceTemplate(algorithm: 24, vector: [])))
    }

    @Test("a stored template with quality and data")
    func storedTemplateFull() throws {
        let message = try overTheWire(Registry_V1_StoredTemplate(storedWithEverything))
        #expect(message.hasQuality)
        #expect(message.hasTemplate)
        #expect(message.source == .autoEnrolled)
        #expect(StoredTemplate(message) == storedWithEverything)
    }

    @Test("a stored template without quality or data")
    func storedTemplateBare() throws {
        let message = try overTheWire(Registry_V1_StoredTemplate(storedBare))
        #expect(!message.hasQuality)
        #expect(!message.hasTemplate)
        #expect(StoredTemplate(message) == storedBare)
    }

    @Test("a quality of exactly 0 is still a known quality (presence, not value)")
    func zeroQuality() throws {
        var stored = storedBare
        stored.quality = 0
        #expect(StoredTemplate(try overTheWire(Registry_V1_StoredTemplate(stored))).quality == 0)
    }

    @Test("a stored vector template keeps its data", arguments: [TemplateSource.registered, .autoEnrolled, .imported, .forced])
    func storedTemplateSources(source: TemplateSource) throws {
        let stored = StoredTemplate(
            id: 1, identifier: "erin", algorithm: 24, registeredAt: -5, source: source, quality: nil,
            template: FaceTemplate(algorithm: 24, vector: arcfaceVector))
        #expect(StoredTemplate(try overTheWire(Registry_V1_StoredTemplate(stored))) == stored)
    }
}

// MARK: Results

@Suite("Conversions: results")
struct ResultConversionTests {
    @Test("a registration with stored templates and the findings force overrode")
    func registration() throws {
        let registration = Registration(stored: [storedBare, storedWithEverything], findings: [similarFinding, mismatchFinding])
        let message = try overTheWire(Registry_V1_RegisterResult(registration))
        #expect(message.findings.count == 2)
        #expect(Registration(message) == registration)
    }

    @Test("a registration without findings")
    func registrationWithoutFindings() throws {
        let registration = Registration(stored: [storedBare], findings: [])
        #expect(Registration(try overTheWire(Registry_V1_RegisterResult(registration))) == registration)
    }

    @Test("an identification with every auto-enrolment outcome kind")
    func identificationEveryOutcome() throws {
        let identification = Identification(
            algorithm: 24,
            matches: [
                IdentifyMatch(identifier: "alice", score: 0.875, templateId: 1),
                IdentifyMatch(identifier: "bob", score: 0.6, templateId: 12),
            ],
            autoEnrolment: everyOutcome)
        #expect(Identification(try overTheWire(Registry_V1_IdentifyResult(identification))) == identification)
    }

    @Test("each auto-enrolment outcome kind on its own", arguments: everyOutcome)
    func outcome(outcome: AutoEnrolmentOutcome) throws {
        #expect(AutoEnrolmentOutcome(try overTheWire(Registry_V1_AutoEnrolmentOutcome(outcome))) == outcome)
    }

    @Test("auto-enrolment statuses use the wire values of proto/registry.proto")
    func outcomeStatuses() {
        let statuses = everyOutcome.map { Registry_V1_AutoEnrolmentOutcome($0).status.rawValue }
        #expect(statuses == [2, 3, 4, 5, 1, 6])
    }

    @Test("an identification that searched nothing: algorithm nil is 0 on the wire, and back")
    func identificationNothingSearched() throws {
        let identification = Identification(algorithm: nil, matches: [], autoEnrolment: [])
        let message = try overTheWire(Registry_V1_IdentifyResult(identification))
        #expect(message.algorithm == 0)
        #expect(Identification(message) == identification)
    }

    @Test("an authentication, accepted with auto-enrolment outcomes and refused without")
    func authentication() throws {
        let accepted = Authentication(authenticated: true, score: 0.875, templateId: 1, algorithm: 24, autoEnrolment: everyOutcome)
        #expect(Authentication(try overTheWire(Registry_V1_AuthenticateResult(accepted))) == accepted)
        let refused = Authentication(authenticated: false, score: 0.21, templateId: 3, algorithm: 300, autoEnrolment: [])
        #expect(Authentication(try overTheWire(Registry_V1_AuthenticateResult(refused))) == refused)
    }
}

// MARK: Administration

@Suite("Conversions: administration")
struct AdministrationConversionTests {
    @Test("thresholds")
    func thresholds() throws {
        let thresholds = Thresholds(authentication: 0.61, identification: 0.7, autoEnrolment: 0.85)
        #expect(Thresholds(try overTheWire(Registry_V1_Thresholds(thresholds))) == thresholds)
    }

    @Test(
        "vector algorithms, built-in and configured",
        arguments: [
            Algorithm.arcface, .dlib, .r300,
            Algorithm(version: 5000, name: "model512", kind: .vector(dimension: 512), scoreFunction: .cosine, defaultThreshold: 0.5),
        ])
    func vectorAlgorithm(algorithm: Algorithm) throws {
        let message = try overTheWire(Registry_V1_Algorithm(algorithm))
        #expect(message.kind == .vector)
        #expect(message.scoreFunction == algorithm.scoreFunction.rawValue)
        #expect(Algorithm(message) == algorithm)
    }

    @Test(
        "the landmark algorithms: no dimension; the matcher where a vector's score function goes",
        arguments: [Algorithm.landmarks, .alignedLandmarks])
    func landmarkAlgorithm(algorithm: Algorithm) throws {
        let message = try overTheWire(Registry_V1_Algorithm(algorithm))
        #expect(message.kind == .landmarks)
        #expect(message.dimension == 0)
        #expect(message.scoreFunction == (algorithm == .landmarks ? "coma" : "aligned"))
        #expect(Algorithm(message) == algorithm)
        // A daemon from before the aligned algorithm sent no score function: the CoMa matcher.
        var old = message
        old.scoreFunction = ""
        #expect(Algorithm(old).kind == .landmarks(.coma))
    }

    @Test("gallery information with its registries in priority order")
    func galleryInfo() throws {
        let gallery = GalleryInfo(
            name: "lobby",
            registries: [
                RegistryInfo(
                    algorithm: .r300, thresholds: Thresholds(authentication: 0.6, identification: 0.65, autoEnrolment: 0.7),
                    templateCount: 1200, identifierCount: 1000),
                RegistryInfo(algorithm: .landmarks, thresholds: Thresholds(defaultsFor: .landmarks), templateCount: 0, identifierCount: 0),
                RegistryInfo(algorithm: .arcface, thresholds: Thresholds(defaultsFor: .arcface), templateCount: 3, identifierCount: 2),
            ],
            identifierCount: 1001)
        let message = try overTheWire(Registry_V1_Gallery(gallery))
        #expect(message.registries.map(\.algorithm.version) == [300, 1000, 24])
        #expect(GalleryInfo(message) == gallery)
    }

    @Test("an empty gallery")
    func emptyGallery() throws {
        let gallery = GalleryInfo(name: "empty", registries: [], identifierCount: 0)
        #expect(GalleryInfo(try overTheWire(Registry_V1_Gallery(gallery))) == gallery)
    }

    @Test("migration status")
    func migrationStatus() throws {
        for status in [
            MigrationStatus(algorithm: 300, identifiersHeld: 250, galleryIdentifiers: 1000),
            MigrationStatus(algorithm: 24, identifiersHeld: 1000, galleryIdentifiers: 1000),
            MigrationStatus(algorithm: 16, identifiersHeld: 0, galleryIdentifiers: 0),
        ] {
            #expect(MigrationStatus(try overTheWire(Registry_V1_MigrationStatusResult.Entry(status))) == status)
        }
    }
}

// MARK: Errors

/// Whether two errors' details say the same thing (`Details` is not `Equatable`).
func sameDetails(_ a: RegistryError.Details, _ b: RegistryError.Details) -> Bool {
    switch (a, b) {
    case (.none, .none):
        return true
    case (.registration(let decisiveA, let allA), .registration(let decisiveB, let allB)):
        return decisiveA == decisiveB && allA == allB
    case (.invalidTemplate(let algorithmA, let problemA), .invalidTemplate(let algorithmB, let problemB)):
        return algorithmA == algorithmB && problemA == problemB
    default:
        return false
    }
}

/// `error` after the trip engine → wire → bytes → wire → engine.
func overTheWire(_ error: RegistryError) throws -> RegistryError {
    RegistryError(try overTheWire(Registry_V1_Error(error)))
}

/// The wire value of each code, as PROTOCOL.md §5 lists them.
let documentedCodeValues: [RegistryError.Code: Int] = [
    .similarFaceRegistered: 1, .faceMismatch: 2, .identifierNotRegistered: 3, .incompatibleTemplates: 4,
    .invalidTemplate: 5, .unknownAlgorithm: 6, .unknownGallery: 7, .qualityTooLow: 8, .livenessFailed: 9,
    .permissionDenied: 10, .malformedRequest: 11, .frameTooLarge: 12, .unsupportedVersion: 13, .storageFull: 14,
    .shuttingDown: 15, .internal: 16, .tooManyConnections: 17, .fleetUnavailable: 18,
]

@Suite("Conversions: errors")
struct ErrorConversionTests {
    @Test("every code and its message round-trip, with the value PROTOCOL.md §5 documents", arguments: RegistryError.Code.allCases)
    func code(code: RegistryError.Code) throws {
        let error = RegistryError(code, "something about \(code.rawValue)")
        let message = try overTheWire(Registry_V1_Error(error))
        #expect(message.code.rawValue == documentedCodeValues[code])
        #expect(!message.hasDecisive && message.findings.isEmpty && !message.hasTemplateProblem)
        let back = RegistryError(message)
        #expect(back.code == code)
        #expect(back.message == error.message)
        #expect(sameDetails(back.details, .none))
    }

    @Test("an unspecified or unknown code (a newer daemon) reads as INTERNAL, message kept")
    func unknownCodes() {
        for code in [Registry_V1_ErrorCode.unspecified, .UNRECOGNIZED(99)] {
            let message = Registry_V1_Error.with {
                $0.code = code
                $0.message = "from the future"
            }
            let error = RegistryError(message)
            #expect(error.code == .internal)
            #expect(error.message == "from the future")
        }
    }

    @Test("SIMILAR_FACE_REGISTERED carries the decisive finding and every finding")
    func similarFaceDetails() throws {
        let error = RegistryError(
            .similarFaceRegistered, "a similar face is registered as 'alice'",
            details: .registration(decisive: similarFinding, all: [similarFinding, mismatchFinding]))
        let back = try overTheWire(error)
        #expect(back.code == .similarFaceRegistered)
        #expect(sameDetails(back.details, error.details))
    }

    @Test("FACE_MISMATCH carries its face_mismatch finding")
    func faceMismatchDetails() throws {
        let error = RegistryError(
            .faceMismatch, "the face does not match 'bob'", details: .registration(decisive: mismatchFinding, all: [mismatchFinding]))
        let message = try overTheWire(Registry_V1_Error(error))
        #expect(message.decisive.faceMismatch.bestScore == 0.125)
        #expect(message.decisive.algorithm == 300)
        #expect(sameDetails(RegistryError(message).details, error.details))
    }

    @Test(
        "INVALID_TEMPLATE carries the template problem",
        arguments: [
            TemplateProblem.wrongDimension(expected: 128, actual: 127),
            .nonFiniteValue(index: 93),
            .zeroVector,
            .notNormalised(norm: 1.25),
            .tooFewLandmarks(count: 3, minimum: 15),
            .unknownLandmark(name: "THIRD_EYE"),
            .duplicateLandmark(name: "NOSE_TIP"),
        ])
    func invalidTemplate(problem: TemplateProblem) throws {
        let error = RegistryError(.invalidTemplate, "invalid template: \(problem)", details: .invalidTemplate(algorithm: 300, problem: problem))
        let back = try overTheWire(error)
        #expect(back.code == .invalidTemplate)
        #expect(sameDetails(back.details, error.details))
    }

    @Test("INVALID_TEMPLATE fields are those of PROTOCOL.md §5's table")
    func templateProblemFields() {
        let dimension = Registry_V1_TemplateProblem(algorithm: 24, problem: .wrongDimension(expected: 128, actual: 3))
        #expect(dimension.kind == .wrongDimension && dimension.expected == 128 && dimension.actual == 3)
        let few = Registry_V1_TemplateProblem(algorithm: 1000, problem: .tooFewLandmarks(count: 4, minimum: 15))
        #expect(few.kind == .tooFewLandmarks && few.actual == 4 && few.expected == 15)
        let nonFinite = Registry_V1_TemplateProblem(algorithm: 24, problem: .nonFiniteValue(index: 5))
        #expect(nonFinite.kind == .nonFiniteValue && nonFinite.index == 5)
        #expect(Registry_V1_TemplateProblem(algorithm: 300, problem: .notNormalised(norm: 2)).norm == 2)
    }

    @Test("a landmark name longer than 64 characters is cut to its first 64 on the wire")
    func longLandmarkName() throws {
        let name = String(repeating: "X", count: 70)
        let error = RegistryError(
            .invalidTemplate, "unknown landmark", details: .invalidTemplate(algorithm: 1000, problem: .unknownLandmark(name: name)))
        let back = try overTheWire(error)
        #expect(sameDetails(back.details, .invalidTemplate(algorithm: 1000, problem: .unknownLandmark(name: String(name.prefix(64))))))
    }

    @Test("WRONG_KIND keeps its kind but not the engine's text")
    func wrongKind() throws {
        let error = RegistryError(
            .invalidTemplate, "wrong kind", details: .invalidTemplate(algorithm: 1000, problem: .wrongKind(expected: "named landmarks")))
        let back = try overTheWire(error)
        guard case .invalidTemplate(let algorithm, .wrongKind) = back.details else {
            Issue.record("expected an invalid-template detail of kind wrongKind, got \(back.details)")
            return
        }
        #expect(algorithm == 1000)
    }

    @Test("a problem of unspecified kind is dropped rather than invented")
    func unspecifiedProblem() {
        let message = Registry_V1_Error.with {
            $0.code = .invalidTemplate
            $0.templateProblem = .with { $0.algorithm = 24 }
        }
        #expect(sameDetails(RegistryError(message).details, .none))
    }
}
