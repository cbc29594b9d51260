import RegistryClient
import RegistryModel

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
        case .livenessRequired:
            self.status = "liveness_required"
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
            case .livenessRequired: "skipped: the gallery requires a live face to register, and none was shown"
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
    /// The capture quality score of the face it came from (when the face carried capture metadata).
    var quality: Float?
    /// The landmark symmetry/coverage score (the CoMa landmark matcher), for landmark templates.
    var landmarkQuality: Float?
    var template: TemplateDataJSON?

    init(_ stored: StoredTemplate) {
        self.id = stored.id
        self.identifier = stored.identifier
        self.algorithm = stored.algorithm
        self.registeredAt = Timestamp.iso8601(micros: stored.registeredAt)
        self.registeredAtMicros = stored.registeredAt
        self.source = Self.source(stored.source)
        self.quality = stored.quality
        self.landmarkQuality = stored.landmarkQuality
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
        case .landmarks(let matcher):
            self.kind = "landmarks"
            self.scoreFunction = matcher.rawValue
        }
    }
}

struct RegistryJSON: Codable, Hashable {
    var algorithm: AlgorithmJSON
    var thresholds: ThresholdsJSON
    var templates: Int
    var identifiers: Int
    /// The capture quality a face must reach to be registered / auto-enrolled here (absent: no gate).
    var minimumQuality: Float?
    var minimumAutoEnrolmentQuality: Float?
}

struct LivenessPolicyJSON: Codable, Hashable {
    var authenticate: Bool
    var identify: Bool
    var register: Bool
    /// The non-planar and micro-movement checks are required too.
    var strict: Bool

    init(_ policy: LivenessPolicy) {
        self.authenticate = policy.authenticate
        self.identify = policy.identify
        self.register = policy.register
        self.strict = policy.strict
    }

    /// `authenticate, register`, or `none`.
    static func text(_ policy: LivenessPolicy) -> String {
        let operations = [("authenticate", policy.authenticate), ("identify", policy.identify), ("register", policy.register)]
            .filter(\.1).map(\.0)
        return operations.isEmpty ? "none" : operations.joined(separator: ", ")
    }
}

struct GalleryJSON: Codable, Hashable {
    var name: String
    var identifiers: Int
    /// Priority order.
    var registries: [RegistryJSON]
    /// Which operations require a live face.
    var liveness: LivenessPolicyJSON
    /// The k of the gallery's liveness profiles (mean ± k·std).
    var livenessK: Float

    init(_ gallery: GalleryInfo) {
        self.name = gallery.name
        self.identifiers = gallery.identifierCount
        self.registries = gallery.registries.map {
            RegistryJSON(
                algorithm: AlgorithmJSON($0.algorithm), thresholds: ThresholdsJSON($0.thresholds),
                templates: $0.templateCount, identifiers: $0.identifierCount, minimumQuality: $0.minimumQuality,
                minimumAutoEnrolmentQuality: $0.minimumAutoEnrolmentQuality)
        }
        self.liveness = LivenessPolicyJSON(gallery.liveness)
        self.livenessK = gallery.livenessK
    }

    /// The gallery as text: a heading with its liveness policy, and its registries in priority order
    /// with their thresholds and quality gates ("-": none).
    static func lines(_ gallery: GalleryInfo) -> [String] {
        let operations = LivenessPolicyJSON.text(gallery.liveness)
        let liveness =
            operations == "none"
            ? "liveness not required" : "\(gallery.liveness.strict ? "strict " : "")liveness required for \(operations)"
        var lines = [
            "gallery \(gallery.name): \(Format.plural(gallery.identifierCount, "identifier")); \(liveness); "
                + "liveness profile k \(Format.threshold(gallery.livenessK))"
        ]
        var table = Table(header: [
            "#", "ALGORITHM", "AUTH", "IDENT", "AUTO", "MIN QUALITY", "MIN AUTO QUALITY", "TEMPLATES", "IDENTIFIERS",
        ])
        for (index, registry) in gallery.registries.enumerated() {
            table.append([
                "\(index + 1)", "\(registry.algorithm.name) (\(registry.algorithm.version))",
                Format.threshold(registry.thresholds.authentication), Format.threshold(registry.thresholds.identification),
                Format.threshold(registry.thresholds.autoEnrolment), registry.minimumQuality.map(Format.threshold) ?? "-",
                registry.minimumAutoEnrolmentQuality.map(Format.threshold) ?? "-", "\(registry.templateCount)",
                "\(registry.identifierCount)",
            ])
        }
        lines += table.lines(indent: "  ")
        return lines
    }
}

// MARK: Capture gates

