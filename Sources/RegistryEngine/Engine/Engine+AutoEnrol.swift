import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Auto-enrolment

    /// Registers the face's templates under the plan's identifier in the gallery's other registries
    /// that lack it, when its score reaches the deciding registry's auto-enrolment threshold, with the
    /// similar-face check of register (the mismatch check cannot apply: the identifier is new there).
    /// Each registry is decided on its own, under the plan's reading of the gallery's rules; failures
    /// are reported, not thrown.
    /// `completion` runs once, at once when nothing is written (the plan decides that from the
    /// committed index), else on the writer thread after the commit.
    func autoEnrol(_ plan: AutoEnrolmentPlan, completion: @escaping @Sendable ([AutoEnrolmentOutcome]) -> Void) {
        // Most authentications and identifications enrol nothing: they wait for no commit.
        if let outcomes = plan.outcomesWithoutWrite { return completion(outcomes) }
        let answer: @Sendable (Result<[AutoEnrolmentOutcome], any Error>) -> Void = { result in
            switch result {
            case .success(let outcomes): completion(outcomes)
            case .failure(let error): completion(plan.outcomes(failing: "\(error)"))
            }
        }
        // A replica writes only what the fleet's log says: the auto-enrolment goes through it, and
        // is carried out here when this node applies it (``applyAutoEnrolment(_:completion:)``).
        if self.isReplica.load(ordering: .acquiring) && FleetApplication.current == nil {
            guard let route = self.autoEnrolmentRoute.withLock({ $0 }) else {
                return completion(plan.outcomes(failing: "this fleet node cannot carry out auto-enrolments yet"))
            }
            return route(plan.entry, answer)
        }
        self.writeAutoEnrolment(plan, completion: answer)
    }

    /// Fleet mode: carries out an auto-enrolment entry of the log, planned again from this replica
    /// (the same on every replica), with the entry's recognition as its trigger.
    public func applyAutoEnrolment(_ entry: AutoEnrolmentEntry, completion: @escaping @Sendable (Result<[AutoEnrolmentOutcome], any Error>) -> Void) {
        let plan: AutoEnrolmentPlan
        do {
            try Names.validateGallery(entry.gallery)
            plan = try self.indexLock.withReadLock { () throws(RegistryError) -> AutoEnrolmentPlan in
                let gallery = try self.gallery(named: entry.gallery)
                guard let decider = gallery.registries.first(where: { $0.algorithm.version == entry.deciderAlgorithm }) else {
                    throw RegistryError.malformedRequest("the gallery has no registry of algorithm \(entry.deciderAlgorithm) any more")
                }
                return AutoEnrolmentPlan(
                    gallery, decidedBy: decider, identifier: entry.identifier, face: entry.face,
                    templates: try self.prepare(entry.face, for: gallery),
                    score: entry.score, quality: entry.quality, live: entry.live)
            }
        } catch {
            return completion(.failure(error))
        }
        if let outcomes = plan.outcomesWithoutWrite { return completion(.success(outcomes)) }
        self.writeAutoEnrolment(plan, completion: completion)
    }

    /// Fleet mode: where a replica's auto-enrolments go (the daemon appends them to the fleet's log;
    /// `completion` gets what applying the entry gave, or the refusal to append it).
    public func routeAutoEnrolments(
        _ route: @escaping @Sendable (AutoEnrolmentEntry, @escaping @Sendable (Result<[AutoEnrolmentOutcome], any Error>) -> Void) -> Void
    ) {
        self.autoEnrolmentRoute.withLock { $0 = route }
    }

    /// The auto-enrolment's write: each registry of the plan decided in the commit.
    private func writeAutoEnrolment(
        _ plan: AutoEnrolmentPlan, completion: @escaping @Sendable (Result<[AutoEnrolmentOutcome], any Error>) -> Void
    ) {
        self.write(
            { txn, context in
                let gallery = try self.currentGallery(plan.galleryName, id: plan.galleryId)
                // Erased since it was recognised: auto-enrolment must not bring it back.
                guard Matching.holdsAnywhere(gallery, identifier: plan.identifier, batch: context.batch) else {
                    return plan.outcomes(failing: "'\(plan.identifier)' was deleted meanwhile")
                }
                var outcomes: [AutoEnrolmentOutcome] = []
                for rule in plan.registries {
                    guard let registry = gallery.registry(id: rule.id) else {
                        outcomes.append(
                            AutoEnrolmentOutcome(algorithm: rule.algorithm, result: .failed(message: "the registry was removed meanwhile")))
                        continue
                    }
                    let holds = Matching.holds(registry, in: gallery, identifier: plan.identifier, batch: context.batch)
                    var outcome = plan.outcomeWithoutWrite(rule, holds: holds)
                    if outcome == nil, let template = plan.templates[rule.algorithm] {
                        let check: Matching.CheckResult
                        do throws(RowFault) {
                            check = try Matching.check(registry, in: gallery, identifier: plan.identifier, query: template, batch: context.batch)
                        } catch {
                            throw self.refusal(error)
                        }
                        if let finding = check.finding(algorithm: rule.algorithm, thresholds: registry.thresholds) {
                            outcome = .refused(finding)
                        } else {
                            let stored = try self.storeTemplate(
                                txn, context, gallery: gallery, registry: registry, identifier: plan.identifier,
                                template: template, source: .autoEnrolled, quality: plan.quality)
                            outcome = .enrolled(templateId: stored.id)
                        }
                    }
                    outcomes.append(AutoEnrolmentOutcome(algorithm: rule.algorithm, result: outcome ?? .noTemplate))
                }
                return outcomes
            },
            completion: completion)
    }

    /// The liveness verdict of a face's depth frames (nil when it has none and none is required);
    /// throws `LIVENESS_FAILED` when the gallery requires liveness and the verdict is not live.
    /// In strict mode a verdict live by the 3-of-5 rule but planar or motionless is not live.
    static func livenessGate(
        _ face: Face, required: Bool, strict: Bool, profile: LivenessProfile?
    ) throws(RegistryError) -> LivenessVerdict? {
        guard required || !face.depthFrames.isEmpty else { return nil }
        var verdict = DepthLiveness.evaluate(face.depthFrames, profile: profile)
        let strictFailures = verdict.failed.filter { $0 == .depthDistribution || $0 == .microMovement }
        if strict && verdict.live && !strictFailures.isEmpty {
            verdict.live = false
            verdict.reason = "strict liveness requires \(strictFailures.map(\.rawValue).joined(separator: " and ")) to pass"
        }
        if required && !verdict.live { throw RegistryError.livenessFailed(verdict) }
        return verdict
    }
}
