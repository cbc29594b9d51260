import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Identify

    /// Identifies a face (README, engine behaviour): the identifiers whose best template scores ≥ the identification
    /// threshold, one per identifier, best first, ties in registration order.
    ///
    /// - Parameters:
    ///   - safe: search only the first registry (priority order) that holds every identifier of the
    ///     gallery and for which the face has a template; `INCOMPATIBLE_TEMPLATES` if none does. When
    ///     false, registries are tried in priority order and the first non-empty result is returned.
    ///   - autoEnrol: when the top score reaches the deciding registry's auto-enrolment threshold,
    ///     register the face's other templates under the top identifier in the registries lacking it.
    ///     A failed auto-enrolment is reported, never turned into an error.
    ///   - limit: at most this many results (nil: all).
    public func identify(
        gallery name: String = GalleryConfiguration.defaultName,
        face: Face,
        safe: Bool = true,
        autoEnrol: Bool = true,
        limit: Int? = nil
    ) async throws -> Identification {
        try await self.awaiting { self.identify(gallery: name, face: face, safe: safe, autoEnrol: autoEnrol, limit: limit, completion: $0) }
    }

    /// ``identify(gallery:face:safe:autoEnrol:limit:)`` without a task: the work runs on the engine's
    /// read pool (the scan takes milliseconds of CPU and, with rows read from the store, faults
    /// pages: never on the caller's thread, an event loop or a cooperative one), and `completion`
    /// runs once, there or on the writer thread after an auto-enrolment's commit.
    public func identify<Done: Completion<Identification>>(
        gallery name: String = GalleryConfiguration.defaultName,
        face: Face,
        safe: Bool = true,
        autoEnrol: Bool = true,
        limit: Int? = nil,
        completion: Done
    ) {
        let accepted = self.reads.submit {
            let decided: (identification: Identification, plan: AutoEnrolmentPlan?)
            do {
                decided = try self.decideIdentification(gallery: name, face: face, safe: safe, autoEnrol: autoEnrol, limit: limit)
            } catch {
                return completion.complete(.failure(error))
            }
            guard let plan = decided.plan else { return completion.complete(.success(decided.identification)) }
            self.autoEnrol(plan) { outcomes in
                var identification = decided.identification
                identification.autoEnrolment = outcomes
                completion.complete(.success(identification))
            }
        }
        if !accepted { completion.complete(.failure(RegistryError(.shuttingDown, "the registry is shutting down"))) }
    }

    /// Identify's work under one hold of the index read lock (one reading of the gallery): the face
    /// prepared, the liveness gate, the route's scans, and the auto-enrolment planned from the top match.
    private func decideIdentification(
        gallery name: String, face: Face, safe: Bool, autoEnrol: Bool, limit: Int?
    ) throws(RegistryError) -> (identification: Identification, plan: AutoEnrolmentPlan?) {
        if let limit, limit < 1 { throw RegistryError.malformedRequest("limit must be at least 1") }
        try Names.validateGallery(name)
        return try self.indexLock.withReadLock { () throws(RegistryError) -> (Identification, AutoEnrolmentPlan?) in
            let gallery = try self.gallery(named: name)
            let templates = try self.prepare(face, for: gallery)
            // The person is not known yet, so the fixed thresholds apply.
            let liveness = try Self.livenessGate(face, required: gallery.liveness.identify, strict: gallery.liveness.strict, profile: nil)
            let candidates = gallery.registries.filter { templates.has($0.algorithm.version) }
            let route: [Int]
            switch IdentifyRoute(holdsEveryIdentifier: candidates.map { $0.identifierCount == gallery.identifierCount }, safe: safe) {
            case .incompatible: throw IdentifyRoute.incompatibleError(gallery: name)
            case .scan(let order): route = order
            }
            var scanned: [(candidate: Int, matched: Bool)] = []
            var decided: (registry: RegistryIndex, matches: [IdentifyMatch])?
            for candidate in route {
                let registry = candidates[candidate]
                let matches = try self.identify(registry, in: gallery, query: templates[registry.algorithm.version]!, limit: limit)
                scanned.append((candidate, !matches.isEmpty))
                // The decider is the registry just scanned when it matched, else (all scanned, none
                // matched) the route's first, with no match.
                guard let decider = IdentifyRoute.decider(scanned: scanned, of: route) else { continue }
                decided = (candidates[decider], decider == candidate ? matches : [])
                break
            }
            var identification = Identification(algorithm: nil, matches: [], autoEnrolment: [], liveness: liveness)
            guard let (registry, matches) = decided else { return (identification, nil) }
            identification.algorithm = registry.algorithm.version
            identification.matches = matches
            let plan = identification.matches.first.flatMap { top in
                autoEnrol
                    ? AutoEnrolmentPlan(
                        gallery, decidedBy: registry, identifier: top.identifier, face: face, templates: templates, score: top.score,
                        quality: face.capture.flatMap(CaptureQuality.assess)?.score, live: liveness?.live)
                    : nil
            }
            return (identification, plan)
        }
    }

    /// ``Matching/identify(_:in:query:threshold:limit:)`` at the registry's threshold, a fault as the request's error.
    private func identify(
        _ registry: RegistryIndex, in gallery: GalleryIndex, query: PreparedTemplate, limit: Int?
    ) throws(RegistryError) -> [IdentifyMatch] {
        do throws(RowFault) {
            return try Matching.identify(registry, in: gallery, query: query, threshold: registry.thresholds.identification, limit: limit)
        } catch {
            throw self.refusal(error)
        }
    }
}
