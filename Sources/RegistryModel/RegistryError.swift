/// A refused or failed registry operation: a stable code (PROTOCOL.md §5), a human message, and the
/// structured details a client needs to act on it.
///
/// Messages name identifiers, algorithms, galleries and scores; never template values.
public struct RegistryError: Error, Sendable, CustomStringConvertible {
    /// The stable error codes of PROTOCOL.md §5 (the engine produces a subset; the daemon and the client
    /// library use the rest).
    public enum Code: String, Sendable, Hashable, CaseIterable {
        case similarFaceRegistered = "SIMILAR_FACE_REGISTERED"
        case faceMismatch = "FACE_MISMATCH"
        case identifierNotRegistered = "IDENTIFIER_NOT_REGISTERED"
        case incompatibleTemplates = "INCOMPATIBLE_TEMPLATES"
        case invalidTemplate = "INVALID_TEMPLATE"
        case unknownAlgorithm = "UNKNOWN_ALGORITHM"
        case unknownGallery = "UNKNOWN_GALLERY"
        case qualityTooLow = "QUALITY_TOO_LOW"
        case livenessFailed = "LIVENESS_FAILED"
        case permissionDenied = "PERMISSION_DENIED"
        case malformedRequest = "MALFORMED_REQUEST"
        case frameTooLarge = "FRAME_TOO_LARGE"
        case unsupportedVersion = "UNSUPPORTED_VERSION"
        case storageFull = "STORAGE_FULL"
        case shuttingDown = "SHUTTING_DOWN"
        case `internal` = "INTERNAL"
        /// The daemon serves its maximum number of connections: retry later.
        case tooManyConnections = "TOO_MANY_CONNECTIONS"
        case fleetUnavailable = "FLEET_UNAVAILABLE"
    }

    /// Structured details, by code.
    public enum Details: Sendable {
        case none
        /// `SIMILAR_FACE_REGISTERED` and `FACE_MISMATCH`: the decisive finding, then every finding of
        /// the request's checks (one per registry that found something), in registry priority order.
        case registration(decisive: RegistrationFinding, all: [RegistrationFinding])
        /// `INVALID_TEMPLATE`: which algorithm's template and what is wrong with it.
        case invalidTemplate(algorithm: UInt32, problem: TemplateProblem)
        /// `QUALITY_TOO_LOW`: the registry's minimum, and the assessment (nil when the face carried no,
        /// or incomplete, capture metadata: `missing` names what was missing).
        case qualityTooLow(algorithm: UInt32, minimum: Float, assessment: QualityAssessment?, missing: [String])
        /// `LIVENESS_FAILED`: the verdict, with every check and the failed ones.
        case livenessFailed(LivenessVerdict)
    }

    public let code: Code
    public let message: String
    public let details: Details

    public init(_ code: Code, _ message: String, details: Details = .none) {
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { "\(self.code.rawValue): \(self.message)" }

    public static func malformedRequest(_ message: String) -> RegistryError {
        RegistryError(.malformedRequest, message)
    }

    package static func unknownGallery(_ name: String) -> RegistryError {
        RegistryError(.unknownGallery, "gallery '\(name)' does not exist")
    }

    package static func invalidTemplate(_ algorithm: Algorithm, _ problem: TemplateProblem) -> RegistryError {
        RegistryError(
            .invalidTemplate, "invalid \(algorithm.name) template: \(problem)",
            details: .invalidTemplate(algorithm: algorithm.version, problem: problem))
    }

    package static func qualityTooLow(_ algorithm: Algorithm, minimum: Float, assessment: QualityAssessment?, missing: [String]) -> RegistryError {
        let message: String
        if let assessment {
            let score = (assessment.score * 10_000).rounded() / 10_000
            message =
                "capture quality \(score) (\(assessment.rating.rawValue)) is below the \(algorithm.name) registry's minimum \(minimum); weakest component: \(assessment.weakest.rawValue)"
        } else {
            let what = missing.isEmpty ? "no capture metadata" : "incomplete capture metadata (missing \(missing.joined(separator: ", ")))"
            message = "the \(algorithm.name) registry requires capture quality \(minimum) and the face carries \(what)"
        }
        return RegistryError(
            .qualityTooLow, message,
            details: .qualityTooLow(algorithm: algorithm.version, minimum: minimum, assessment: assessment, missing: missing))
    }

    package static func livenessFailed(_ verdict: LivenessVerdict) -> RegistryError {
        var message = "the face did not pass the liveness check"
        if let reason = verdict.reason { message += ": \(reason)" }
        if !verdict.failed.isEmpty { message += " (failed: \(verdict.failed.map(\.rawValue).joined(separator: ", ")))" }
        return RegistryError(.livenessFailed, message, details: .livenessFailed(verdict))
    }

    /// The documented recovery from a damaged store.
    package static let restoreAdvice = "Restore the data directory from a backup (registryctl backup makes them)"

    /// A store that failed its checks; the message says the documented recovery.
    package static func damagedStore(_ what: String) -> RegistryError {
        RegistryError(.internal, "the store is damaged: \(what). \(Self.restoreAdvice)")
    }
}

/// What a register check found in one registry (the README's engine behaviour checks (1) and (2)).
public struct RegistrationFinding: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// (1): the best-scoring template of another identifier reached the identification threshold.
        case similarFace(identifier: String, score: Float)
        /// (2): the identifier has templates in the registry and none reached the authentication
        /// threshold; the best of them scored this.
        case faceMismatch(bestScore: Float)
    }

    /// The algorithm (version id) of the registry.
    public var algorithm: UInt32
    public var kind: Kind

    public init(algorithm: UInt32, kind: Kind) {
        self.algorithm = algorithm
        self.kind = kind
    }
}
