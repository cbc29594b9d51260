import RegistryModel
import SwiftProtobuf

// Conversions between the wire messages (proto/registry.proto) and the engine's types, in both
// directions: the daemon decodes requests and encodes results, the client library does the reverse.

/// The protocol version this code speaks.
public enum ProtocolVersion {
    public static let major: UInt32 = 1
    public static let minor: UInt32 = 2
}

// MARK: Templates and faces

extension Registry_V1_Template {
    public init(_ template: FaceTemplate) {
        self.init()
        self.algorithm = template.algorithm
        switch template.data {
        case .vector(let values): self.vector = values
        case .landmarks(let landmarks): self.landmarks = landmarks.map(Registry_V1_Landmark.init)
        }
    }
}

extension FaceTemplate {
    /// A wire template: landmarks when it has any, else the vector (an empty vector stays a vector,
    /// and validation reports its dimension).
    public init(_ message: Registry_V1_Template) {
        if message.landmarks.isEmpty {
            self.init(algorithm: message.algorithm, vector: message.vector)
        } else {
            self.init(algorithm: message.algorithm, landmarks: message.landmarks.map(Landmark.init))
        }
    }
}

extension Registry_V1_Landmark {
    public init(_ landmark: Landmark) {
        self.init()
        self.name = landmark.name
        self.x = landmark.x
        self.y = landmark.y
        self.z = landmark.z
    }
}

extension Landmark {
    public init(_ message: Registry_V1_Landmark) {
        self.init(name: message.name, x: message.x, y: message.y, z: message.z)
    }
}

extension Registry_V1_Face {
    public init(_ face: Face) {
        self.init()
        self.templates = face.templates.map(Registry_V1_Template.init)
        if let capture = face.capture { self.capture = Registry_V1_CaptureMetadata(capture) }
        self.depthFrames = face.depthFrames.map(Registry_V1_DepthFrame.init)
    }
}

extension Face {
    public init(_ message: Registry_V1_Face) {
        self.init(
            templates: message.templates.map(FaceTemplate.init),
            capture: message.hasCapture ? CaptureMetadata(message.capture) : nil,
            depthFrames: message.depthFrames.map(DepthFrame.init))
    }
}

extension Registry_V1_TemplateSource {
    public init(_ source: TemplateSource) {
        switch source {
        case .registered: self = .registered
        case .autoEnrolled: self = .autoEnrolled
        case .imported: self = .imported
        case .forced: self = .forced
        }
    }
}

extension TemplateSource {
    public init?(_ message: Registry_V1_TemplateSource) {
        switch message {
        case .registered: self = .registered
        case .autoEnrolled: self = .autoEnrolled
        case .imported: self = .imported
        case .forced: self = .forced
        case .unspecified, .UNRECOGNIZED: return nil
        }
    }
}

extension Registry_V1_StoredTemplate {
    public init(_ stored: StoredTemplate) {
        self.init()
        self.id = stored.id
        self.identifier = stored.identifier
        self.algorithm = stored.algorithm
        self.registeredAtMicros = stored.registeredAt
        self.source = Registry_V1_TemplateSource(stored.source)
        if let quality = stored.quality { self.quality = quality }
        if let template = stored.template { self.template = Registry_V1_Template(template) }
        if let landmarkQuality = stored.landmarkQuality { self.landmarkQuality = landmarkQuality }
    }
}

extension StoredTemplate {
    public init(_ message: Registry_V1_StoredTemplate) {
        self.init(
            id: message.id, identifier: message.identifier, algorithm: message.algorithm,
            registeredAt: message.registeredAtMicros, source: TemplateSource(message.source) ?? .registered,
            quality: message.hasQuality ? message.quality : nil,
            template: message.hasTemplate ? FaceTemplate(message.template) : nil,
            landmarkQuality: message.hasLandmarkQuality ? message.landmarkQuality : nil)
    }
}

// MARK: Results

extension Registry_V1_RegistrationFinding {
    public init(_ finding: RegistrationFinding) {
        self.init()
        self.algorithm = finding.algorithm
        switch finding.kind {
        case .similarFace(let identifier, let score):
            self.similarFace = .with {
                $0.identifier = identifier
                $0.score = score
            }
        case .faceMismatch(let best):
            self.faceMismatch = .with { $0.bestScore = best }
        }
    }
}

