import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

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
    func prepareRequest(gallery name: String, face: Face) throws(RegistryError) -> (galleryId: UInt32, templates: PreparedFace) {
        try Names.validateGallery(name)
        return try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return (gallery.id, try self.prepare(face, for: gallery))
        }
    }

    /// The gallery an operation prepared against, re-read on the writer thread: it may have been
    /// deleted (or recreated) since.
    func currentGallery(_ name: String, id: UInt32) throws(RegistryError) -> GalleryIndex {
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
        try await self.awaiting { self.register(gallery: name, identifier: identifier, face: face, force: force, completion: $0) }
    }

    /// ``register(gallery:identifier:face:force:)`` without a task: `completion` runs once, with the
    /// registration or its refusal, on the writer thread after the commit or on this thread when the
    /// request is refused before it is queued (on the writer thread too when the checks before it had
    /// to wait for a publication: this thread never waits for the index lock). Must not block: it
    /// delays the writer's next batch.
    public func register<Done: Completion<Registration>>(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        face: Face,
        force: Bool = false,
        completion: Done
    ) {
        self.register(gallery: name, identifier: identifier, face: face, force: force, waiting: false, completion: completion)
    }

    /// ``register(gallery:identifier:face:force:completion:)``; when not `waiting`, a registration that
    /// finds the index lock taken goes on after the writer's publication rather than wait here.
    private func register<Done: Completion<Registration>>(
        gallery name: String, identifier: String, face: Face, force: Bool, waiting: Bool, completion: Done
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
            return completion.complete(.failure(error))
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
                let source: TemplateSource
                switch RegistrationVerdict(findings: findings, force: force) {
                case .refuse(let decisive):
                    throw RegistrationVerdict.refusal(decisive, all: findings, identifier: identifier, catalog: self.catalog)
                case .store(let chosen):
                    source = chosen
                }
                let stored = try targets.map { registry, template in
                    try self.storeTemplate(
                        txn, context, gallery: gallery, registry: registry, identifier: identifier, template: template, source: source,
                        quality: quality?.score)
                }
                return Registration(stored: stored, findings: findings, quality: quality, liveness: liveness)
            }, completion: completion.complete)
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

    /// Writes one template inside an operation and records its index change.
    func storeTemplate(
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
            registryId: registry.id, galleryId: gallery.id, registeredAt: registeredAt ?? context.time ?? Store.now(), source: source,
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
}
