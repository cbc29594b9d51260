import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Authenticate

    /// Authenticates a face as `identifier` (README, engine behaviour): `IDENTIFIER_NOT_REGISTERED` when no registry
    /// of the gallery holds it (checked before any comparison); otherwise the first registry in
    /// priority order that holds the identifier and for which the face has a template decides, by
    /// comparing with that identifier's templates only. One registry decides, rather than "any of
    /// them", so that adding an algorithm never raises the false-accept rate.
    /// - Throws: ``RegistryError``; `INCOMPATIBLE_TEMPLATES` when the face has no template for any
    ///   registry holding the identifier. A non-match is a result, not an error.
    public func authenticate(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        face: Face,
        autoEnrol: Bool = true
    ) async throws -> Authentication {
        try await self.awaiting { self.authenticate(gallery: name, identifier: identifier, face: face, autoEnrol: autoEnrol, completion: $0) }
    }

    /// ``authenticate(gallery:identifier:face:autoEnrol:)`` without a task: `completion` runs once.
    /// It runs at once, on this thread and before this returns, unless auto-enrolment stores a
    /// template (most authentications write nothing): then on the writer thread after the commit;
    /// or unless the index lock is taken by a publication: then on the writer thread right after it
    /// (this thread never waits for the lock). The decision is made once; the write carries on from
    /// it rather than deciding again.
    public func authenticate<Done: Completion<Authentication>>(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        face: Face,
        autoEnrol: Bool = true,
        completion: Done
    ) {
        self.authenticate(gallery: name, identifier: identifier, face: face, autoEnrol: autoEnrol, waiting: false, completion: completion)
    }

    /// ``authenticate(gallery:identifier:face:autoEnrol:completion:)``; when not `waiting`, an
    /// authentication that finds the index lock taken goes on after the writer's publication rather than wait here.
    private func authenticate<Done: Completion<Authentication>>(
        gallery name: String, identifier: String, face: Face, autoEnrol: Bool, waiting: Bool, completion: Done
    ) {
        let decision: AuthenticationDecision
        do {
            guard
                let decided = try self.decideAuthentication(
                    gallery: name, identifier: identifier, face: face, autoEnrol: autoEnrol, waiting: waiting)
            else {
                return self.afterPublication {
                    self.authenticate(gallery: name, identifier: identifier, face: face, autoEnrol: autoEnrol, waiting: true, completion: completion)
                }
            }
            decision = decided
        } catch {
            return completion.complete(.failure(error))
        }
        guard let plan = decision.plan else { return completion.complete(.success(decision.result)) }
        let decided = decision.result
        self.autoEnrol(plan) { outcomes in
            var result = decided
            result.autoEnrolment = outcomes
            completion.complete(.success(result))
        }
    }

    /// What authenticate decided, and the auto-enrolment it goes on with (nil: none).
    private struct AuthenticationDecision {
        var result: Authentication
        var plan: AutoEnrolmentPlan?
    }

    /// The face prepared and compared with the identifier's templates, and the auto-enrolment planned:
    /// authenticate's work under one hold of the index read lock (once per request: authentications
    /// are most of the traffic), so that it reads the gallery once. Nil, having decided nothing, when
    /// not `waiting` and the lock is taken.
    private func decideAuthentication(
        gallery name: String, identifier: String, face: Face, autoEnrol: Bool, waiting: Bool
    ) throws(RegistryError) -> AuthenticationDecision? {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        return try self.withIndexRead(waiting: waiting) { () throws(RegistryError) -> AuthenticationDecision in
            let gallery = try self.gallery(named: name)
            let templates = try self.prepare(face, for: gallery)
            guard let ordinal = gallery.presentOrdinal(of: identifier) else {
                throw RegistryError(.identifierNotRegistered, "'\(identifier)' is not registered in gallery '\(name)'")
            }
            // With the identifier's own profile when it enrolled one.
            let liveness = try Self.livenessGate(
                face, required: gallery.liveness.authenticate, strict: gallery.liveness.strict, profile: gallery.profile(of: identifier))
            let registries = gallery.registries
            func decider(from start: Int) -> Int? {
                AuthenticationRoute.decider(
                    from: start, count: registries.count, holds: { registries[$0].holds(ordinal) },
                    hasTemplate: { templates.has(registries[$0].algorithm.version) })
            }
            var next = decider(from: 0)
            while let position = next {
                let registry = registries[position]
                // Compared in place (a copy of the prepared template would retain its parts).
                let index = templates.index(of: registry.algorithm.version)!
                let best: Matching.Hit?
                do throws(RowFault) {
                    best = try Matching.best(of: ordinal, in: registry, row: templates.templates[index].row, mask: templates.templates[index].mask)
                } catch {
                    throw self.refusal(error)
                }
                guard let hit = best else {
                    next = decider(from: position + 1)
                    continue
                }
                let result = Authentication(
                    authenticated: AuthenticationRoute.authenticates(score: hit.score, thresholds: registry.thresholds), score: hit.score,
                    templateId: hit.templateId, algorithm: registry.algorithm.version, autoEnrolment: [], liveness: liveness)
                let plan =
                    autoEnrol && result.authenticated
                    ? AutoEnrolmentPlan(
                        gallery, decidedBy: registry, identifier: identifier, face: face, templates: templates, score: hit.score,
                        quality: face.capture.flatMap(CaptureQuality.assess)?.score, live: liveness?.live)
                    : nil
                return AuthenticationDecision(result: result, plan: plan)
            }
            throw RegistryError(
                .incompatibleTemplates,
                "the face carries no template for any registry of gallery '\(name)' that holds '\(identifier)'")
        }
    }
}
