import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

/// The face template registry: galleries of tagged templates for several algorithms, stored in LMDB,
/// with the register / identify / authenticate semantics of the README's engine behaviour.
///
/// ## Concurrency
/// - **Writes** (register, import, auto-enrolment, deletions, gallery definitions) are queued to one
///   writer thread, which runs them in batches sharing one durable commit. A caller resumes only
///   after the commit holding its write is on disk and the index shows it.
/// - **Reads of templates** (identify, authenticate, migration status) never touch LMDB: they scan
///   the in-memory index under a shared lock, on the caller's thread.
/// - **Admin reads** (identifier pages, an identifier's templates) use short LMDB read transactions.
///
/// `@unchecked Sendable`: `state` is mutated only by the writer thread holding `indexLock` for
/// writing; other threads read it holding `indexLock` for reading; the writer thread reads it without
/// the lock, as no one else mutates it.
public final class Engine: @unchecked Sendable {
    /// The algorithms this engine knows.
    public let catalog: AlgorithmCatalog

    let store: Store
    /// Where vector registries read the rows their scans rescore once their rows outgrow
    /// `residentRowBytes` (only their codes are then kept in memory).
    let storedRows: StoredRows
    /// The data directory (where the index snapshot is written at close).
    let path: String
    /// Where backups go unless a request names one of ``allowedBackupDirectories``: absolute, without
    /// a trailing `/` (``EngineConfiguration/backupDirectory``, made absolute against the working
    /// directory at open).
    public let backupRoot: String
    /// The other directories a backup request may name, as ``backupRoot`` is written.
    public let allowedBackupDirectories: [String]
    /// How the index was built at open.
    public private(set) var indexLoad = IndexLoad(fromSnapshot: false, reason: nil)
    /// What the open cleared away to create the store afresh (a first start that stopped before its
    /// first commit left an empty or uncommitted data file), for the daemon's log; nil otherwise.
    public var creationNote: String? { self.store.environment.creationNote }
    /// What ``close()`` did about the index snapshot (nil until it ran), for the daemon's log.
    public private(set) var snapshotReport: String?
    private let closed = Atomic<Bool>(false)
    /// Whether the store was opened read-only (``init(path:configuration:metrics:readOnly:)``).
    public let isReadOnly: Bool
    let snapshotMinimumTemplates: Int
    let indexLock = ReadWriteLock()
    private let commits = Atomic<Int>(0)
    private let committedOperations = Atomic<Int>(0)
    var state: [String: GalleryIndex] = [:]
    private var writer: WriteQueue!
    /// Whether the lazy request that finishes a removal's erasure is queued (``queueErasureCommit()``).
    let erasureCommitQueued = Atomic<Bool>(false)
    let auditBuffer = AuditBuffer()
    let auditRetention: AuditRetention
    let metrics: EngineMetrics
    /// Keeps room on the file system for deletions (checked by the writer before each batch).
    let reserve: StorageReserve
    /// Where the engine's reads of the store run (never on the caller's thread).
    let reads = ReadPool(maximumThreads: max(2, UsableCPUs.count))
    /// Whether the writer is publishing a commit in the index (from asking for the write lock to
    /// releasing it), and what found the index lock taken meanwhile: authentications and
    /// registrations that the writer carries on right after (``afterPublication(_:)``), so that the
    /// caller's thread (an event loop) never waits for the lock.
    let publication = Mutex<(underWay: Bool, waiting: [@Sendable () -> Void])>((false, []))

    /// The writer queue (for requests that are not ``write(exclusive:_:)`` calls).
    var writerQueue: WriteQueue { self.writer }