extension RegistrationFinding {
    public init?(_ message: Registry_V1_RegistrationFinding) {
        switch message.kind {
        case .similarFace(let similar):
            self.init(algorithm: message.algorithm, kind: .similarFace(identifier: similar.identifier, score: similar.score))
        case .faceMismatch(let mismatch):
            self.init(algorithm: message.algorithm, kind: .faceMismatch(bestScore: mismatch.bestScore))
        case nil:
            return nil
        }
    }
}

extension Registry_V1_RegisterResult {
    public init(_ registration: Registration) {
        self.init()
        self.stored = registration.stored.map(Registry_V1_StoredTemplate.init)
        self.findings = registration.findings.map(Registry_V1_RegistrationFinding.init)
        if let quality = registration.quality { self.quality = Registry_V1_QualityAssessment(quality) }
        if let liveness = registration.liveness { self.liveness = Registry_V1_LivenessVerdict(liveness) }
    }
}

extension Registration {
    public init(_ message: Registry_V1_RegisterResult) {
        self.init(
            stored: message.stored.map(StoredTemplate.init), findings: message.findings.compactMap(RegistrationFinding.init),
            quality: message.hasQuality ? QualityAssessment(message.quality) : nil,
            liveness: message.hasLiveness ? LivenessVerdict(message.liveness) : nil)
    }
}

extension Registry_V1_AutoEnrolmentOutcome {
    public init(_ outcome: AutoEnrolmentOutcome) {
        self.init()
        self.algorithm = outcome.algorithm
        switch outcome.result {
        case .enrolled(let id):
            self.status = .enrolled
            self.templateID = id
        case .alreadyRegistered:
            self.status = .alreadyRegistered
        case .noTemplate:
            self.status = .noTemplate
        case .scoreBelowThreshold(let score, let threshold):
            self.status = .scoreBelowThreshold
            self.score = score
            self.threshold = threshold
        case .refused(let finding):
            self.status = .refused
            self.finding = Registry_V1_RegistrationFinding(finding)
        case .failed(let message):
            self.status = .failed
            self.message = message
        case .qualityTooLow(let score, let minimum):
            self.status = .qualityTooLow
            if let score { self.score = score } else { self.score = .nan }
            self.threshold = minimum
        case .livenessRequired:
            self.status = .livenessRequired
        }
    }
}

extension AutoEnrolmentOutcome {
    public init(_ message: Registry_V1_AutoEnrolmentOutcome) {
        let result: Result
        switch message.status {
        case .enrolled: result = .enrolled(templateId: message.templateID)
        case .alreadyRegistered: result = .alreadyRegistered
        case .noTemplate: result = .noTemplate
        case .scoreBelowThreshold: result = .scoreBelowThreshold(score: message.score, threshold: message.threshold)
        case .refused:
            if let finding = RegistrationFinding(message.finding) {
                result = .refused(finding)
            } else {
                result = .failed(message: "refused without a finding")
            }
        case .qualityTooLow: result = .qualityTooLow(score: message.score.isNaN ? nil : message.score, minimum: message.threshold)
        case .livenessRequired: result = .livenessRequired
        case .failed, .unspecified, .UNRECOGNIZED: result = .failed(message: message.message)
        }
        self.init(algorithm: message.algorithm, result: result)
    }
}

extension Registry_V1_Match {
    public init(_ match: IdentifyMatch) {
        self.init()
        self.identifier = match.identifier
        self.score = match.score
        self.templateID = match.templateId
    }
}

extension IdentifyMatch {
    public init(_ message: Registry_V1_Match) {
        self.init(identifier: message.identifier, score: message.score, templateId: message.templateID)
    }
}

extension Registry_V1_IdentifyResult {
    public init(_ identification: Identification) {
        self.init()
        self.algorithm = identification.algorithm ?? 0
        self.matches = identification.matches.map(Registry_V1_Match.init)
        self.autoEnrolment = identification.autoEnrolment.map(Registry_V1_AutoEnrolmentOutcome.init)
        if let liveness = identification.liveness { self.liveness = Registry_V1_LivenessVerdict(liveness) }
    }
}

extension Identification {
    public init(_ message: Registry_V1_IdentifyResult) {
        self.init(
            algorithm: message.algorithm == 0 ? nil : message.algorithm, matches: message.matches.map(IdentifyMatch.init),
            autoEnrolment: message.autoEnrolment.map(AutoEnrolmentOutcome.init),
            liveness: message.hasLiveness ? LivenessVerdict(message.liveness) : nil)
    }
}

