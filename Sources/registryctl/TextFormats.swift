import RegistryClient
import RegistryModel

// The results as text for people. Their JSON is the model types' own (Encodable in RegistryModel);
// the text lines are registryctl's.

extension RegistrationFinding {
    /// `similar face 'bob' (score 0.8312) in arcface (24)`.
    func text(_ names: AlgorithmNames) -> String {
        switch self.kind {
        case .similarFace(let identifier, let score):
            "similar face \(Format.quoted(identifier)) (score \(Format.score(score))) in \(names(self.algorithm))"
        case .faceMismatch(let bestScore):
            "face mismatch (best score \(Format.score(bestScore))) in \(names(self.algorithm))"
        }
    }
}

extension AutoEnrolmentOutcome {
    /// `r300 (300): enrolled as template 19`.
    func text(_ names: AlgorithmNames) -> String {
        let what =
            switch self.result {
            case .enrolled(let templateId): "enrolled as template \(templateId)"
            case .alreadyRegistered: "already registered"
            case .noTemplate: "skipped: the face has no template for it"
            case .scoreBelowThreshold(let score, let threshold):
                "skipped: score \(Format.score(score)) is below the auto-enrolment threshold \(Format.threshold(threshold))"
            case .refused(let finding): "refused: \(finding.text(names))"
            case .failed(let message): "failed: \(message)"
            case .qualityTooLow(let score?, let minimum):
                "skipped: capture quality \(Format.score(score)) is below the registry's minimum \(Format.threshold(minimum))"
            case .qualityTooLow(nil, let minimum):
                "skipped: the registry requires capture quality \(Format.threshold(minimum)) and the face has no capture metadata"
            case .livenessRequired: "skipped: the gallery requires a live face to register, and none was shown"
            }
        return "\(names(self.algorithm)): \(what)"
    }

    /// The auto-enrolment report as text lines (nothing when there is none).
    static func lines(_ outcomes: [AutoEnrolmentOutcome], _ names: AlgorithmNames) -> [String] {
        guard !outcomes.isEmpty else { return [] }
        return ["auto-enrolment:"] + outcomes.map { "  " + $0.text(names) }
    }
}

extension LivenessPolicy {
    /// `authenticate, register`, or `none`.
    var operationsText: String {
        let operations = [("authenticate", self.authenticate), ("identify", self.identify), ("register", self.register)]
            .filter(\.1).map(\.0)
        return operations.isEmpty ? "none" : operations.joined(separator: ", ")
    }
}