    /// Opens (creating if needed) the store in directory `path` and loads the index.
    /// - Throws: ``RegistryError`` for a configuration the store cannot be opened with (a newer schema,
    ///   an algorithm whose stored registries the configuration no longer defines or changed), for a
    ///   damaged store (an empty or truncated data file, a record or payload failing its checksum: the
    ///   message names it and says to restore from a backup) and for files it may not write; or an
    ///   `LMDBError` when the environment cannot be opened otherwise (e.g. `EBUSY`: already open).
    /// - Parameter metrics: where the writer's queue depth and commit figures go (see `docs/operations.md`).
    /// - Parameter readOnly: open an existing store of this schema to read and ``verify()`` it only,
    ///   writing nothing into its directory (no commit, no erasure, no index snapshot, no lock files):
    ///   the index is loaded from the store, and every write fails. An older schema, which a writable
    ///   open would upgrade, is refused.
    public init(
        path: String, configuration: EngineConfiguration = EngineConfiguration(), metrics: any MetricsFactory = NOOPMetricsHandler.instance,
        readOnly: Bool = false
    ) throws {
        self.catalog = try AlgorithmCatalog(configured: configuration.algorithms)
        self.metrics = EngineMetrics(factory: metrics)
        self.reserve = StorageReserve(directory: path, reserveBytes: configuration.storageReserveBytes, metrics: self.metrics)
        self.auditRetention = configuration.auditRetention
        self.path = path
        self.backupRoot = Self.backupDirectory(configuration.backupDirectory ?? Self.withoutTrailingSlashes(path) + "-backups")
        self.allowedBackupDirectories = configuration.allowedBackupDirectories.map(Self.backupDirectory)
        self.snapshotMinimumTemplates = configuration.snapshotMinimumTemplates
        self.isReadOnly = readOnly
        // What liblmdb cannot check (wild page pointers in a damaged file) faults; say what it means.
        let fault = "the store in \(path) is probably damaged: reading it at start-up faulted. \(RegistryError.restoreAdvice)"
        do {
            self.store = try FaultReport.during(fault) { try Store(path: path, configuration: configuration, readOnly: readOnly) }
        } catch {
            throw RegistryError.opening(path, error)
        }
        self.storedRows = StoredRows(store: self.store, residentBytes: configuration.residentRowBytes)
        if readOnly {
            do {
                try FaultReport.during(fault) {
                    try self.store.environment.read { txn in
                        try self.store.requireSchema(txn)
                        try self.checkEncryption(txn, key: configuration.encryptionKey)
                        try self.reconcileAlgorithms(txn)
                    }
                    self.indexLoad = try self.load()
                }
            } catch {
                self.store.close()
                throw RegistryError.opening(path, error)
            }
            return  // no writer: every write fails
        }
        var erasureFinished = true
        do {
            try FaultReport.during(fault) {
                // An upgrade rewrites records in place: a copy of the store as it was comes first.
                try self.store.backupBeforeMigration(path: path)
                let taken = IndexSnapshot.take(from: path)
                // Whoever wrote the store last may have stopped between a removal and its erasure.
                self.store.environment.assumeRemovalPending()
                var token: [UInt8]?
                try self.store.environment.write { txn in
                    // Taken in the open's first commit: a snapshot is good for this open only.
                    token = try self.store.takeSnapshotToken(txn)
                    try self.store.prepareSchema(txn)
                    try self.checkEncryption(txn, key: configuration.encryptionKey)
                    try self.reconcileAlgorithms(txn)
                    if try txn.get(self.store.galleries, key: Array(GalleryConfiguration.defaultName.utf8)) == nil {
                        _ = try self.writeGallery(txn, configuration.defaultGallery, existing: nil)
                    }
                }
                erasureFinished = self.finishErasure()
                var snapshot: IndexSnapshot.Opened?
                var unusable: String?
                do throws(IndexSnapshot.Unusable) {
                    snapshot = try taken?.open(token: token)
                } catch {
                    unusable = error.description
                }
                self.indexLoad = try self.load(snapshot: snapshot, unusable: unusable)
            }
            // The pages the load walked need not stay mapped (scans read only the rows they rescore),
            // and from now on the map is read a row at a time.
            self.store.environment.releaseResidentPages()
            self.store.environment.adviseRandomReads()
        } catch {
            self.store.close()
            throw RegistryError.opening(path, error)
        }
        self.writer = WriteQueue(maximumBatch: configuration.maximumBatch, depth: self.metrics.queueDepth) { [unowned self] batch in
            self.run(batch)
        }
        if !erasureFinished { self.queueErasureCommit() }
    }

    deinit {
        self.close()
    }

    /// Finishes the reads and writes already queued, stops the writer, writes the index snapshot for the next
    /// open (``snapshotReport`` says how that went) and closes the store. Later writes fail with
    /// `SHUTTING_DOWN`. Idempotent.
    public func close() {
        guard !self.closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Reads already submitted finish on the open store; later ones are refused.
        self.reads.stop()
        if let writer = self.writer {
            writer.stop()
            self.snapshotReport = self.saveSnapshot()
            // After the snapshot's commit, which lets the pages freed before it be wiped.
            _ = self.finishErasure()
        }
        self.store.close()
    }