extension Registry_V1_AuthenticateResult {
    public init(_ authentication: Authentication) {
        self.init()
        self.authenticated = authentication.authenticated
        self.score = authentication.score
        self.templateID = authentication.templateId
        self.algorithm = authentication.algorithm
        self.autoEnrolment = authentication.autoEnrolment.map(Registry_V1_AutoEnrolmentOutcome.init)
        if let liveness = authentication.liveness { self.liveness = Registry_V1_LivenessVerdict(liveness) }
    }
}

extension Authentication {
    public init(_ message: Registry_V1_AuthenticateResult) {
        self.init(
            authenticated: message.authenticated, score: message.score, templateId: message.templateID,
            algorithm: message.algorithm, autoEnrolment: message.autoEnrolment.map(AutoEnrolmentOutcome.init),
            liveness: message.hasLiveness ? LivenessVerdict(message.liveness) : nil)
    }
}

// MARK: Administration

extension Registry_V1_Thresholds {
    public init(_ thresholds: Thresholds) {
        self.init()
        self.authentication = thresholds.authentication
        self.identification = thresholds.identification
        self.autoEnrolment = thresholds.autoEnrolment
    }
}

extension Thresholds {
    public init(_ message: Registry_V1_Thresholds) {
        self.init(authentication: message.authentication, identification: message.identification, autoEnrolment: message.autoEnrolment)
    }
}

extension Registry_V1_Algorithm {
    public init(_ algorithm: Algorithm) {
        self.init()
        self.version = algorithm.version
        self.name = algorithm.name
        switch algorithm.kind {
        case .vector(let dimension):
            self.kind = .vector
            self.dimension = UInt32(dimension)
            self.scoreFunction = algorithm.scoreFunction.rawValue
        case .landmarks(let matcher):
            self.kind = .landmarks
            self.scoreFunction = matcher.rawValue
        }
        self.defaultThreshold = algorithm.defaultThreshold
    }
}

extension Algorithm {
    public init(_ message: Registry_V1_Algorithm) {
        self.init(
            version: message.version, name: message.name,
            kind: message.kind == .landmarks
                ? .landmarks(LandmarkMatcher(rawValue: message.scoreFunction) ?? .coma) : .vector(dimension: Int(message.dimension)),
            scoreFunction: ScoreFunction(rawValue: message.scoreFunction) ?? .dot, defaultThreshold: message.defaultThreshold)
    }
}

extension Registry_V1_Gallery {
    public init(_ gallery: GalleryInfo) {
        self.init()
        self.name = gallery.name
        self.identifierCount = UInt64(gallery.identifierCount)
        self.registries = gallery.registries.map { registry in
            .with {
                $0.algorithm = Registry_V1_Algorithm(registry.algorithm)
                $0.thresholds = Registry_V1_Thresholds(registry.thresholds)
                $0.templateCount = UInt64(registry.templateCount)
                $0.identifierCount = UInt64(registry.identifierCount)
                if let minimum = registry.minimumQuality { $0.minimumQuality = minimum }
                if let minimum = registry.minimumAutoEnrolmentQuality { $0.minimumAutoEnrolmentQuality = minimum }
            }
        }
        self.liveness = Registry_V1_LivenessPolicy(gallery.liveness)
        self.livenessK = gallery.livenessK
    }
}

extension GalleryInfo {
    public init(_ message: Registry_V1_Gallery) {
        self.init(
            name: message.name,
            registries: message.registries.map {
                RegistryInfo(
                    algorithm: Algorithm($0.algorithm), thresholds: Thresholds($0.thresholds),
                    templateCount: Int($0.templateCount), identifierCount: Int($0.identifierCount),
                    minimumQuality: $0.hasMinimumQuality ? $0.minimumQuality : nil,
                    minimumAutoEnrolmentQuality: $0.hasMinimumAutoEnrolmentQuality ? $0.minimumAutoEnrolmentQuality : nil)
            },
            identifierCount: Int(message.identifierCount), liveness: LivenessPolicy(message.liveness),
            livenessK: message.livenessK)
    }
}

extension Registry_V1_MigrationStatusResult.Entry {
    public init(_ status: MigrationStatus) {
        self.init()
        self.algorithm = status.algorithm
        self.identifiersHeld = UInt64(status.identifiersHeld)
        self.galleryIdentifiers = UInt64(status.galleryIdentifiers)
    }
}

extension MigrationStatus {
    public init(_ message: Registry_V1_MigrationStatusResult.Entry) {
        self.init(
            algorithm: message.algorithm, identifiersHeld: Int(message.identifiersHeld),
            galleryIdentifiers: Int(message.galleryIdentifiers))
    }
}

