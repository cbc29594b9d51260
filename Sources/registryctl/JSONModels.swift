import RegistryClient
import RegistryCore

// Codable mirrors of the engine's results for `--json`: numbers stay numbers (scores as floats,
// template ids as integers), enumerations become lower_snake_case strings.

struct FindingJSON: Codable, Hashable {
    var algorithm: UInt32
    /// `similar_face` or `face_mismatch`.
    var kind: String
    /// similar_face: the other identifier and its score.
    var identifier: String?
    var score: Float?
    /// face_mismatch: the best score of the identifier's own templates.
    var bestScore: Float?

    init(_ finding: RegistrationFinding) {
        self.algorithm = finding.algorithm
        switch finding.kind {
        case .similarFace(let identifier, let score):
            self.kind = "similar_face"
            self.identifier = identifier
            self.score = score
        case .faceMismatch(let bestScore):
            self.kind = "face_mismatch"
            self.bestScore = bestScore
        }
    }

    /// `similar face 'bob' (score 0.8312) in arcface (24)`.
    static func text(_ finding: RegistrationFinding, _ names: AlgorithmNames) -> String {
        switch finding.kind {
        case .similarFace(let identifier, let score):
            "similar face \(Format.quoted(identifier)) (score \(Format.score(score))) in \(names(finding.algorithm))"
        case .faceMismatch(let bestScore):
            "face mismatch (best score \(Format.score(bestScore))) in \(names(finding.algorithm))"
        }
    }
}

struct TemplateProblemJSON: Codable, Hashable {
    var algorithm: UInt32
    var kind: String
    var expected: Int?
    var actual: Int?
    var index: Int?
    var norm: Float?
    var landmark: String?

    init(algorithm: UInt32, problem: TemplateProblem) {
        self.algorithm = algorithm
        switch problem {
        case .wrongDimension(let expected, let actual):
            self.kind = "wrong_dimension"
            self.expected = expected
            self.actual = actual
        case .nonFiniteValue(let index):
            self.kind = "non_finite_value"
            self.index = index
        case .zeroVector:
            self.kind = "zero_vector"
        case .notNormalised(let norm):
            self.kind = "not_normalised"
            self.norm = norm
        case .tooFewLandmarks(let count, let minimum):
            self.kind = "too_few_landmarks"
            self.actual = count
            self.expected = minimum
        case .unknownLandmark(let name):
            self.kind = "unknown_landmark"
            self.landmark = name
        case .duplicateLandmark(let name):
            self.kind = "duplicate_landmark"
            self.landmark = name
        case .wrongKind:
            self.kind = "wrong_kind"
        }
    }
}

struct AutoEnrolmentJSON: Codable, Hashable {
    var algorithm: UInt32
    /// enrolled, already_registered, no_template, score_below_threshold, refused, failed.
    var status: String
    var templateId: UInt64?
    var score: Float?
    var threshold: Float?
    var finding: FindingJSON?
    var message: String?

    init(_ outcome: AutoEnrolmentOutcome) {
        self.algorithm = outcome.algorithm
        switch outcome.result {
        case .enrolled(let templateId):
            self.status = "enrolled"
            self.templateId = templateId
        case .alreadyRegistered:
            self.status = "already_registered"
        case .noTemplate:
            self.status = "no_template"
        case .scoreBelowThreshold(let score, let threshold):
            self.status = "score_below_threshold"
            self.score = score
            self.threshold = threshold
        case .refused(let finding):
            self.status = "refused"
            self.finding = FindingJSON(finding)
        case .failed(let message):
            self.status = "failed"
            self.message = message
        case .qualityTooLow(let score, let minimum):
            self.status = "quality_too_low"
            self.score = score
            self.threshold = minimum
        }
    }

    /// `r300 (300): enrolled as template 19`.
    static func text(_ outcome: AutoEnrolmentOutcome, _ names: AlgorithmNames) -> String {
        let what =
            switch outcome.result {
            case .enrolled(let templateId): "enrolled as template \(templateId)"
            case .alreadyRegistered: "already registered"
            case .noTemplate: "skipped: the face has no template for it"
            case .scoreBelowThreshold(let score, let threshold):
                "skipped: score \(Format.score(score)) is below the auto-enrolment threshold \(Format.threshold(threshold))"
            case .refused(let finding): "refused: \(FindingJSON.text(finding, names))"
            case .failed(let message): "failed: \(message)"
            case .qualityTooLow(let score?, let minimum):
                "skipped: capture quality \(Format.score(score)) is below the registry's minimum \(Format.threshold(minimum))"
            case .qualityTooLow(nil, let minimum):
                "skipped: the registry requires capture quality \(Format.threshold(minimum)) and the face has no capture metadata"
            }
        return "\(names(outcome.algorithm)): \(what)"
    }