/// A capture quality assessment (the capture quality design).
struct QualityJSON: Codable, Hashable {
    var score: Float
    /// excellent, good, fair, poor.
    var rating: String
    /// The component with the lowest value.
    var weakest: String
    /// Each present component's normalised value, 0...1, by name (confidence, size, angle, resolution,
    /// sharpness, lighting).
    var components: [String: Float]

    init(_ assessment: QualityAssessment) {
        self.score = assessment.score
        self.rating = assessment.rating.rawValue
        self.weakest = assessment.weakest.rawValue
        self.components = Dictionary(uniqueKeysWithValues: assessment.components.map { ($0.key.rawValue, $0.value) })
    }

    /// `0.9812 (excellent), weakest component: angle`.
    static func summary(_ assessment: QualityAssessment) -> String {
        "\(Format.score(assessment.score)) (\(assessment.rating.rawValue)), weakest component: \(assessment.weakest.rawValue)"
    }

    /// The components present, in weight order, with their values and weights.
    static func componentLines(_ assessment: QualityAssessment, indent: String) -> [String] {
        var table = Table(header: ["COMPONENT", "VALUE", "WEIGHT"])
        for component in QualityComponent.allCases {
            guard let value = assessment.components[component] else { continue }
            table.append([component.rawValue, Format.score(value), Format.fixed(Double(component.weight), digits: 2)])
        }
        return table.lines(indent: indent)
    }
}

/// One liveness check's outcome.
struct LivenessCheckJSON: Codable, Hashable {
    /// The check's name as the protocol and the daemon's messages give it: realisticDepth,
    /// centerVariation, edgeVariation, depthProfile, depthVariation, depthDistribution, gradientPattern,
    /// temporalConsistency, microMovement.
    var check: String
    var mandatory: Bool
    var passed: Bool
    /// The value that decided the check, metres (absent when it is not finite: a temporal check that
    /// could not measure anything).
    var value: Float?
    /// The comparison with the measured values, e.g. `centerStdDev 0.0012 m < 0.005 m`.
    var condition: String
    /// The threshold, e.g. `≥ 0.005 m`.
    var threshold: String

    init(_ result: LivenessCheckResult) {
        self.check = result.check.rawValue
        self.mandatory = result.mandatory
        self.passed = result.passed
        self.value = result.value.isFinite ? result.value : nil
        self.condition = result.condition
        self.threshold = result.threshold
    }
}

/// A liveness verdict (the liveness enrolment and depth liveness designs).
struct LivenessVerdictJSON: Codable, Hashable {
    var live: Bool
    /// Which thresholds decided: fixed, personalised, fixed_fallback.
    var thresholds: String
    /// Valid samples in the last frame.
    var validSamples: Int
    /// Every check, in report order (empty when there were too few valid samples to run them).
    var checks: [LivenessCheckJSON]
    /// The failed checks' names.
    var failed: [String]
    /// Why the face is not live (absent when live).
    var reason: String?

    init(_ verdict: LivenessVerdict) {
        self.live = verdict.live
        self.thresholds = Self.thresholds(verdict.thresholds)
        self.validSamples = verdict.validSamples
        self.checks = verdict.checks.map(LivenessCheckJSON.init)
        self.failed = verdict.failed.map(\.rawValue)
        self.reason = verdict.reason
    }

    static func thresholds(_ source: LivenessThresholdSource) -> String {
        switch source {
        case .fixed: "fixed"
        case .personalised: "personalised"
        case .fixedFallback: "fixed_fallback"
        }
    }

    /// The thresholds for people: `fixed`, `personalised`, `fixed fallback (...)`.
    static func thresholdsText(_ source: LivenessThresholdSource) -> String {
        switch source {
        case .fixed: "fixed"
        case .personalised: "personalised (the identifier's liveness profile)"
        case .fixedFallback: "fixed fallback (the personalised thresholds were not met)"
        }
    }

    /// The verdict as text: live yes/no, the thresholds, the valid samples, the reason, and every check
    /// with its result, condition and threshold.
    static func lines(_ verdict: LivenessVerdict) -> [String] {
        var summary = Table()
        summary.append(["live", verdict.live ? "yes" : "no"])
        summary.append(["thresholds", Self.thresholdsText(verdict.thresholds)])
        summary.append(["valid samples", "\(verdict.validSamples) of \(DepthFrame.gridSize * DepthFrame.gridSize)"])
        if let reason = verdict.reason { summary.append(["reason", reason]) }
        var lines = ["liveness:"] + summary.lines(indent: "  ")
        guard !verdict.checks.isEmpty else { return lines }
        var checks = Table(header: ["CHECK", "KIND", "RESULT", "CONDITION", "THRESHOLD"])
        for result in verdict.checks {
            checks.append([
                result.check.rawValue, result.mandatory ? "mandatory" : "optional", result.passed ? "passed" : "FAILED",
                result.condition, result.threshold,
            ])
        }
        lines += checks.lines(indent: "  ")
        return lines
    }

