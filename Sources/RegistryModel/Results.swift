/// How a stored template came to be.
public enum TemplateSource: UInt8, Sendable, Hashable {
    /// Stored by a register call whose checks passed.
    case registered = 1
    /// Stored by identify or authenticate while migrating the identifier to another algorithm.
    case autoEnrolled = 2
    /// Stored by an import, which does not run the register checks.
    case imported = 3
    /// Stored by a register call with `force` despite a similar-face or mismatch finding.
    case forced = 4
}

/// A stored template's metadata (and, on request, its data).
public struct StoredTemplate: Sendable, Hashable {
    /// The template id: unique in the store, never reused, increasing in registration order.
    public var id: UInt64
    public var identifier: String
    /// The algorithm's version id.
    public var algorithm: UInt32
    /// Registration time, microseconds since the Unix epoch.
    public var registeredAt: Int64
    public var source: TemplateSource
    /// Quality score in [0, 1] when known (the landmark symmetry/coverage score for landmark templates).
    public var quality: Float?
    /// The landmark symmetry/coverage score (the CoMa landmark matcher), for landmark templates.
    public var landmarkQuality: Float?
    /// The stored template, when asked for (vectors as stored: L2-normalised for cosine algorithms).
    public var template: FaceTemplate?

    public init(
        id: UInt64,
        identifier: String,
        algorithm: UInt32,
        registeredAt: Int64,
        source: TemplateSource,
        quality: Float?,
        template: FaceTemplate?,
        landmarkQuality: Float? = nil
    ) {
        self.id = id
        self.identifier = identifier
        self.algorithm = algorithm
        self.registeredAt = registeredAt
        self.source = source
        self.quality = quality
        self.template = template
        self.landmarkQuality = landmarkQuality
    }
}

/// The reply to a register call.
public struct Registration: Sendable, Hashable {
    /// Each stored template, in the gallery's registry priority order.
    public var stored: [StoredTemplate]
    /// What the checks found; empty unless `force` overrode them.
    public var findings: [RegistrationFinding]
    /// The capture quality of the face, when it carried capture metadata.
    public var quality: QualityAssessment?
    /// The liveness verdict, when the face carried depth frames.
    public var liveness: LivenessVerdict?

    public init(
        stored: [StoredTemplate],
        findings: [RegistrationFinding],
        quality: QualityAssessment? = nil,
        liveness: LivenessVerdict? = nil
    ) {
        self.stored = stored
        self.findings = findings
        self.quality = quality
        self.liveness = liveness
    }
}

/// One identification result: an identifier with its best-scoring template.
public struct IdentifyMatch: Sendable, Hashable {
    public var identifier: String
    public var score: Float
    public var templateId: UInt64

    public init(
        identifier: String,
        score: Float,
        templateId: UInt64
    ) {
        self.identifier = identifier
        self.score = score
        self.templateId = templateId
    }
}

/// What auto-enrolment did in one registry.
public struct AutoEnrolmentOutcome: Sendable, Hashable {
    public enum Result: Sendable, Hashable {
        /// The face's template was stored under the identifier.
        case enrolled(templateId: UInt64)
        /// The registry already holds the identifier.
        case alreadyRegistered
        /// The face carries no template for this registry's algorithm.
        case noTemplate
        /// The deciding score was below the deciding registry's auto-enrolment threshold.
        case scoreBelowThreshold(score: Float, threshold: Float)
        /// The register checks refused it (the similar-face finding).
        case refused(RegistrationFinding)
        /// The registry requires a capture quality the face does not reach (nil: the face carried
        /// no, or incomplete, capture metadata).
        case qualityTooLow(score: Float?, minimum: Float)
        /// The gallery requires a live face to register, and the face was not shown to be live.
        case livenessRequired
        /// Storing it failed; the identification or authentication still stands.
        case failed(message: String)
    }

    /// The registry's algorithm (version id).
    public var algorithm: UInt32
    public var result: Result

    public init(
        algorithm: UInt32,
        result: Result
    ) {
        self.algorithm = algorithm
        self.result = result
    }
}

/// The reply to identify.
public struct Identification: Sendable, Hashable {
    /// The algorithm whose registry produced the results (nil when no registry could be searched).
    public var algorithm: UInt32?
    /// One result per identifier, best score first; ties in registration order.
    public var matches: [IdentifyMatch]
    /// Per other registry, what auto-enrolment did (empty when not requested or nothing matched).
    public var autoEnrolment: [AutoEnrolmentOutcome]
    /// The liveness verdict, when the face carried depth frames.
    public var liveness: LivenessVerdict?

    public init(
        algorithm: UInt32?,
        matches: [IdentifyMatch],
        autoEnrolment: [AutoEnrolmentOutcome],
        liveness: LivenessVerdict? = nil
    ) {
        self.algorithm = algorithm
        self.matches = matches
        self.autoEnrolment = autoEnrolment
        self.liveness = liveness
    }
}

/// The reply to authenticate. A non-match is a result, not an error.
public struct Authentication: Sendable, Hashable {
    public var authenticated: Bool
    /// The best score against the identifier's templates in the deciding registry.
    public var score: Float
    /// The template that scored best.
    public var templateId: UInt64
    /// The algorithm whose registry decided.
    public var algorithm: UInt32
    public var autoEnrolment: [AutoEnrolmentOutcome]
    /// The liveness verdict (with the identifier's profile when it has one), when the face carried depth frames.
    public var liveness: LivenessVerdict?

