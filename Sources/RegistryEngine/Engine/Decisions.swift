import RegistryModel

// The decisions of register, identify and authenticate, as values computed from what the index and
// the scans found: no lock, thread, store or completion in sight, so each is tested alone
// (DecisionTests) and a second commit path (the fleet's) decides the same way by calling them.

/// Register's verdict (README, engine behaviour): over the findings of every registry the face has a
/// template for, (1) a similar face anywhere refuses with the first in priority order, else (2) a
/// mismatch refuses with the first; with `force` the face is stored anyway, marked forced.
enum RegistrationVerdict: Equatable, Sendable {
    case store(TemplateSource)
    case refuse(decisive: RegistrationFinding)

    init(findings: [RegistrationFinding], force: Bool) {
        if !force, let decisive = Self.decisive(findings) {
            self = .refuse(decisive: decisive)
        } else {
            self = .store(findings.isEmpty ? .registered : .forced)
        }
    }

    /// The finding that decides a refusal: the first similar face in priority order, else the first mismatch.
    static func decisive(_ findings: [RegistrationFinding]) -> RegistrationFinding? {
        findings.first { if case .similarFace = $0.kind { true } else { false } } ?? findings.first
    }

    /// The error a refusal answers, naming the decisive finding and carrying all of them.
    static func refusal(
        _ decisive: RegistrationFinding, all: [RegistrationFinding], identifier: String, catalog: AlgorithmCatalog
    ) -> RegistryError {
        let algorithm = (try? catalog.algorithm(version: decisive.algorithm))?.description ?? "\(decisive.algorithm)"
        switch decisive.kind {
        case .similarFace(let other, let score):
            return RegistryError(
                .similarFaceRegistered,
                "a similar face is already registered as '\(other)' (score \(score), \(algorithm))",
                details: .registration(decisive: decisive, all: all))
        case .faceMismatch(let best):
            return RegistryError(
                .faceMismatch,
                "the face does not match the templates registered as '\(identifier)' (best score \(best), \(algorithm))",
                details: .registration(decisive: decisive, all: all))
        }
    }
}

/// Which registries identify scans, in what order (README, engine behaviour), from the gallery's
/// registries the face has a template for, in priority order.
enum IdentifyRoute: Equatable, Sendable {
    /// Scan these candidates (positions) in order: the first with a match decides; when none has
    /// one, the first decides with no match. Safe: exactly one.
    case scan([Int])
    /// Safe, and no candidate holds every identifier of the gallery.
    case incompatible

    /// - Parameters:
    ///   - holdsEveryIdentifier: per candidate, whether it holds every identifier of the gallery.
    ///   - safe: search only the first candidate that holds every identifier.
    init(holdsEveryIdentifier: [Bool], safe: Bool) {
        if safe {
            self = holdsEveryIdentifier.firstIndex(of: true).map { .scan([$0]) } ?? .incompatible
        } else {
            self = .scan(Array(holdsEveryIdentifier.indices))
        }
    }

    /// The candidate that decides, given the matches of those scanned so far (in route order): the
    /// first with a match, or, once all were scanned without one, the first. Nil: scan the next.
    static func decider(scanned: [(candidate: Int, matched: Bool)], of route: [Int]) -> Int? {
        if let hit = scanned.first(where: \.matched) { return hit.candidate }
        return scanned.count == route.count ? route.first : nil
    }

    static func incompatibleError(gallery: String) -> RegistryError {
        RegistryError(
            .incompatibleTemplates,
            "no registry of gallery '\(gallery)' that the face has a template for holds every identifier; identify with safe set to false (registryctl identify --unsafe) or complete the migration"
        )
    }
}

/// Authenticate's route (README, engine behaviour): the first registry in priority order that holds
/// the identifier and that the face has a template for decides alone, by its best score against the
/// authentication threshold; adding an algorithm never raises the false-accept rate. (A person no
/// registry holds was refused `IDENTIFIER_NOT_REGISTERED` before; with no decider left the answer is
/// `INCOMPATIBLE_TEMPLATES`.) Asked through closures rather than arrays: authentications are most of
/// the traffic, and this allocates nothing.
enum AuthenticationRoute {
    /// The first registry at or after `start` (priority order) that may decide, or nil. A later one
    /// than the first decides only when every row of those before it was removed after the caller's
    /// view of the index was taken (the answer is then as of after the removal).
    /// - Parameters:
    ///   - holds: whether registry `position` holds the identifier.
    ///   - hasTemplate: whether the face carries a template for registry `position`.
    static func decider(from start: Int, count: Int, holds: (Int) -> Bool, hasTemplate: (Int) -> Bool) -> Int? {
        (start..<max(start, count)).first { holds($0) && hasTemplate($0) }
    }

    /// Whether a best score authenticates.
    static func authenticates(score: Float, thresholds: Thresholds) -> Bool { score >= thresholds.authentication }
}

/// What a deletion erases, decided from what the store holds of the person: the templates named,
/// and the person's liveness profile once none of their templates remains in the gallery (a profile
/// is never kept for someone erased; a person with templates left keeps theirs).
struct DeletionPlan: Equatable, Sendable {
    /// The templates to delete, in the order given.
    let templates: [UInt64]
    /// Whether the person's liveness profile goes too.
    let erasesProfile: Bool

    /// - Parameters:
    ///   - deleting: the templates to delete (those stored: the caller found them).
    ///   - held: every template the person holds in the gallery before the deletion.
    init(deleting: [UInt64], of held: [UInt64]) {
        self.templates = deleting
        self.erasesProfile = held.allSatisfy { deleting.contains($0) }
    }
}