    /// The auto-enrolment report as text lines (nothing when there is none).
    static func lines(_ outcomes: [AutoEnrolmentOutcome], _ names: AlgorithmNames) -> [String] {
        guard !outcomes.isEmpty else { return [] }
        return ["auto-enrolment:"] + outcomes.map { "  " + Self.text($0, names) }
    }
}

/// A template's data in the Ver-ID form (only with `show --data`).
struct TemplateDataJSON: Codable, Hashable {
    var version: UInt32
    var data: [Float]?
    var landmarks: [LandmarkJSON]?

    init(_ template: FaceTemplate) {
        self.version = template.algorithm
        switch template.data {
        case .vector(let values): self.data = values
        case .landmarks(let landmarks): self.landmarks = landmarks.map(LandmarkJSON.init)
        }
    }
}

struct LandmarkJSON: Codable, Hashable {
    var name: String
    var x: Float
    var y: Float
    var z: Float

    init(_ landmark: Landmark) {
        self.name = landmark.name
        self.x = landmark.x
        self.y = landmark.y
        self.z = landmark.z
    }
}

struct StoredTemplateJSON: Codable, Hashable {
    var id: UInt64
    var identifier: String
    var algorithm: UInt32
    /// ISO-8601 UTC.
    var registeredAt: String
    var registeredAtMicros: Int64
    /// registered, auto_enrolled, imported, forced.
    var source: String
    var quality: Float?
    var template: TemplateDataJSON?

    init(_ stored: StoredTemplate) {
        self.id = stored.id
        self.identifier = stored.identifier
        self.algorithm = stored.algorithm
        self.registeredAt = Timestamp.iso8601(micros: stored.registeredAt)
        self.registeredAtMicros = stored.registeredAt
        self.source = Self.source(stored.source)
        self.quality = stored.quality
        self.template = stored.template.map(TemplateDataJSON.init)
    }

    static func source(_ source: TemplateSource) -> String {
        switch source {
        case .registered: "registered"
        case .autoEnrolled: "auto_enrolled"
        case .imported: "imported"
        case .forced: "forced"
        }
    }
}

struct ThresholdsJSON: Codable, Hashable {
    var authentication: Float
    var identification: Float
    var autoEnrolment: Float

    init(_ thresholds: Thresholds) {
        self.authentication = thresholds.authentication
        self.identification = thresholds.identification
        self.autoEnrolment = thresholds.autoEnrolment
    }
}

struct AlgorithmJSON: Codable, Hashable {
    var version: UInt32
    var name: String
    /// vector or landmarks.
    var kind: String
    var dimension: Int?
    var scoreFunction: String?
    var defaultThreshold: Float

    init(_ algorithm: Algorithm) {
        self.version = algorithm.version
        self.name = algorithm.name
        self.defaultThreshold = algorithm.defaultThreshold
        switch algorithm.kind {
        case .vector(let dimension):
            self.kind = "vector"
            self.dimension = dimension
            self.scoreFunction = algorithm.scoreFunction.rawValue
        case .landmarks:
            self.kind = "landmarks"
        }
    }
}

struct RegistryJSON: Codable, Hashable {
    var algorithm: AlgorithmJSON
    var thresholds: ThresholdsJSON
    var templates: Int
    var identifiers: Int
}

struct GalleryJSON: Codable, Hashable {
    var name: String
    var identifiers: Int
    /// Priority order.
    var registries: [RegistryJSON]

    init(_ gallery: GalleryInfo) {
        self.name = gallery.name
        self.identifiers = gallery.identifierCount
        self.registries = gallery.registries.map {
            RegistryJSON(
                algorithm: AlgorithmJSON($0.algorithm), thresholds: ThresholdsJSON($0.thresholds),
                templates: $0.templateCount, identifiers: $0.identifierCount)
        }
    }

    /// The gallery as text: a heading and its registries in priority order.
    static func lines(_ gallery: GalleryInfo) -> [String] {
        var lines = ["gallery \(gallery.name): \(Format.plural(gallery.identifierCount, "identifier"))"]
        var table = Table(header: ["#", "ALGORITHM", "AUTH", "IDENT", "AUTO", "TEMPLATES", "IDENTIFIERS"])
        for (index, registry) in gallery.registries.enumerated() {
            table.append([
                "\(index + 1)", "\(registry.algorithm.name) (\(registry.algorithm.version))",
                Format.threshold(registry.thresholds.authentication), Format.threshold(registry.thresholds.identification),
                Format.threshold(registry.thresholds.autoEnrolment), "\(registry.templateCount)", "\(registry.identifierCount)",
            ])
        }
        lines += table.lines(indent: "  ")
        return lines
    }
}