    /// Calls `body` when writes that add data start being refused to keep the file system's reserve
    /// for deletions (true), and when they are accepted again (false), with a sentence for the log.
    public func onStorageReserveChange(_ body: @escaping @Sendable (_ reached: Bool, _ description: String) -> Void) {
        self.reserve.onChange.withLock { $0 = body }
    }

    /// Whether writes that add data are being refused to keep the reserve (as of the last batch).
    public var storageReserveReached: Bool { self.reserve.reached }

    /// The scan kernels in use: the prefilter's level ("avx512-vnni", "avx2" or "scalar"), and
    /// whether the prefilter is off (`REGISTRY_PREFILTER=off`).
    public static var scanKernels: String { Prefilter.isEnabled ? Prefilter.levelName : "\(Prefilter.levelName), prefilter off" }

    /// Rows the prefilter has considered since start, and how many of them the float32 kernel scored.
    public static var prefilterCounts: (considered: Int, rescored: Int) { Prefilter.counts }

    /// Write transactions committed, and the operations they carried: with concurrent writers,
    /// group commit makes the first smaller than the second.
    public var commitStatistics: (commits: Int, operations: Int) {
        (self.commits.load(ordering: .relaxed), self.committedOperations.load(ordering: .relaxed))
    }

    // MARK: Writes