extension GalleryInfo {
    /// The gallery as text: a heading with its liveness policy, and its registries in priority order
    /// with their thresholds and quality gates ("-": none).
    var lines: [String] {
        let operations = self.liveness.operationsText
        let liveness =
            operations == "none" ? "liveness not required" : "\(self.liveness.strict ? "strict " : "")liveness required for \(operations)"
        var lines = [
            "gallery \(self.name): \(Format.plural(self.identifierCount, "identifier")); \(liveness); "
                + "liveness profile k \(Format.threshold(self.livenessK))"
        ]
        var table = Table(header: [
            "#", "ALGORITHM", "AUTH", "IDENT", "AUTO", "MIN QUALITY", "MIN AUTO QUALITY", "TEMPLATES", "IDENTIFIERS",
        ])
        for (index, registry) in self.registries.enumerated() {
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

extension QualityAssessment {
    /// `0.9812 (excellent), weakest component: angle`.
    var summary: String {
        "\(Format.score(self.score)) (\(self.rating.rawValue)), weakest component: \(self.weakest.rawValue)"
    }

    /// The components present, in weight order, with their values and weights.
    func componentLines(indent: String) -> [String] {
        var table = Table(header: ["COMPONENT", "VALUE", "WEIGHT"])
        for component in QualityComponent.allCases {
            guard let value = self.components[component] else { continue }
            table.append([component.rawValue, Format.score(value), Format.fixed(Double(component.weight), digits: 2)])
        }
        return table.lines(indent: indent)
    }
}

extension LivenessThresholdSource {
    /// The thresholds for people: `fixed`, `personalised`, `fixed fallback (...)`.
    var text: String {
        switch self {
        case .fixed: "fixed"
        case .personalised: "personalised (the identifier's liveness profile)"
        case .fixedFallback: "fixed fallback (the personalised thresholds were not met)"
        }
    }
}

extension LivenessVerdict {
    /// The verdict as text: live yes/no, the thresholds, the valid samples, the reason, and every check
    /// with its result, condition and threshold.
    var lines: [String] {
        var summary = Table()
        summary.append(["live", self.live ? "yes" : "no"])
        summary.append(["thresholds", self.thresholds.text])
        summary.append(["valid samples", "\(self.validSamples) of \(DepthFrame.gridSize * DepthFrame.gridSize)"])
        if let reason = self.reason { summary.append(["reason", reason]) }
        var lines = ["liveness:"] + summary.lines(indent: "  ")
        guard !self.checks.isEmpty else { return lines }
        var checks = Table(header: ["CHECK", "KIND", "RESULT", "CONDITION", "THRESHOLD"])
        for result in self.checks {
            checks.append([
                result.check.rawValue, result.mandatory ? "mandatory" : "optional", result.passed ? "passed" : "FAILED",
                result.condition, result.threshold,
            ])
        }
        lines += checks.lines(indent: "  ")
        return lines
    }

    /// The failed checks for an error report: `centerVariation (mandatory): centerStdDev 0.0004 m < 0.005 m`.
    var failedLines: [String] {
        var lines = ["thresholds: \(self.thresholds.text); valid samples: \(self.validSamples)"]
        for result in self.checks where !result.passed {
            lines.append("failed \(result.check.rawValue) (\(result.mandatory ? "mandatory" : "optional")): \(result.condition)")
        }
        if let reason = self.reason { lines.append("reason: \(reason)") }
        return lines
    }
}

extension LivenessProfile {
    /// A heading and the ranges, metres.
    func lines(heading: String) -> [String] {
        var lines = ["\(heading): k \(Format.threshold(self.k)), \(Format.plural(self.frameCount, "enrolment frame"))"]
        var table = Table(header: ["STATISTIC", "LOWER (m)", "UPPER (m)"])
        table.append([
            "realisticDepth", Format.fixed(Double(self.realisticDepth.lowerBound), digits: 5),
            Format.fixed(Double(self.realisticDepth.upperBound), digits: 5),
        ])
        for (name, range) in self.statistics {
            table.append([name, Format.fixed(Double(range.lowerBound), digits: 5), Format.fixed(Double(range.upperBound), digits: 5)])
        }
        lines += table.lines(indent: "  ")
        return lines
    }
}

/// QUALITY_TOO_LOW's details (the error's, which no model type holds together).
struct QualityTooLowDetail: Encodable {
    /// The registry that refused.
    var algorithm: UInt32
    var minimum: Float
    /// Absent when the face carried no or incomplete capture metadata.
    var assessment: QualityAssessment?
    /// The capture inputs that were missing (empty with an assessment, or without any metadata).
    var missing: [String]

    func lines(_ names: AlgorithmNames) -> [String] {
        var lines = ["minimum: \(Format.threshold(self.minimum)) (the \(names(self.algorithm)) registry)"]
        if let assessment = self.assessment {
            lines.append("assessment: \(assessment.summary)")
            lines += assessment.componentLines(indent: "  ")
        } else if self.missing.isEmpty {
            lines.append("the face carries no capture metadata")
        } else {
            lines.append("missing capture inputs: \(self.missing.joined(separator: ", "))")
        }
        return lines
    }
}

/// INVALID_TEMPLATE's details: the problem with the algorithm of the template it is in.
struct TemplateProblemDetail: Encodable {
    var algorithm: UInt32
    var problem: TemplateProblem

    private enum CodingKeys: String, CodingKey { case algorithm }

    /// The problem's keys and `algorithm`, in one object.
    func encode(to encoder: any Encoder) throws {
        try self.problem.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.algorithm, forKey: .algorithm)
    }
}
