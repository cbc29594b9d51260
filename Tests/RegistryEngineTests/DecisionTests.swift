import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Register's verdict, identify's route and authenticate's route as values: the README's rules,
/// checked without a store, a lock or a scan.
@Suite struct DecisionTests {
    static let arcface = Algorithm.arcface.version
    static let dlib = Algorithm.dlib.version

    static func similar(_ algorithm: UInt32, _ other: String, _ score: Float) -> RegistrationFinding {
        RegistrationFinding(algorithm: algorithm, kind: .similarFace(identifier: other, score: score))
    }

    static func mismatch(_ algorithm: UInt32, _ best: Float) -> RegistrationFinding {
        RegistrationFinding(algorithm: algorithm, kind: .faceMismatch(bestScore: best))
    }

    @Test func registrationWithoutFindingsIsStoredAsRegistered() {
        #expect(RegistrationVerdict(findings: [], force: false) == .store(.registered))
        #expect(RegistrationVerdict(findings: [], force: true) == .store(.registered))
    }

    /// (1) before (2): a similar face in a later registry decides over a mismatch in an earlier one;
    /// among findings of one kind the first in priority order decides.
    @Test func aSimilarFaceDecidesOverAnEarlierMismatch() {
        let findings = [Self.mismatch(Self.arcface, 0.2), Self.similar(Self.dlib, "bob", 0.9), Self.similar(Self.arcface, "carol", 0.95)]
        #expect(RegistrationVerdict(findings: findings, force: false) == .refuse(decisive: findings[1]))
        let mismatches = [Self.mismatch(Self.dlib, 0.3), Self.mismatch(Self.arcface, 0.1)]
        #expect(RegistrationVerdict(findings: mismatches, force: false) == .refuse(decisive: mismatches[0]))
    }

    @Test func forceStoresDespiteFindingsMarkedForced() {
        #expect(RegistrationVerdict(findings: [Self.similar(Self.arcface, "bob", 0.99)], force: true) == .store(.forced))
        #expect(RegistrationVerdict(findings: [Self.mismatch(Self.arcface, 0.1)], force: true) == .store(.forced))
    }

    /// The refusal names the decisive finding and carries every finding.
    @Test func theRefusalNamesTheDecisiveFindingAndCarriesAll() throws {
        let catalog = try AlgorithmCatalog(configured: [])
        let findings = [Self.mismatch(Self.arcface, 0.25), Self.similar(Self.dlib, "bob", 0.875)]
        let similar = RegistrationVerdict.refusal(findings[1], all: findings, identifier: "alice", catalog: catalog)
        #expect(similar.code == .similarFaceRegistered && similar.message.contains("'bob'") && similar.message.contains("0.875"))
        guard case .registration(let decisive, let all) = similar.details else {
            Issue.record("no registration details: \(String(describing: similar.details))")
            return
        }
        #expect(decisive == findings[1] && all == findings)
        let mismatch = RegistrationVerdict.refusal(findings[0], all: findings, identifier: "alice", catalog: catalog)
        #expect(mismatch.code == .faceMismatch && mismatch.message.contains("'alice'") && mismatch.message.contains("0.25"))
    }

    /// Safe: only the first registry (priority order) that holds every identifier; none is an error.
    /// Not safe: every candidate, in priority order.
    @Test func identifyRoutes() {
        #expect(IdentifyRoute(holdsEveryIdentifier: [false, true, true], safe: true) == .scan([1]))
        #expect(IdentifyRoute(holdsEveryIdentifier: [false, false], safe: true) == .incompatible)
        #expect(IdentifyRoute(holdsEveryIdentifier: [], safe: true) == .incompatible)
        #expect(IdentifyRoute(holdsEveryIdentifier: [false, true, false], safe: false) == .scan([0, 1, 2]))
        #expect(IdentifyRoute(holdsEveryIdentifier: [], safe: false) == .scan([]))
    }

    /// The first scanned registry with a match decides; with none, the first of the route does, once
    /// all were scanned; until then, the next is scanned.
    @Test func identifyDeciders() {
        let route = [0, 1, 2]
        #expect(IdentifyRoute.decider(scanned: [(0, false)], of: route) == nil)
        #expect(IdentifyRoute.decider(scanned: [(0, false), (1, true)], of: route) == 1)
        #expect(IdentifyRoute.decider(scanned: [(0, true)], of: route) == 0)
        #expect(IdentifyRoute.decider(scanned: [(0, false), (1, false), (2, false)], of: route) == 0)
        #expect(IdentifyRoute.decider(scanned: [(1, false)], of: [1]) == 1)
        #expect(IdentifyRoute.decider(scanned: [], of: []) == nil)
    }

    /// The first registry that holds the person and that the face has a template for decides, even
    /// if a later one would score higher.
    @Test func authenticationDeciders() {
        let holds = [false, true, true, true]
        let has = [true, false, true, true]
        func decider(from start: Int) -> Int? {
            AuthenticationRoute.decider(from: start, count: 4, holds: { holds[$0] }, hasTemplate: { has[$0] })
        }
        #expect(decider(from: 0) == 2)
        #expect(decider(from: 3) == 3)
        #expect(decider(from: 4) == nil)
        #expect(decider(from: 9) == nil)
        #expect(AuthenticationRoute.decider(from: 0, count: 2, holds: { _ in true }, hasTemplate: { _ in false }) == nil)
    }

    /// The authentication threshold is reached at equality.
    @Test func authenticationThresholdIsInclusive() {
        let thresholds = Thresholds(authentication: 0.5, identification: 0.6, autoEnrolment: 0.7)
        #expect(AuthenticationRoute.authenticates(score: 0.5, thresholds: thresholds))
        #expect(!AuthenticationRoute.authenticates(score: Float(0.5).nextDown, thresholds: thresholds))
        #expect(!AuthenticationRoute.authenticates(score: .nan, thresholds: thresholds))
    }

    /// A person's liveness profile goes with their last template, and only then.
    @Test func deletionErasesTheProfileWithTheLastTemplate() {
        #expect(DeletionPlan(deleting: [7], of: [7]).erasesProfile)
        #expect(!DeletionPlan(deleting: [7], of: [3, 7]).erasesProfile)
        #expect(DeletionPlan(deleting: [3, 7], of: [7, 3]).erasesProfile)
        #expect(DeletionPlan(deleting: [], of: []).erasesProfile)
        #expect(DeletionPlan(deleting: [3, 7], of: [7, 3]).templates == [3, 7])
    }
}