extension GalleryConfiguration {
    /// A gallery as `define_gallery` sends it; absent fields take the model's defaults.
    public init(_ message: Registry_V1_DefineGalleryRequest) {
        self.init(
            name: message.gallery,
            registries: message.registries.map {
                RegistryConfiguration(
                    algorithm: $0.algorithm, thresholds: $0.hasThresholds ? Thresholds($0.thresholds) : nil,
                    minimumQuality: $0.hasMinimumQuality ? $0.minimumQuality : nil,
                    minimumAutoEnrolmentQuality: $0.hasMinimumAutoEnrolmentQuality ? $0.minimumAutoEnrolmentQuality : nil)
            },
            liveness: LivenessPolicy(message.liveness), livenessK: message.hasLivenessK ? message.livenessK : Self.defaultLivenessK)
    }
}

extension Registry_V1_DefineGalleryRequest {
    /// A gallery's definition as `define_gallery` carries it (what a configuration leaves to the
    /// defaults stays absent).
    public init(_ configuration: GalleryConfiguration) {
        self.init()
        self.gallery = configuration.name
        self.registries = configuration.registries.map { registry in
            .with {
                $0.algorithm = registry.algorithm
                if let thresholds = registry.thresholds { $0.thresholds = Registry_V1_Thresholds(thresholds) }
                if let minimum = registry.minimumQuality { $0.minimumQuality = minimum }
                if let minimum = registry.minimumAutoEnrolmentQuality { $0.minimumAutoEnrolmentQuality = minimum }
            }
        }
        self.liveness = Registry_V1_LivenessPolicy(configuration.liveness)
        self.livenessK = configuration.livenessK
    }
}

extension Registry_V1_LivenessPolicy {
    public init(_ policy: LivenessPolicy) {
        self.init()
        self.authenticate = policy.authenticate
        self.identify = policy.identify
        self.register = policy.register
        self.strict = policy.strict
    }
}

extension LivenessPolicy {
    public init(_ message: Registry_V1_LivenessPolicy) {
        self.init(authenticate: message.authenticate, identify: message.identify, register: message.register, strict: message.strict)
    }
}

// MARK: Errors

extension Registry_V1_ErrorCode {
    public init(_ code: RegistryError.Code) {
        switch code {
        case .similarFaceRegistered: self = .similarFaceRegistered
        case .faceMismatch: self = .faceMismatch
        case .identifierNotRegistered: self = .identifierNotRegistered
        case .incompatibleTemplates: self = .incompatibleTemplates
        case .invalidTemplate: self = .invalidTemplate
        case .unknownAlgorithm: self = .unknownAlgorithm
        case .unknownGallery: self = .unknownGallery
        case .qualityTooLow: self = .qualityTooLow
        case .livenessFailed: self = .livenessFailed
        case .permissionDenied: self = .permissionDenied
        case .malformedRequest: self = .malformedRequest
        case .frameTooLarge: self = .frameTooLarge
        case .unsupportedVersion: self = .unsupportedVersion
        case .storageFull: self = .storageFull
        case .shuttingDown: self = .shuttingDown
        case .internal: self = .internal
        case .tooManyConnections: self = .tooManyConnections
        case .fleetUnavailable: self = .fleetUnavailable
        }
    }
}

extension RegistryError.Code {
    public init(_ code: Registry_V1_ErrorCode) {
        switch code {
        case .similarFaceRegistered: self = .similarFaceRegistered
        case .faceMismatch: self = .faceMismatch
        case .identifierNotRegistered: self = .identifierNotRegistered
        case .incompatibleTemplates: self = .incompatibleTemplates
        case .invalidTemplate: self = .invalidTemplate
        case .unknownAlgorithm: self = .unknownAlgorithm
        case .unknownGallery: self = .unknownGallery
        case .qualityTooLow: self = .qualityTooLow
        case .livenessFailed: self = .livenessFailed
        case .permissionDenied: self = .permissionDenied
        case .malformedRequest: self = .malformedRequest
        case .frameTooLarge: self = .frameTooLarge
        case .unsupportedVersion: self = .unsupportedVersion
        case .storageFull: self = .storageFull
        case .shuttingDown: self = .shuttingDown
        case .tooManyConnections: self = .tooManyConnections
        case .fleetUnavailable: self = .fleetUnavailable
        case .internal, .unspecified, .UNRECOGNIZED: self = .internal
        }
    }
}

