// The JSON form of the results, as `registryctl --json` prints them: numbers stay numbers (scores as
// floats, template ids as integers), enumerations become lower_snake_case strings, times ISO-8601
// UTC. Keys are the properties' names unless a CodingKeys says otherwise (Thresholds,
// LivenessPolicy, RegistryInfo and GalleryInfo synthesize theirs, in their own files). No template
// data: a stored template encodes its metadata only (registryctl `show --data` adds the data
// itself, where it is asked for), so that no encoding of these types carries biometric data by
// accident.

extension RegistrationFinding: Encodable {
    private enum CodingKeys: String, CodingKey {
        /// `kind`: `similar_face` (with `identifier` and `score`) or `face_mismatch` (with `bestScore`).
        case algorithm, kind, identifier, score, bestScore
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.algorithm, forKey: .algorithm)
        switch self.kind {
        case .similarFace(let identifier, let score):
            try container.encode("similar_face", forKey: .kind)
            try container.encode(identifier, forKey: .identifier)
            try container.encode(score, forKey: .score)
        case .faceMismatch(let bestScore):
            try container.encode("face_mismatch", forKey: .kind)
            try container.encode(bestScore, forKey: .bestScore)
        }
    }
}

extension TemplateProblem: Encodable {
    private enum CodingKeys: String, CodingKey { case kind, expected, actual, index, norm, landmark }

    /// `kind` and what the kind has: `expected` and `actual` (a dimension, or a landmark count and
    /// its minimum), `index`, `norm` or `landmark`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .wrongDimension(let expected, let actual):
            try container.encode("wrong_dimension", forKey: .kind)
            try container.encode(expected, forKey: .expected)
            try container.encode(actual, forKey: .actual)
        case .nonFiniteValue(let index):
            try container.encode("non_finite_value", forKey: .kind)
            try container.encode(index, forKey: .index)
        case .zeroVector:
            try container.encode("zero_vector", forKey: .kind)
        case .notNormalised(let norm):
            try container.encode("not_normalised", forKey: .kind)
            try container.encode(norm, forKey: .norm)
        case .tooFewLandmarks(let count, let minimum):
            try container.encode("too_few_landmarks", forKey: .kind)
            try container.encode(count, forKey: .actual)
            try container.encode(minimum, forKey: .expected)
        case .unknownLandmark(let name):
            try container.encode("unknown_landmark", forKey: .kind)
            try container.encode(name, forKey: .landmark)
        case .duplicateLandmark(let name):
            try container.encode("duplicate_landmark", forKey: .kind)
            try container.encode(name, forKey: .landmark)
        case .wrongKind:
            try container.encode("wrong_kind", forKey: .kind)
        }
    }
}

extension AutoEnrolmentOutcome: Encodable {
    private enum CodingKeys: String, CodingKey { case algorithm, status, templateId, score, threshold, finding, message }

    /// `status`: enrolled (with `templateId`), already_registered, no_template,
    /// score_below_threshold (`score`, `threshold`), refused (`finding`), failed (`message`),
    /// quality_too_low (`score` when known, the registry's minimum as `threshold`), liveness_required.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.algorithm, forKey: .algorithm)
        switch self.result {
        case .enrolled(let templateId):
            try container.encode("enrolled", forKey: .status)
            try container.encode(templateId, forKey: .templateId)
        case .alreadyRegistered:
            try container.encode("already_registered", forKey: .status)
        case .noTemplate:
            try container.encode("no_template", forKey: .status)
        case .scoreBelowThreshold(let score, let threshold):
            try container.encode("score_below_threshold", forKey: .status)
            try container.encode(score, forKey: .score)
            try container.encode(threshold, forKey: .threshold)
        case .refused(let finding):
            try container.encode("refused", forKey: .status)
            try container.encode(finding, forKey: .finding)
        case .failed(let message):
            try container.encode("failed", forKey: .status)
            try container.encode(message, forKey: .message)
        case .qualityTooLow(let score, let minimum):
            try container.encode("quality_too_low", forKey: .status)
            try container.encodeIfPresent(score, forKey: .score)
            try container.encode(minimum, forKey: .threshold)
        case .livenessRequired:
            try container.encode("liveness_required", forKey: .status)
        }
    }
}

extension TemplateSource {
    /// registered, auto_enrolled, imported, forced.
    public var jsonName: String {
        switch self {
        case .registered: "registered"
        case .autoEnrolled: "auto_enrolled"
        case .imported: "imported"
        case .forced: "forced"
        }
    }
}

extension StoredTemplate: Encodable {
    /// `registeredAt` is ISO-8601 UTC, `registeredAtMicros` the same time in microseconds since the
    /// Unix epoch. `template` is not encoded here (see the top of this file).
    public enum CodingKeys: String, CodingKey {
        case id, identifier, algorithm, registeredAt, registeredAtMicros, source, quality, landmarkQuality, template
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.id, forKey: .id)
        try container.encode(self.identifier, forKey: .identifier)
        try container.encode(self.algorithm, forKey: .algorithm)
        try container.encode(Timestamp.iso8601(micros: self.registeredAt), forKey: .registeredAt)
        try container.encode(self.registeredAt, forKey: .registeredAtMicros)
        try container.encode(self.source.jsonName, forKey: .source)
        try container.encodeIfPresent(self.quality, forKey: .quality)
        try container.encodeIfPresent(self.landmarkQuality, forKey: .landmarkQuality)
    }
}

