import CoreMetrics
import LMDB
import Locks
import RegistryModel

extension Engine {
    // MARK: Preparing requests

    /// A face's templates validated and prepared against a gallery, at most one per algorithm.
    /// - Throws: ``RegistryError``: `malformedRequest` (no templates, two of one algorithm),
    ///   `unknownAlgorithm` (unknown, or no registry for it in the gallery), `invalidTemplate`.
    func prepare(_ face: Face, for gallery: GalleryIndex) throws(RegistryError) -> PreparedFace {
        guard !face.templates.isEmpty else { throw .malformedRequest("the face carries no templates") }
        var prepared = PreparedFace(capacity: face.templates.count)
        for template in face.templates {
            let algorithm = try self.catalog.algorithm(version: template.algorithm)
            guard !prepared.has(algorithm.version) else {
                throw .malformedRequest("the face carries two \(algorithm) templates; at most one per algorithm")
            }
            guard gallery.registry(algorithm: algorithm.version) != nil else {
                throw RegistryError(.unknownAlgorithm, "gallery '\(gallery.name)' has no registry for \(algorithm)")
            }
            do {
                prepared.append(try PreparedTemplate(template, algorithm: algorithm))
            } catch {
                throw .invalidTemplate(algorithm, error)
            }
        }
        return prepared
    }