extension Registry_V1_TemplateProblem {
    public init(algorithm: UInt32, problem: TemplateProblem) {
        self.init()
        self.algorithm = algorithm
        switch problem {
        case .wrongDimension(let expected, let actual):
            self.kind = .wrongDimension
            self.expected = Int64(expected)
            self.actual = Int64(actual)
        case .nonFiniteValue(let index):
            self.kind = .nonFiniteValue
            self.index = Int64(index)
        case .zeroVector:
            self.kind = .zeroVector
        case .notNormalised(let norm):
            self.kind = .notNormalised
            self.norm = norm
        case .tooFewLandmarks(let count, let minimum):
            self.kind = .tooFewLandmarks
            self.actual = Int64(count)
            self.expected = Int64(minimum)
        case .unknownLandmark(let name):
            self.kind = .unknownLandmark
            self.landmark = String(name.prefix(64))
        case .duplicateLandmark(let name):
            self.kind = .duplicateLandmark
            self.landmark = String(name.prefix(64))
        case .wrongKind:
            self.kind = .wrongKind
        }
    }

    /// The engine's problem, when the kind is known.
    public var problem: TemplateProblem? {
        switch self.kind {
        case .wrongDimension: .wrongDimension(expected: Int(self.expected), actual: Int(self.actual))
        case .nonFiniteValue: .nonFiniteValue(index: Int(self.index))
        case .zeroVector: .zeroVector
        case .notNormalised: .notNormalised(norm: self.norm)
        case .tooFewLandmarks: .tooFewLandmarks(count: Int(self.actual), minimum: Int(self.expected))
        case .unknownLandmark: .unknownLandmark(name: self.landmark)
        case .duplicateLandmark: .duplicateLandmark(name: self.landmark)
        case .wrongKind: .wrongKind(expected: "another kind of template")
        case .unspecified, .UNRECOGNIZED: nil
        }
    }
}

extension Registry_V1_Error {
    public init(_ error: RegistryError) {
        self.init()
        self.code = Registry_V1_ErrorCode(error.code)
        self.message = error.message
        switch error.details {
        case .none:
            break
        case .registration(let decisive, let all):
            self.decisive = Registry_V1_RegistrationFinding(decisive)
            self.findings = all.map(Registry_V1_RegistrationFinding.init)
        case .invalidTemplate(let algorithm, let problem):
            self.templateProblem = Registry_V1_TemplateProblem(algorithm: algorithm, problem: problem)
        case .qualityTooLow(let algorithm, let minimum, let assessment, let missing):
            self.qualityTooLow = .with {
                $0.algorithm = algorithm
                $0.minimum = minimum
                if let assessment { $0.assessment = Registry_V1_QualityAssessment(assessment) }
                $0.missing = missing
            }
        case .livenessFailed(let verdict):
            self.liveness = Registry_V1_LivenessVerdict(verdict)
        }
    }
}

extension RegistryError {
    public init(_ message: Registry_V1_Error) {
        var details = Details.none
        if message.hasDecisive, let decisive = RegistrationFinding(message.decisive) {
            details = .registration(decisive: decisive, all: message.findings.compactMap(RegistrationFinding.init))
        } else if message.hasTemplateProblem, let problem = message.templateProblem.problem {
            details = .invalidTemplate(algorithm: message.templateProblem.algorithm, problem: problem)
        } else if message.hasQualityTooLow {
            let quality = message.qualityTooLow
            details = .qualityTooLow(
                algorithm: quality.algorithm, minimum: quality.minimum,
                assessment: quality.hasAssessment ? QualityAssessment(quality.assessment) : nil, missing: quality.missing)
        } else if message.hasLiveness {
            details = .livenessFailed(LivenessVerdict(message.liveness))
        }
        self.init(Code(message.code), message.message, details: details)
    }
}

extension ImportItem {
    /// An import item as sent (an unknown source counts as absent: `imported`).
    public init(_ message: Registry_V1_ImportRequest.Item) {
        self.init(
            identifier: message.identifier, template: FaceTemplate(message.template),
            registeredAt: message.hasRegisteredAtMicros ? message.registeredAtMicros : nil,
            source: message.hasSource ? TemplateSource(message.source) : nil, quality: message.hasQuality ? message.quality : nil)
    }
}

extension Registry_V1_ImportRequest.Item {
    public init(_ item: ImportItem) {
        self.init()
        self.identifier = item.identifier
        self.template = Registry_V1_Template(item.template)
        if let registeredAt = item.registeredAt { self.registeredAtMicros = registeredAt }
        if let source = item.source { self.source = Registry_V1_TemplateSource(source) }
        if let quality = item.quality { self.quality = quality }
    }
}