extension Algorithm: Encodable {
    private enum CodingKeys: String, CodingKey { case version, name, kind, dimension, scoreFunction, defaultThreshold }

    /// `vector` or `landmarks`.
    public var kindName: String {
        switch self.kind {
        case .vector: "vector"
        case .landmarks: "landmarks"
        }
    }

    /// A vector algorithm's dimension; nil for landmarks.
    public var dimension: Int? {
        if case .vector(let dimension) = self.kind { dimension } else { nil }
    }

    /// The vector score function (`cosine`, …) or the landmark matcher.
    public var scoreName: String {
        switch self.kind {
        case .vector: self.scoreFunction.rawValue
        case .landmarks(let matcher): matcher.rawValue
        }
    }

    /// `kind`, and a vector algorithm's `dimension`; `scoreFunction` is the landmark matcher for
    /// landmark algorithms.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.version, forKey: .version)
        try container.encode(self.name, forKey: .name)
        try container.encode(self.kindName, forKey: .kind)
        try container.encodeIfPresent(self.dimension, forKey: .dimension)
        try container.encode(self.scoreName, forKey: .scoreFunction)
        try container.encode(self.defaultThreshold, forKey: .defaultThreshold)
    }
}

extension QualityAssessment: Encodable {
    private enum CodingKeys: String, CodingKey { case score, rating, weakest, components }

    /// `components`: each present component's normalised value by name.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.score, forKey: .score)
        try container.encode(self.rating.rawValue, forKey: .rating)
        try container.encode(self.weakest.rawValue, forKey: .weakest)
        try container.encode(Dictionary(uniqueKeysWithValues: self.components.map { ($0.key.rawValue, $0.value) }), forKey: .components)
    }
}

extension LivenessCheckResult: Encodable {
    private enum CodingKeys: String, CodingKey { case check, mandatory, passed, value, condition, threshold }

    /// `value` only when finite (a temporal check that measured nothing has none); not the
    /// measured values, which `condition` states.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.check.rawValue, forKey: .check)
        try container.encode(self.mandatory, forKey: .mandatory)
        try container.encode(self.passed, forKey: .passed)
        if self.value.isFinite { try container.encode(self.value, forKey: .value) }
        try container.encode(self.condition, forKey: .condition)
        try container.encode(self.threshold, forKey: .threshold)
    }
}

extension LivenessThresholdSource {
    /// fixed, personalised, fixed_fallback.
    public var jsonName: String {
        switch self {
        case .fixed: "fixed"
        case .personalised: "personalised"
        case .fixedFallback: "fixed_fallback"
        }
    }
}

extension LivenessVerdict: Encodable {
    private enum CodingKeys: String, CodingKey { case live, thresholds, validSamples, checks, failed, reason }

    /// `failed`: the failed checks' names; not the depth statistics.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.live, forKey: .live)
        try container.encode(self.thresholds.jsonName, forKey: .thresholds)
        try container.encode(self.validSamples, forKey: .validSamples)
        try container.encode(self.checks, forKey: .checks)
        try container.encode(self.failed.map(\.rawValue), forKey: .failed)
        try container.encodeIfPresent(self.reason, forKey: .reason)
    }
}

extension LivenessProfile: Encodable {
    private enum CodingKeys: String, CodingKey { case k, frames, realisticDepth, ranges }

    private struct Range: Encodable {
        var lower: Float
        var upper: Float

        init(_ range: ClosedRange<Float>) {
            self.lower = range.lowerBound
            self.upper = range.upperBound
        }
    }

    /// The statistics' ranges in report order: mean, stdDev, range, edgeStdDev, centerStdDev,
    /// gradientMean, gradientStdDev (metres).
    public var statistics: [(name: String, range: ClosedRange<Float>)] {
        [
            ("mean", self.mean), ("stdDev", self.stdDev), ("range", self.range), ("edgeStdDev", self.edgeStdDev),
            ("centerStdDev", self.centerStdDev), ("gradientMean", self.gradientMean), ("gradientStdDev", self.gradientStdDev),
        ]
    }

    /// `frames`: the enrolment frames the ranges come from; `ranges`: `{lower, upper}` by statistic.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.k, forKey: .k)
        try container.encode(self.frameCount, forKey: .frames)
        try container.encode(Range(self.realisticDepth), forKey: .realisticDepth)
        try container.encode(Dictionary(uniqueKeysWithValues: self.statistics.map { ($0.name, Range($0.range)) }), forKey: .ranges)
    }
}

extension AuditEntry: Encodable {
    private enum CodingKeys: String, CodingKey { case time, uid, pid, operation, gallery, identifiers, outcome, score, errorCode, count }

    /// `time` ISO-8601 UTC; `count` only for an entry that stands for more than one request.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Timestamp.iso8601(micros: self.time), forKey: .time)
        try container.encode(self.uid, forKey: .uid)
        try container.encode(self.pid, forKey: .pid)
        try container.encode(self.operation, forKey: .operation)
        try container.encode(self.gallery, forKey: .gallery)
        try container.encode(self.identifiers, forKey: .identifiers)
        try container.encode(self.outcome.rawValue, forKey: .outcome)
        try container.encodeIfPresent(self.score, forKey: .score)
        try container.encodeIfPresent(self.errorCode, forKey: .errorCode)
        if self.count != 1 { try container.encode(self.count, forKey: .count) }
    }
}