    /// Validates the gallery's name and prepares the face under the index read lock (the gallery's
    /// registries can change concurrently only through the writer, which takes the write lock).
    private func prepareRequest(gallery name: String, face: Face) throws(RegistryError) -> (galleryId: UInt32, templates: PreparedFace) {
        try Names.validateGallery(name)
        return try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return (gallery.id, try self.prepare(face, for: gallery))
        }
    }

    /// The gallery an operation prepared against, re-read on the writer thread: it may have been
    /// deleted (or recreated) since.
    private func currentGallery(_ name: String, id: UInt32) throws(RegistryError) -> GalleryIndex {
        let gallery = try self.gallery(named: name)
        guard gallery.id == id else { throw .unknownGallery(name) }
        return gallery
    }

    /// Runs `body` under the index read lock: waiting for it when `waiting`, else only if it is free
    /// (nil when the writer holds it or waits for it).
    @inline(__always)
    func withIndexRead<T>(waiting: Bool, _ body: () throws(RegistryError) -> T) throws(RegistryError) -> T? {
        waiting ? try self.indexLock.withReadLock(body) : try self.indexLock.withReadLockIfFree(body)
    }

    // MARK: Register

    /// Registers a face under an identifier (README, engine behaviour): for each template, in its registry, (1) a
    /// template of another identifier scoring ≥ the identification threshold refuses it with
    /// `SIMILAR_FACE_REGISTERED` naming the best-scoring such identifier; else (2) if the identifier
    /// has templates there and none scores ≥ the authentication threshold, `FACE_MISMATCH` with the
    /// best score. All templates are checked, then all written in one transaction, or none.
    ///
    /// - Parameters:
    ///   - force: store despite the findings (the operator's "register anyway"); the reply lists them.
    /// - Returns: the stored templates (in registry priority order) and, when forced, the findings.
    /// - Throws: ``RegistryError``.
    public func register(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        face: Face,
        force: Bool = false
    ) async throws -> Registration {
        try await withCheckedThrowingContinuation { continuation in
            self.register(gallery: name, identifier: identifier, face: face, force: force) { continuation.resume(with: $0) }
        }
    }

    /// ``register(gallery:identifier:face:force:)`` without a task: `completion` runs once, with the
    /// registration or its refusal, on the writer thread after the commit or on this thread when the
    /// request is refused before it is queued (on the writer thread too when the checks before it had
    /// to wait for a publication: this thread never waits for the index lock). Must not block: it
    /// delays the writer's next batch.
    public func register(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        face: Face,
        force: Bool = false,
        completion: @escaping @Sendable (Result<Registration, any Error>) -> Void
    ) {
        self.register(gallery: name, identifier: identifier, face: face, force: force, waiting: false, completion: completion)
    }

    /// ``register(gallery:identifier:face:force:completion:)``; when not `waiting`, a registration that
    /// finds the index lock taken goes on after the writer's publication rather than wait here.
    private func register(
        gallery name: String, identifier: String, face: Face, force: Bool, waiting: Bool,
        completion: @escaping @Sendable (Result<Registration, any Error>) -> Void
    ) {
        let prepared: PreparedRegistration
        do {
            guard let ready = try self.prepareRegistration(gallery: name, identifier: identifier, face: face, waiting: waiting) else {
                return self.afterPublication {
                    self.register(gallery: name, identifier: identifier, face: face, force: force, waiting: true, completion: completion)
                }
            }
            prepared = ready
        } catch {
            completion(.failure(error))
            return
        }
        let (galleryId, templates, quality, liveness) = prepared
        let precheck = Precheck(gallery: name, galleryId: galleryId, identifier: identifier, templates: templates)
        // Flat: every check comes before the first write. What can still fail after it (LMDB, or
        // sealing a payload in an encrypted store) fails the batch or runs it again nested.
        self.write(
            precheck: precheck, flat: true,
            { txn, context in
                let gallery = try self.currentGallery(name, id: galleryId)
                var findings: [RegistrationFinding] = []
                var targets: [(RegistryIndex, PreparedTemplate)] = []
                for registry in gallery.registries {
                    guard let template = templates[registry.algorithm.version] else { continue }
                    targets.append((registry, template))
                    let check: Matching.CheckResult
                    do throws(RowFault) {
                        check = try Matching.check(
                            registry, in: gallery, identifier: identifier, query: template, batch: context.batch,
                            precomputed: context.precomputed[registry.id])
                    } catch {
                        throw self.refusal(error)
                    }
                    if let finding = check.finding(algorithm: registry.algorithm.version, thresholds: registry.thresholds) {
                        findings.append(finding)
                    }
                }
                if !force, let decisive = Self.decisive(findings) {
                    throw Self.refusal(decisive, all: findings, identifier: identifier, catalog: self.catalog)
                }
                let source: TemplateSource = findings.isEmpty ? .registered : .forced
                let stored = try targets.map { registry, template in
                    try self.storeTemplate(
                        txn, context, gallery: gallery, registry: registry, identifier: identifier, template: template, source: source,
                        quality: quality?.score)
                }
                return Registration(stored: stored, findings: findings, quality: quality, liveness: liveness)
            }, completion: completion)
    }

    /// What a registration's checks before it is queued found: the gallery, the prepared templates,
    /// the capture quality and the liveness verdict.
    private typealias PreparedRegistration = (galleryId: UInt32, templates: PreparedFace, quality: QualityAssessment?, liveness: LivenessVerdict?)

    /// A registration's checks before it is queued, under one hold of the index read lock: the gallery
    /// and templates, the liveness gate and the capture quality each registry requires. Nil, having
    /// checked nothing, when not `waiting` and the lock is taken.
    private func prepareRegistration(
        gallery name: String, identifier: String, face: Face, waiting: Bool
    ) throws(RegistryError) -> PreparedRegistration? {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        let quality = face.capture.flatMap(CaptureQuality.assess)
        return try self.withIndexRead(waiting: waiting) { () throws(RegistryError) -> PreparedRegistration in
            let gallery = try self.gallery(named: name)
            let templates = try self.prepare(face, for: gallery)
            let verdict = try Self.livenessGate(
                face, required: gallery.liveness.register, strict: gallery.liveness.strict, profile: gallery.profile(of: identifier))
            for registry in gallery.registries where templates.has(registry.algorithm.version) {
                guard let minimum = registry.minimumQuality, !(quality.map { $0.score >= minimum } ?? false) else { continue }
                throw RegistryError.qualityTooLow(
                    registry.algorithm, minimum: minimum, assessment: quality,
                    missing: face.capture.map(CaptureQuality.missingInputs) ?? [])
            }
            return (gallery.id, templates, quality, verdict)
        }
    }

    /// The finding that decides a refusal: the first similar face in priority order, else the first mismatch.
    static func decisive(_ findings: [RegistrationFinding]) -> RegistrationFinding? {
        findings.first { if case .similarFace = $0.kind { true } else { false } } ?? findings.first
    }

    static func refusal(
        _ decisive: RegistrationFinding,
        all: [RegistrationFinding],
        identifier: String,
        catalog: AlgorithmCatalog
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

    /// Writes one template inside an operation and records its index change.
    private func storeTemplate(
        _ txn: borrowing Transaction,
        _ context: OperationContext,
        gallery: GalleryIndex,
        registry: RegistryIndex,
        identifier: String,
        template: PreparedTemplate,
        source: TemplateSource,
        quality: Float?,
        registeredAt: Int64? = nil
    ) throws -> StoredTemplate {
        let id = context.takeTemplateId()
        let record = TemplateRecord(
            registryId: registry.id, galleryId: gallery.id, registeredAt: registeredAt ?? Store.now(), source: source,
            quality: quality, identifier: identifier, landmarkQuality: template.landmarkQuality)
        try self.store.putTemplate(txn, id: id, record: record, payload: template.payload)
        context.record(
            .add(
                PendingTemplate(
                    id: id, galleryId: gallery.id, registryId: registry.id, identifier: identifier, row: template.row,
                    mask: template.mask)))
        return StoredTemplate(
            id: id, identifier: identifier, algorithm: registry.algorithm.version, registeredAt: record.registeredAt,
            source: source, quality: quality, template: nil, landmarkQuality: template.landmarkQuality)
    }

    // MARK: Import

    /// Stores templates without the register checks (source `imported`), all in one transaction or
    /// none: for loading a trusted existing set, such as another registry's export.
    /// - Returns: the new template ids, in `items` order.
    /// - Throws: ``RegistryError`` for the first invalid item (nothing is stored).
    public func importTemplates(gallery name: String = GalleryConfiguration.defaultName, _ items: [ImportItem]) async throws -> [UInt64] {
        try await self.importTemplates(gallery: name, items, skipExisting: false).templateIds
    }

    /// Stores templates without the register checks, all in one transaction or none, keeping what
    /// each item says of its time, source and quality (an export's record; by default now,
    /// `imported`, none).
    /// - Parameter skipExisting: an item whose identifier already holds the same template (the same
    ///   prepared row) in its registry, or that repeats an earlier item, is not stored again: its id
    ///   is the stored one's. Importing an export twice then stores it once. A profile equal to the
    ///   one stored is skipped too.
    /// - Parameter profiles: liveness profiles set after the items, in the same transaction; each
    ///   identifier must then hold a template in the gallery. A profile already there is replaced.
    /// - Throws: ``RegistryError`` for the first invalid item or profile, named by position and
    ///   identifier (nothing is stored).
    public func importTemplates(
        gallery name: String = GalleryConfiguration.defaultName, _ items: [ImportItem], skipExisting: Bool, profiles: [ProfileEntry] = []
    ) async throws -> ImportOutcome {
        try Names.validateGallery(name)
        for (index, entry) in profiles.enumerated() {
            do throws(RegistryError) {
                try Names.validateIdentifier(entry.identifier)
            } catch {
                throw RegistryError(error.code, "import liveness profile \(index): \(error.message)", details: error.details)
            }
            // What the store could not read back is refused here, by the reading rules themselves.
            let readable = entry.profile.encoded().withUnsafeBytes { (try? LivenessProfile(decoding: $0)) != nil }
            guard readable, entry.profile.k <= LivenessProfile.maximumK else {
                throw RegistryError.malformedRequest(
                    "import liveness profile \(index) ('\(entry.identifier)'): k must be within (0, \(LivenessProfile.maximumK)] "
                        + "and every range finite, non-negative and ordered")
            }
        }
        let (galleryId, prepared) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            var prepared: [(ImportItem, PreparedTemplate)] = []
            prepared.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                do throws(RegistryError) {
                    try Names.validateIdentifier(item.identifier)
                    let templates = try self.prepare(Face(templates: [item.template]), for: gallery)
                    prepared.append((item, templates[item.template.algorithm]!))
                } catch {
                    // Which of thousands of items is wrong: its position and identifier (identifiers
                    // are printable once validated; an invalid one is named only by position).
                    let valid = (try? Names.validateIdentifier(item.identifier)) != nil
                    let which = valid ? "import item \(index) ('\(item.identifier)')" : "import item \(index)"
                    throw RegistryError(error.code, "\(which): \(error.message)", details: error.details)
                }
            }
            return (gallery.id, prepared)
        }
        return try await self.write { txn, context in
            let gallery = try self.currentGallery(name, id: galleryId)
            var skipped = 0
            // This batch's own templates, for repeats within it: (registry, identifier, row, mask) → id.
            var batch: [BatchKey: UInt64] = [:]
            let ids = try prepared.map { item, template in
                guard let registry = gallery.registry(algorithm: template.algorithm.version) else {
                    throw RegistryError(.unknownAlgorithm, "gallery '\(name)' has no registry for \(template.algorithm)")
                }
                let key = BatchKey(registry: registry.id, identifier: IdentifierKey(item.identifier), row: template.row, mask: template.mask)
                if skipExisting {
                    let stored: UInt64?
                    do throws(RowFault) {
                        stored = try Self.storedCopy(of: template, identifier: item.identifier, in: gallery, registry)
                    } catch {
                        throw self.refusal(error)
                    }
                    if let id = batch[key] ?? stored {
                        skipped += 1
                        return id
                    }
                }
                let id = try self.storeTemplate(
                    txn, context, gallery: gallery, registry: registry, identifier: item.identifier, template: template,
                    source: item.source ?? .imported, quality: item.quality, registeredAt: item.registeredAt
                ).id
                if skipExisting { batch[key] = id }
                return id
            }
            var outcome = ImportOutcome(templateIds: ids, skipped: skipped)
            for (index, entry) in profiles.enumerated() {
                guard Matching.holdsAnywhere(gallery, identifier: entry.identifier, batch: context.batch) else {
                    throw RegistryError(
                        .identifierNotRegistered,
                        "import liveness profile \(index) ('\(entry.identifier)'): '\(entry.identifier)' holds no template in gallery '\(name)'")
                }
                if skipExisting && gallery.profile(of: entry.identifier) == entry.profile {
                    outcome.profilesSkipped += 1
                    continue
                }
                try txn.put(self.store.profiles, key: Keys.profile(gallery.id, entry.identifier), value: entry.profile.encoded())
                context.record(.setProfile(galleryId: gallery.id, identifier: entry.identifier, profile: entry.profile))
                outcome.profilesStored += 1
            }
            return outcome
        }
    }

    private struct BatchKey: Hashable {
        var registry: UInt32
        /// By bytes: canonically-equivalent spellings are two people.
        var identifier: IdentifierKey
        var row: [Float]
        var mask: UInt32
    }

    /// The id of a committed template of `identifier` in `registry` whose prepared row (and landmark
    /// mask) equals `template`'s, if any. Runs on the writer thread, which alone changes the index.
    private static func storedCopy(of template: PreparedTemplate, identifier: String, in gallery: GalleryIndex, _ registry: RegistryIndex)
        throws(RowFault) -> UInt64?
    {
        guard let ordinal = gallery.ordinal(of: identifier) else { return nil }
        var found: UInt64?
        guard registry.holds(ordinal) else { return nil }
        try template.row.withUnsafeBufferPointer { row throws(RowFault) in
            try registry.withRows { rows in
                registry.forEachRow(of: ordinal) { index in
                    guard found == nil, !registry.isLandmarks || registry.masks[index] == template.mask, let stored = rows(index) else { return }
                    if (0..<row.count).allSatisfy({ stored[$0].bitPattern == row[$0].bitPattern }) { found = registry.templateIds[index] }
                }
            }
        }
        return found
    }

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
        if let limit, limit < 1 { throw RegistryError.malformedRequest("limit must be at least 1") }
        let (galleryId, templates) = try self.prepareRequest(gallery: name, face: face)
        var liveness: LivenessVerdict?
        // The plan is made under the same hold of the lock as the matches: one reading of the gallery.
        let (algorithm, matches, plan) = try self.indexLock.withReadLock {
            () throws(RegistryError) -> (UInt32?, [IdentifyMatch], AutoEnrolmentPlan?) in
            let gallery = try self.currentGallery(name, id: galleryId)
            // The person is not known yet, so the fixed thresholds apply.
            liveness = try Self.livenessGate(face, required: gallery.liveness.identify, strict: gallery.liveness.strict, profile: nil)
            let candidates = gallery.registries.filter { templates.has($0.algorithm.version) }
            var decided: (registry: RegistryIndex, matches: [IdentifyMatch])?
            if safe {
                guard let registry = candidates.first(where: { $0.identifierCount == gallery.identifierCount }) else {
                    throw RegistryError(
                        .incompatibleTemplates,
                        "no registry of gallery '\(name)' that the face has a template for holds every identifier; identify with safe=false or complete the migration"
                    )
                }
                decided = (
                    registry,
                    try self.identify(registry, in: gallery, query: templates[registry.algorithm.version]!, limit: limit)
                )
            } else {
                for registry in candidates {
                    let matches = try self.identify(registry, in: gallery, query: templates[registry.algorithm.version]!, limit: limit)
                    if !matches.isEmpty {
                        decided = (registry, matches)
                        break
                    }
                }
                decided = decided ?? candidates.first.map { ($0, []) }
            }
            guard let decided else { return (nil, [], nil) }
            let plan = decided.matches.first.flatMap { top in
                autoEnrol
                    ? AutoEnrolmentPlan(
                        gallery, decidedBy: decided.registry, identifier: top.identifier, templates: templates, score: top.score,
                        quality: face.capture.flatMap(CaptureQuality.assess)?.score, live: liveness?.live)
                    : nil
            }
            return (decided.registry.algorithm.version, decided.matches, plan)
        }
        var identification = Identification(algorithm: algorithm, matches: matches, autoEnrolment: [], liveness: liveness)
        if let plan { identification.autoEnrolment = await self.autoEnrol(plan) }
        return identification
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
        try await withCheckedThrowingContinuation { continuation in
            self.authenticate(
                gallery: name, identifier: identifier, face: face, autoEnrol: autoEnrol,
                completion: CompletionClosure { continuation.resume(with: $0) })
        }
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
            for registry in gallery.registries where registry.holds(ordinal) {
                // Compared in place (a copy of the prepared template would retain its parts).
                guard let index = templates.index(of: registry.algorithm.version) else { continue }
                let best: Matching.Hit?
                do throws(RowFault) {
                    best = try Matching.best(of: ordinal, in: registry, row: templates.templates[index].row, mask: templates.templates[index].mask)
                } catch {
                    throw self.refusal(error)
                }
                guard let hit = best else { continue }
                let result = Authentication(
                    authenticated: hit.score >= registry.thresholds.authentication, score: hit.score, templateId: hit.templateId,
                    algorithm: registry.algorithm.version, autoEnrolment: [], liveness: liveness)
                let plan =
                    autoEnrol && result.authenticated
                    ? AutoEnrolmentPlan(
                        gallery, decidedBy: registry, identifier: identifier, templates: templates, score: hit.score,
                        quality: face.capture.flatMap(CaptureQuality.assess)?.score, live: liveness?.live)
                    : nil
                return AuthenticationDecision(result: result, plan: plan)
            }
            throw RegistryError(
                .incompatibleTemplates,
                "the face carries no template for any registry of gallery '\(name)' that holds '\(identifier)'")
        }
    }

    // MARK: Auto-enrolment

    /// Registers the face's templates under the plan's identifier in the gallery's other registries
    /// that lack it, when its score reaches the deciding registry's auto-enrolment threshold, with the
    /// similar-face check of register (the mismatch check cannot apply: the identifier is new there).
    /// Each registry is decided on its own, under the plan's reading of the gallery's rules; failures
    /// are reported, not thrown.
    private func autoEnrol(_ plan: AutoEnrolmentPlan) async -> [AutoEnrolmentOutcome] {
        await withCheckedContinuation { continuation in self.autoEnrol(plan) { continuation.resume(returning: $0) } }
    }

    /// ``autoEnrol(_:)`` without a task: `completion` runs once, at once when nothing is written (the
    /// plan decides that from the committed index), else on the writer thread after the commit.
    private func autoEnrol(_ plan: AutoEnrolmentPlan, completion: @escaping @Sendable ([AutoEnrolmentOutcome]) -> Void) {
        // Most authentications and identifications enrol nothing: they wait for no commit.
        if let outcomes = plan.outcomesWithoutWrite { return completion(outcomes) }
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
            completion: { result in
                switch result {
                case .success(let outcomes): completion(outcomes)
                case .failure(let error): completion(plan.outcomes(failing: "\(error)"))
                }
            })
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