    /// Runs `body` in the next group commit and returns its result once the commit is durable and the
    /// index updated.
    /// `useReserve`: the write frees space or adds next to nothing (a deletion, the audit trail,
    /// verify), so it goes ahead when the file system is down to its reserve (``StorageReserve``).
    func write<T: Sendable>(
        exclusive: Bool = false,
        precheck: Precheck? = nil,
        flat: Bool = false,
        useReserve: Bool = false,
        _ body: @escaping @Sendable (borrowing Transaction, OperationContext) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            self.write(exclusive: exclusive, precheck: precheck, flat: flat, useReserve: useReserve, body) { continuation.resume(with: $0) }
        }
    }

    /// ``write(exclusive:precheck:_:)`` without a task: `completion` runs once, on the writer thread
    /// after the commit (or on this thread, at once, when the writer is stopping). For callers that
    /// answer from an event loop, where a suspended task would cost two thread switches per write.
    /// `flat`: see ``WriteQueue/Request/flat``.
    func write<T: Sendable>(
        exclusive: Bool = false,
        precheck: Precheck? = nil,
        flat: Bool = false,
        useReserve: Bool = false,
        _ body: @escaping @Sendable (borrowing Transaction, OperationContext) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let request = WriteQueue.Request(
            exclusive: exclusive,
            precheck: precheck,
            flat: flat,
            useReserve: useReserve,
            body: { txn, context in try body(txn, context) },
            completion: { result in completion(result.map { $0 as! T }) })
        guard let writer = self.writer else {
            return completion(.failure(RegistryError(.internal, "the store is open read-only")))
        }
        if !writer.submit(request) {
            completion(.failure(RegistryError(.shuttingDown, "the registry is shutting down")))
        }
    }

    /// Runs one batch on the writer thread: every operation in a nested transaction of one write
    /// transaction (a failed operation is rolled back alone), one durable commit, then the index
    /// changes, then the completions.
    private func run(_ batch: [WriteQueue.Request]) {
        var batch = batch
        // Writes that add data are refused, before anything runs, while the file system is down to
        // its reserve; the rest of the batch goes ahead.
        if batch.contains(where: { !$0.useReserve }), let refusal = self.reserve.refusal(environment: self.store.environment) {
            for request in batch where !request.useReserve { request.completion(.failure(refusal)) }
            batch.removeAll { !$0.useReserve }
            if batch.isEmpty { return }
        }
        let prechecked = self.precheck(batch)
        let started = ContinuousClock.now
        let transactionBefore = self.store.environment.lastCommittedTransaction
        let committed: (results: [Result<any Sendable, any Error>], changes: BatchChanges)
        do {
            committed = try self.commit(batch, prechecked: prechecked)
        } catch {
            let failure = (error as? LMDBError).map(RegistryError.storage) ?? error
            for request in batch { request.completion(.failure(failure)) }
            // A commit that failed part-way may have written pages past the end of the store.
            self.eraseAfterBatch(sync: batch.allSatisfy(\.isLazy), always: true)
            return
        }
        // Operations are the requests of clients; lazy ones (audit flushes, erasure's commits and
        // polls) only ride along, and a batch of them alone that wrote nothing is no commit.
        let operations = batch.count { !$0.isLazy }
        if operations > 0 || self.store.environment.lastCommittedTransaction != transactionBefore {
            self.commits.add(1, ordering: .relaxed)
            self.committedOperations.add(operations, ordering: .relaxed)
            let elapsed = (ContinuousClock.now - started).components
            self.metrics.commitDuration.recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
            self.metrics.batchSize.record(operations)
        }
        if !committed.changes.isEmpty {
            self.publish { self.apply(committed.changes.changes) }
            if committed.changes.changes.contains(where: \.freesPages) { self.reserve.pagesFreed() }
        }
        for (request, result) in zip(batch, committed.results) {
            request.completion(
                result.mapError { error in
                    error is RegistryError ? error : RegistryError(.internal, "\(error)")
                })
        }
        // After the replies: erasure never delays one.
        self.eraseAfterBatch(sync: batch.allSatisfy(\.isLazy))
    }

    // MARK: Publishing commits in the index

    /// Runs `body` once the index lock is free, without waiting for it here: right after the
    /// publication under way, on the writer thread, when there is one; else (it ended since the lock
    /// was found taken) at once. The caller's thread then waits only if a new publication began in
    /// the instants between the two looks.
    func afterPublication(_ body: @escaping @Sendable () -> Void) {
        self.metrics.indexLockWaits.increment()
        let deferred = self.publication.withLock { publication in
            guard publication.underWay else { return false }
            publication.waiting.append(body)
            return true
        }
        if !deferred { body() }
    }

    /// The writer's publication of a commit in the index: `change` under the write lock, then what
    /// found the lock taken meanwhile (``afterPublication(_:)``), on this thread.
    func publish(_ change: () -> Void) {
        self.publication.withLock { $0.underWay = true }
        let asked = ContinuousClock.now
        self.indexLock.withWriteLock(change)
        let held = (ContinuousClock.now - asked).components
        self.metrics.indexPublishDuration.recordNanoseconds(held.seconds * 1_000_000_000 + held.attoseconds / 1_000_000_000)
        let waiting = self.publication.withLock { publication in
            publication.underWay = false
            defer { publication.waiting = [] }
            return publication.waiting
        }
        for body in waiting { body() }
    }

    /// Runs a batch's operations in one write transaction and commits it; runs it again, with the
    /// operation nested, when a flat one failed after writing.
    private func commit(
        _ batch: [WriteQueue.Request], prechecked: [Int: [UInt32: Scan.CheckBest]]
    ) throws -> (results: [Result<any Sendable, any Error>], changes: BatchChanges) {
        var nested: Set<Int> = []
        while true {
            do {
                return try self.commitOnce(batch, prechecked: prechecked, nested: nested)
            } catch let failed as FlatOperationFailed {
                nested.insert(failed.index)
            }
        }
    }

    /// One run of ``commit(_:prechecked:)``: each operation in a nested transaction (a failed one is
    /// rolled back alone) unless it is flat and not in `nested`.
    private func commitOnce(
        _ batch: [WriteQueue.Request], prechecked: [Int: [UInt32: Scan.CheckBest]], nested: Set<Int>
    ) throws -> (results: [Result<any Sendable, any Error>], changes: BatchChanges) {
        var results: [Result<any Sendable, any Error>] = []
        var changes = BatchChanges()
        try self.store.environment.write { txn in
            // Runs again from scratch if the map had to grow.
            results = []
            changes = BatchChanges()
            let firstId = try self.store.readUInt64(txn, Keys.nextTemplateId) ?? 1
            var nextId = firstId
            for (index, request) in batch.enumerated() {
                let context = OperationContext(batch: changes, nextTemplateId: nextId)
                context.precomputed = prechecked[index] ?? [:]
                let flat = request.flat && !nested.contains(index)
                let changesBefore = txn.changeCount
                do {
                    let value = try flat ? request.body(txn, context) : txn.nested { child in try request.body(child, context) }
                    changes.append(context.changes)
                    results.append(.success(value))
                } catch let error as LMDBError {
                    throw error
                } catch  where flat && txn.changeCount != changesBefore {
                    // Its changes cannot be undone alone: the whole batch runs again.
                    throw FlatOperationFailed(index: index)
                } catch {
                    results.append(.failure(error))
                }
                nextId = context.nextTemplateId
            }
            // A batch that wrote nothing leaves no dirty page, and LMDB then skips the fsync.
            if nextId != firstId { try self.store.writeInteger(txn, Keys.nextTemplateId, nextId) }
        }
        return (results, changes)
    }

    /// A flat operation (``WriteQueue/Request/flat``) failed after writing: the batch's transaction is
    /// aborted and the batch runs again with that operation nested.
    private struct FlatOperationFailed: Error {
        let index: Int
    }

    /// The announced registration checks of a batch against the committed index, one pass over each
    /// vector registry for all of them: per request (by position), per registry id. On the writer
    /// thread, which alone changes the index, so it needs no lock.
    private func precheck(_ batch: [WriteQueue.Request]) -> [Int: [UInt32: Scan.CheckBest]] {
        var queries: [ObjectIdentifier: (registry: RegistryIndex, requests: [Int], rows: [Float], owners: [UInt32?])] = [:]
        for (index, request) in batch.enumerated() {
            guard let precheck = request.precheck, let gallery = self.state[precheck.gallery], gallery.id == precheck.galleryId else {
                continue
            }
            for registry in gallery.registries where !registry.isLandmarks && registry.count > 0 {
                guard let template = precheck.templates[registry.algorithm.version] else { continue }
                // Appended in place, with one lookup: a copy taken out of the dictionary and put back
                // copied the rows gathered so far on every registration of the batch.
                let owner = gallery.ordinal(of: precheck.identifier)
                func add(to entry: inout (registry: RegistryIndex, requests: [Int], rows: [Float], owners: [UInt32?])) {
                    entry.requests.append(index)
                    entry.rows += template.row
                    entry.owners.append(owner)
                }
                add(to: &queries[ObjectIdentifier(registry), default: (registry, [], [], [])])
            }
        }
        var results: [Int: [UInt32: Scan.CheckBest]] = [:]
        for (registry, requests, rows, owners) in queries.values {
            let floors = [Float](repeating: registry.thresholds.identification, count: owners.count)
            // A row that cannot be read leaves these requests without a precomputed check: each
            // scans again in its own body, which then fails with the fault.
            guard
                let found = try? rows.withUnsafeBufferPointer({ rows throws(RowFault) in
                    try Scan.check(registry, queries: rows.baseAddress!, owners: owners, floors: floors)
                })
            else { continue }
            for (request, best) in zip(requests, found) { results[request, default: [:]][registry.id] = best }
        }
        return results
    }

    /// Applies committed changes to the index. Holding the index write lock.
    private func apply(_ changes: [IndexChange]) {
        for change in changes {
            switch change {
            case .add(let template):
                guard let gallery = self.gallery(id: template.galleryId),
                    let registry = gallery.registry(id: template.registryId)
                else { continue }
                gallery.add(to: registry, templateId: template.id, identifier: template.identifier, mask: template.mask) { row in
                    template.row.withUnsafeBufferPointer { row.update(from: $0.baseAddress!, count: $0.count) }
                }
            case .remove(let id, let galleryId, let registryId):
                guard let gallery = self.gallery(id: galleryId), let registry = gallery.registry(id: registryId) else { continue }
                gallery.remove(templateId: id, from: registry)
            case .defineGallery(let name, let record, let algorithms):
                let gallery = self.state[name] ?? GalleryIndex(id: record.id, name: name, registries: [])
                gallery.define(record, algorithms: algorithms, rows: self.storedRows)
                self.state[name] = gallery
            case .setCipher(let cipher):
                self.store.cipher.withLock { $0 = cipher }
                self.store.pendingCipher.withLock { $0 = nil }
            case .setProfile(let galleryId, let identifier, let profile):
                self.gallery(id: galleryId)?.setProfile(profile, of: identifier)
            case .deleteGallery(let name):
                self.state[name] = nil
            }
        }
    }

    /// A scan's ``RowFault`` as the request's error, counted (``EngineMetrics/damagedRows``).
    func refusal(_ fault: RowFault) -> RegistryError {
        self.metrics.damagedRows.increment()
        return .damagedRow(fault)
    }

    func gallery(id: UInt32) -> GalleryIndex? {
        self.state.values.first { $0.id == id }
    }

    /// The gallery named `name`; the caller holds the index lock or is the writer thread.
    func gallery(named name: String) throws(RegistryError) -> GalleryIndex {
        guard let gallery = self.state[name] else { throw .unknownGallery(name) }
        return gallery
    }

    // MARK: Galleries and algorithms in the store

    /// Creates or updates a gallery's stored definition. Registries keep their ids (and templates)
    /// when their algorithm stays; a registry dropped from the configuration must be empty.
    func writeGallery(
        _ txn: borrowing Transaction,
        _ configuration: GalleryConfiguration,
        existing: GalleryIndex?
    ) throws -> (record: GalleryRecord, algorithms: [Algorithm]) {
        // The rules that need no store, shared with the configuration check.
        if let problem = configuration.problems(catalog: self.catalog).first { throw problem.error }
        var registries: [GalleryRecord.Registry] = []
        var algorithms: [Algorithm] = []
        for entry in configuration.registries {
            let algorithm = try self.catalog.algorithm(version: entry.algorithm)
            let id = try existing?.registry(algorithm: entry.algorithm)?.id ?? self.store.takeId(txn, Keys.nextRegistryId)
            registries.append(
                GalleryRecord.Registry(
                    id: id, algorithm: entry.algorithm, thresholds: entry.thresholds ?? Thresholds(defaultsFor: algorithm),
                    minimumQuality: entry.minimumQuality, minimumAutoEnrolmentQuality: entry.minimumAutoEnrolmentQuality))
            algorithms.append(algorithm)
            try self.store.putAlgorithm(txn, algorithm)
        }
        let kept = Set(configuration.registries.map(\.algorithm))
        for dropped in existing?.registries ?? [] where !kept.contains(dropped.algorithm.version) && dropped.count > 0 {
            throw RegistryError.malformedRequest(
                "the \(dropped.algorithm) registry of gallery '\(configuration.name)' holds \(dropped.count) templates; delete them before removing it"
            )
        }
        let id = try existing?.id ?? self.store.takeId(txn, Keys.nextGalleryId)
        let record = GalleryRecord(
            id: id, registries: registries, liveness: configuration.liveness, livenessK: configuration.livenessK)
        try self.store.putGallery(txn, name: configuration.name, record)
        return (record, algorithms)
    }

    /// Opens an encrypted store with its key, or starts encrypting a new store; refuses a missing or
    /// wrong key, and a key for a store that holds unencrypted templates.
    private func checkEncryption(_ txn: borrowing Transaction, key material: [UInt8]?) throws {
        let check = try txn.get(self.store.meta, key: Keys.encryptionCheck).map { Array($0) }
        guard let material else {
            if check != nil {
                throw RegistryError(
                    .internal, "the store is encrypted: start registryd with its key (--key-file, or the store-key credential)")
            }
            return
        }
        let cipher = try PayloadCipher(keyMaterial: material)
        if let check {
            guard (try? cipher.open(check, templateId: 0)) == PayloadCipher.checkPlaintext else {
                throw RegistryError(.internal, "the encryption key given does not open this store")
            }
        } else {
            guard try txn.count(self.store.templates) == 0 else {
                throw RegistryError(
                    .internal,
                    "the store holds unencrypted templates: start registryd without a key and encrypt it (registryctl encrypt)")
            }
            // A read-only open of an empty store uses the key without adopting it.
            if !txn.isReadOnly {
                try txn.put(self.store.meta, key: Keys.encryptionCheck, value: try cipher.seal(PayloadCipher.checkPlaintext, templateId: 0))
            }
        }
        self.store.cipher.withLock { $0 = cipher }
    }

    /// Refuses to open a store whose registries use an algorithm the configuration dropped or changed.
    private func reconcileAlgorithms(_ txn: borrowing Transaction) throws {
        for stored in try self.store.storedAlgorithms(txn) {
            let used = try self.store.storedGalleries(txn).contains { $0.record.registries.contains { $0.algorithm == stored.version } }
            guard used else { continue }
            guard let configured = try? self.catalog.algorithm(version: stored.version) else {
                throw RegistryError(
                    .unknownAlgorithm,
                    "the store has registries of algorithm \(stored), which the configuration no longer defines")
            }
            guard AlgorithmRecord.isCompatible(stored: stored, configured: configured) else {
                throw RegistryError(
                    .unknownAlgorithm,
                    "algorithm \(stored.version) is configured as \(configured.kind), \(configured.scoreFunction.rawValue) but the store holds templates of \(stored.kind), \(stored.scoreFunction.rawValue)"
                )
            }
        }
    }
}