    /// The failed checks for an error report: `centerVariation (mandatory): centerStdDev 0.0004 m < 0.005 m`.
    static func failedLines(_ verdict: LivenessVerdict) -> [String] {
        var lines = ["thresholds: \(Self.thresholdsText(verdict.thresholds)); valid samples: \(verdict.validSamples)"]
        for result in verdict.checks where !result.passed {
            lines.append("failed \(result.check.rawValue) (\(result.mandatory ? "mandatory" : "optional")): \(result.condition)")
        }
        if let reason = verdict.reason { lines.append("reason: \(reason)") }
        return lines
    }
}

/// QUALITY_TOO_LOW's details.
struct QualityTooLowJSON: Codable, Hashable {
    /// The registry that refused.
    var algorithm: UInt32
    var minimum: Float
    /// Absent when the face carried no or incomplete capture metadata.
    var assessment: QualityJSON?
    /// The capture inputs that were missing (empty with an assessment, or without any metadata).
    var missing: [String]

    init(algorithm: UInt32, minimum: Float, assessment: QualityAssessment?, missing: [String]) {
        self.algorithm = algorithm
        self.minimum = minimum
        self.assessment = assessment.map(QualityJSON.init)
        self.missing = missing
    }

    static func lines(
        algorithm: UInt32, minimum: Float, assessment: QualityAssessment?, missing: [String], _ names: AlgorithmNames
    ) -> [String] {
        var lines = ["minimum: \(Format.threshold(minimum)) (the \(names(algorithm)) registry)"]
        if let assessment {
            lines.append("assessment: \(QualityJSON.summary(assessment))")
            lines += QualityJSON.componentLines(assessment, indent: "  ")
        } else if missing.isEmpty {
            lines.append("the face carries no capture metadata")
        } else {
            lines.append("missing capture inputs: \(missing.joined(separator: ", "))")
        }
        return lines
    }
}

/// A range of a liveness profile.
struct RangeJSON: Codable, Hashable {
    var lower: Float
    var upper: Float

    init(_ range: ClosedRange<Float>) {
        self.lower = range.lowerBound
        self.upper = range.upperBound
    }
}

/// An identifier's liveness profile: per statistic, the range mean ± k·std over its enrolment frames.
struct LivenessProfileJSON: Codable, Hashable {
    var k: Float
    /// How many enrolment frames the ranges come from.
    var frames: Int
    /// The personalised distance rule, metres.
    var realisticDepth: RangeJSON
    /// By statistic: mean, stdDev, range, edgeStdDev, centerStdDev, gradientMean, gradientStdDev (metres).
    var ranges: [String: RangeJSON]

    init(_ profile: LivenessProfile) {
        self.k = profile.k
        self.frames = profile.frameCount
        self.realisticDepth = RangeJSON(profile.realisticDepth)
        self.ranges = Dictionary(uniqueKeysWithValues: Self.statistics(profile).map { ($0.name, RangeJSON($0.range)) })
    }

    /// The statistics' ranges in report order.
    static func statistics(_ profile: LivenessProfile) -> [(name: String, range: ClosedRange<Float>)] {
        [
            ("mean", profile.mean), ("stdDev", profile.stdDev), ("range", profile.range), ("edgeStdDev", profile.edgeStdDev),
            ("centerStdDev", profile.centerStdDev), ("gradientMean", profile.gradientMean),
            ("gradientStdDev", profile.gradientStdDev),
        ]
    }

    /// A heading and the ranges, metres.
    static func lines(_ profile: LivenessProfile, heading: String) -> [String] {
        var lines = ["\(heading): k \(Format.threshold(profile.k)), \(Format.plural(profile.frameCount, "enrolment frame"))"]
        var table = Table(header: ["STATISTIC", "LOWER (m)", "UPPER (m)"])
        table.append([
            "realisticDepth", Format.fixed(Double(profile.realisticDepth.lowerBound), digits: 5),
            Format.fixed(Double(profile.realisticDepth.upperBound), digits: 5),
        ])
        for (name, range) in Self.statistics(profile) {
            table.append([name, Format.fixed(Double(range.lowerBound), digits: 5), Format.fixed(Double(range.upperBound), digits: 5)])
        }
        lines += table.lines(indent: "  ")
        return lines
    }
}
