import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

/// The face template registry: galleries of tagged templates for several algorithms, stored in LMDB,
/// with the register / identify / authenticate semantics of the README's engine behaviour.
///
/// ## Concurrency (docs/concurrency.md)
/// - **Writes** (register, import, auto-enrolment, deletions, gallery definitions) are typed requests
///   queued to one writer thread (`Writer.swift`), which runs them in batches sharing one durable
///   commit. A caller is answered only after the commit holding its write is on disk and the index
///   shows it.
/// - **Identify** runs on the engine's read pool: its scan reads the in-memory index under a shared
///   lock, and rows that are not kept in memory from the store, exactly or with an error
///   (``RowFault``). **Authenticate** compares one person's few rows on the caller's thread.
/// - **Admin reads** (identifier pages, an identifier's templates, exports, backups) run on the read
///   pool, in short LMDB read transactions.
/// - **Decisions** (register's verdict, identify's and authenticate's routes, auto-enrolment and
///   deletion plans) are values made from what the index and scans found (`Decisions.swift`).
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
    /// The snapshot the index was loaded from, while the index is still what it holds (see
    /// ``saveSnapshot()``); nil after a full load and from the index's first change on.
    let keptSnapshot = Mutex<KeptSnapshot?>(nil)
    private let closed = Atomic<Bool>(false)
    /// Whether the store was opened read-only (``init(path:configuration:metrics:readOnly:)``).
    public let isReadOnly: Bool
    let snapshotMinimumTemplates: Int
    let indexLock = ReadWriteLock()
    let commits = Atomic<Int>(0)
    let committedOperations = Atomic<Int>(0)
    var state: [String: GalleryIndex] = [:]
    private(set) var writer: WriteQueue!
    /// Whether the lazy request that finishes a removal's erasure is queued (``queueErasureCommit()``).
    let erasureCommitQueued = Atomic<Bool>(false)
    /// Whether the store is a fleet replica (``joinFleet(id:)``): every write of the registry's
    /// contents must then come from the fleet's log (``FleetApplication``).
    let isReplica = Atomic<Bool>(false)
    /// A deliberately broken build, for the fleet fault loop's negative control alone
    /// (`registry-fleet-loop --control`, docs/fleet.md): with `REGISTRYD_TEST_UNORDERED_FLEET_WRITES=1`
    /// in its environment a fleet node carries out its clients' writes on its own store at once
    /// instead of ordering them through the fleet's log. Its replicas then differ, and the loop's
    /// checker must say so; if it did not, it could not see a fleet that loses order. Never set
    /// outside that test: registryd warns at start when it is.
    public static let unorderedFleetWritesForTesting: Bool =
        getenv("REGISTRYD_TEST_UNORDERED_FLEET_WRITES").map { String(cString: $0) == "1" } ?? false
    /// Why the index could not be rebuilt after a fleet state image was loaded (``reloadIndex()``),
    /// for the load's caller.
    let reloadFailure = Mutex<String?>(nil)
    /// Fleet mode: where auto-enrolments go (``routeAutoEnrolments(_:)``).
    let autoEnrolmentRoute = Mutex<
        (@Sendable (AutoEnrolmentEntry, @escaping @Sendable (Result<[AutoEnrolmentOutcome], any Error>) -> Void) -> Void)?
    >(nil)
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
            self.forgetKeptSnapshot()
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

    // MARK: Lookups

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
        guard let gallery = self.state[name], gallery.name.sameIdentifier(as: name) else { throw .unknownGallery(name) }
        return gallery
    }
}
