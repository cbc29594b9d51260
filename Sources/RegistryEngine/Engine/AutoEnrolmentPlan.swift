import RegistryModel

/// One request's auto-enrolment, planned under the same hold of the index lock as the decision that
/// leads to it (identify's top match, authenticate's match). The gallery's rules are read once, here:
/// which registries besides the decider, the decider's auto-enrolment threshold, whether a live face
/// is required, each registry's minimum capture quality. Every outcome, decided now from the committed
/// index or later in the write, comes from them in one order, so that a policy changed meanwhile
/// cannot give one request two policies' answers.
struct AutoEnrolmentPlan {
    /// A registry that may enrol the face, with its rule as read.
    struct Rule {
        var id: UInt32
        var algorithm: UInt32
        var minimumQuality: Float?
    }

    let galleryName: String
    let galleryId: UInt32
    let identifier: String
    /// The face's templates as the client sent them (no capture, no depth frames): what a fleet
    /// node appends to the log for the other nodes to prepare as it did.
    let face: Face
    /// The registry that decided, by algorithm.
    let deciderAlgorithm: UInt32
    let templates: PreparedFace
    let score: Float
    let quality: Float?
    let live: Bool?
    let threshold: Float
    let requiresLiveFace: Bool
    /// The gallery's registries other than the decider, in priority order.
    let registries: [Rule]
    /// Per registry, the outcome the committed index decides without a write; nil where register's
    /// checks (and a write) decide.
    private var planned: [AutoEnrolmentOutcome.Result?] = []

    /// Plans from `gallery` as it is; the caller holds the index lock.
    init(
        _ gallery: GalleryIndex, decidedBy decider: RegistryIndex, identifier: String, face: Face, templates: PreparedFace, score: Float,
        quality: Float?, live: Bool?
    ) {
        self.galleryName = gallery.name
        self.galleryId = gallery.id
        self.identifier = identifier
        self.face = Face(templates: face.templates)
        self.deciderAlgorithm = decider.algorithm.version
        self.templates = templates
        self.score = score
        self.quality = quality
        self.live = live
        self.threshold = decider.thresholds.autoEnrolment
        self.requiresLiveFace = gallery.liveness.register
        let others = gallery.registries.filter { $0.id != decider.id }
        self.registries = others.map { Rule(id: $0.id, algorithm: $0.algorithm.version, minimumQuality: $0.minimumAutoEnrolmentQuality) }
        let ordinal = gallery.ordinal(of: identifier)
        for (rule, registry) in zip(self.registries, others) {
            self.planned.append(self.outcomeWithoutWrite(rule, holds: ordinal.map { registry.holds($0) } ?? false))
        }
    }

    /// The outcome that needs no comparison with the registry's templates, or nil when register's
    /// checks decide. The one order of the rules.
    func outcomeWithoutWrite(_ rule: Rule, holds: Bool) -> AutoEnrolmentOutcome.Result? {
        if holds { return .alreadyRegistered }
        if !self.templates.has(rule.algorithm) { return .noTemplate }
        // A gallery that requires a live face to register requires one to auto-enrol too.
        if self.requiresLiveFace && self.live != true { return .livenessRequired }
        if self.score < self.threshold { return .scoreBelowThreshold(score: self.score, threshold: self.threshold) }
        if let minimum = rule.minimumQuality, !(self.quality.map { $0 >= minimum } ?? false) {
            return .qualityTooLow(score: self.quality, minimum: minimum)
        }
        return nil
    }

    /// Every outcome, when none needs a write (most identifications and authentications).
    var outcomesWithoutWrite: [AutoEnrolmentOutcome]? {
        var outcomes: [AutoEnrolmentOutcome] = []
        for (rule, outcome) in zip(self.registries, self.planned) {
            guard let outcome else { return nil }
            outcomes.append(AutoEnrolmentOutcome(algorithm: rule.algorithm, result: outcome))
        }
        return outcomes
    }

    /// The auto-enrolment as a fleet's log carries it.
    var entry: AutoEnrolmentEntry {
        AutoEnrolmentEntry(
            gallery: self.galleryName, identifier: self.identifier, face: self.face, deciderAlgorithm: self.deciderAlgorithm, score: self.score,
            quality: self.quality, live: self.live)
    }

    /// The planned outcomes, with a failure saying `message` where the write was to decide.
    func outcomes(failing message: String) -> [AutoEnrolmentOutcome] {
        zip(self.registries, self.planned).map { AutoEnrolmentOutcome(algorithm: $0.algorithm, result: $1 ?? .failed(message: message)) }
    }
}