    public init(
        authenticated: Bool,
        score: Float,
        templateId: UInt64,
        algorithm: UInt32,
        autoEnrolment: [AutoEnrolmentOutcome],
        liveness: LivenessVerdict? = nil
    ) {
        self.authenticated = authenticated
        self.score = score
        self.templateId = templateId
        self.algorithm = algorithm
        self.autoEnrolment = autoEnrolment
        self.liveness = liveness
    }
}

/// A registry's view of a gallery, as stored.
public struct RegistryInfo: Sendable, Hashable {
    public var algorithm: Algorithm
    public var thresholds: Thresholds
    /// Templates stored in it.
    public var templateCount: Int
    /// Distinct identifiers it holds.
    public var identifierCount: Int
    /// The capture quality a face must reach to be registered / auto-enrolled here (nil: no gate).
    public var minimumQuality: Float?
    public var minimumAutoEnrolmentQuality: Float?

    public init(
        algorithm: Algorithm,
        thresholds: Thresholds,
        templateCount: Int,
        identifierCount: Int,
        minimumQuality: Float? = nil,
        minimumAutoEnrolmentQuality: Float? = nil
    ) {
        self.algorithm = algorithm
        self.thresholds = thresholds
        self.templateCount = templateCount
        self.identifierCount = identifierCount
        self.minimumQuality = minimumQuality
        self.minimumAutoEnrolmentQuality = minimumAutoEnrolmentQuality
    }
}

/// A gallery, as stored.
public struct GalleryInfo: Sendable, Hashable {
    public var name: String
    /// Registries in priority order.
    public var registries: [RegistryInfo]
    /// Distinct identifiers in the gallery (in any registry).
    public var identifierCount: Int
    /// Which operations require a live face, and the k of its liveness profiles.
    public var liveness: LivenessPolicy
    public var livenessK: Float

    public init(
        name: String,
        registries: [RegistryInfo],
        identifierCount: Int,
        liveness: LivenessPolicy = .none,
        livenessK: Float = GalleryConfiguration.defaultLivenessK
    ) {
        self.name = name
        self.registries = registries
        self.identifierCount = identifierCount
        self.liveness = liveness
        self.livenessK = livenessK
    }
}

extension GalleryConfiguration {
    /// The definition of a gallery as it is, every threshold written out: what recreates it elsewhere.
    public init(_ gallery: GalleryInfo) {
        self.init(
            name: gallery.name,
            registries: gallery.registries.map { registry in
                RegistryConfiguration(
                    algorithm: registry.algorithm.version, thresholds: registry.thresholds, minimumQuality: registry.minimumQuality,
                    minimumAutoEnrolmentQuality: registry.minimumAutoEnrolmentQuality)
            },
            liveness: gallery.liveness, livenessK: gallery.livenessK)
    }
}

/// Migration progress of one registry: identifiers held out of the gallery's total.
public struct MigrationStatus: Sendable, Hashable {
    public var algorithm: UInt32
    public var identifiersHeld: Int
    public var galleryIdentifiers: Int

    public init(
        algorithm: UInt32,
        identifiersHeld: Int,
        galleryIdentifiers: Int
    ) {
        self.algorithm = algorithm
        self.identifiersHeld = identifiersHeld
        self.galleryIdentifiers = galleryIdentifiers
    }
}

/// One page of a gallery's identifiers, in byte order.
public struct IdentifierPage: Sendable, Hashable {
    public var identifiers: [String]
    /// Pass as `after` to get the next page; nil when this is the last.
    public var next: String?

    public init(
        identifiers: [String],
        next: String?
    ) {
        self.identifiers = identifiers
        self.next = next
    }
}

/// One template to import: stored without the register checks, with source `imported`.
public struct ImportItem: Sendable, Hashable {
    public var identifier: String
    public var template: FaceTemplate
    /// What an export recorded, kept by the import: when the template was first registered (µs since
    /// the Unix epoch), how it came in, its capture quality. Nil: now, `imported`, none.
    public var registeredAt: Int64?
    public var source: TemplateSource?
    public var quality: Float?

    public init(identifier: String, template: FaceTemplate, registeredAt: Int64? = nil, source: TemplateSource? = nil, quality: Float? = nil) {
        self.identifier = identifier
        self.template = template
        self.registeredAt = registeredAt
        self.source = source
        self.quality = quality
    }
}

/// What an import did: the template id of each item, in order (for a skipped item, the id of the
/// identical template already stored), and how many were skipped.
public struct ImportOutcome: Sendable, Hashable {
    public var templateIds: [UInt64]
    public var skipped: Int
    /// Liveness profiles stored, and those skipped as equal to the stored one.
    public var profilesStored: Int
    public var profilesSkipped: Int

    public init(templateIds: [UInt64], skipped: Int, profilesStored: Int = 0, profilesSkipped: Int = 0) {
        self.templateIds = templateIds
        self.skipped = skipped
        self.profilesStored = profilesStored
        self.profilesSkipped = profilesSkipped
    }
}

/// An identifier's liveness profile, as an export carries it.
public struct ProfileEntry: Sendable, Hashable {
    public var identifier: String
    public var profile: LivenessProfile

    public init(identifier: String, profile: LivenessProfile) {
        self.identifier = identifier
        self.profile = profile
    }
}

// The JSON form (registryctl --json; JSONEncoding.swift): counts under `templates` and `identifiers`.
extension RegistryInfo: Encodable {
    private enum CodingKeys: String, CodingKey {
        case algorithm, thresholds, minimumQuality, minimumAutoEnrolmentQuality
        case templateCount = "templates"
        case identifierCount = "identifiers"
    }
}

extension GalleryInfo: Encodable {
    private enum CodingKeys: String, CodingKey {
        case name, registries, liveness, livenessK
        case identifierCount = "identifiers"
    }
}
