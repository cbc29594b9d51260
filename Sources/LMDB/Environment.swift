import CLMDB
import Glibc
import Locks
import Synchronization

/// An LMDB environment (`MDB_env *`): one memory-mapped store directory holding named databases.
///
/// Rules it enforces, from lmdb.h:
/// - **Opened once per process.** Opening the same directory twice in one process corrupts LMDB's
///   lock bookkeeping, so a second open throws `EBUSY` until the first is closed.
/// - **Transactions only through closures.** ``read(_:)`` and ``write(_:)`` are synchronous: the body
///   runs on the calling thread and the transaction ends before they return (commit on return, abort
///   on throw, never abort after a failed commit). Never `await` inside one: a write transaction
///   belongs to the OS thread that began it.
/// - **The map grows by itself.** A write that hits `MDB_MAP_FULL` is aborted, the map is grown
///   (no transaction of this process may be active while it is, which a readers-writer gate ensures)
///   and the whole body runs again. Bodies must therefore be repeatable and let `LMDBError`s propagate.
/// - **Durable by default.** A commit returns after fsync unless ``Options/durable`` is false.
///
/// `@unchecked Sendable`: the handle is only used through LMDB calls that are thread-safe for an
/// environment opened with `MDB_NOTLS`; writers are serialised by `writerLock`, and `gate` keeps map
/// resizing apart from every transaction.
public final class Environment: @unchecked Sendable {
    /// The files besides data.mdb that opening an environment creates in its directory (LMDB's
    /// reader table, and the lock this wrapper takes for exclusive use).
    public static let lockFiles = ["lock.mdb", "exclusive.lock"]
    /// The file that marks a directory as holding a store whose first commit is durable (see
    /// ``creationNote``); restores and removals of a store treat it as part of the store.
    public static let createdMark = DataFile.createdMark

    /// How to open an environment.
    public struct Options: Sendable {
        /// Initial map size in bytes (it grows by itself; this only avoids early regrowth).
        public var mapSize: Int = 64 << 20
        /// How many named databases may be opened.
        public var maxDatabases: Int = 16
        /// Maximum simultaneous read transactions (reader table slots).
        public var maxReaders: Int = 126
        /// fsync on every commit. Only benchmarks of non-durable paths should turn this off.
        public var durable: Bool = true
        /// Largest map the environment may grow to; writes beyond it fail with `MDB_MAP_FULL`.
        public var maxMapSize: Int = 1 << 40
        /// What to do about a damaged data file, said when LMDB's own consistency checks fail (see
        /// ``Environment``: the process then exits with status 1 instead of aborting).
        public var damageAdvice: String = "Restore the directory from a backup"
        /// Open an existing environment for reading only, writing nothing into its directory: no
        /// directory, lock file or reader table is created (LMDB's `MDB_RDONLY | MDB_NOLOCK`), and
        /// every write transaction fails with `EACCES`. The registry's lock file, when the directory
        /// has one, is held shared, so no registry process opens it for writing meanwhile (and one
        /// that has it open makes this open fail with `EBUSY`).
        public var readOnly: Bool = false
        /// Use the path as given instead of resolving it (`realpath`) first: for a directory named
        /// through a descriptor this process holds (`/proc/self/fd/N`), which resolving would turn back
        /// into a name that whoever may write its parent can point elsewhere meanwhile. Read-only
        /// opens only.
        public var keepsPath: Bool = false

        public init() {}
    }

    private static let openPaths = Mutex<Set<String>>([])

    let handle: OpaquePointer
    /// Held with an exclusive flock while open (closing it releases the lock); shared when opened
    /// read-only, and -1 when a read-only open found no lock file.
    private let lockFile: Int32
    /// The canonical directory path.
    public let path: String
    let options: Options
    let gate = ReadWriteLock()
    let writerLock = ConditionLock()
    private let writerThread = Atomic<UInt>(0)
    let closed = Atomic<Bool>(false)
    /// Read transactions reset after use and kept for the next ``readReusing(_:)`` (at most
    /// ``parkedLimit``); aborted at ``close()``.
    private let parked = Mutex<[ParkedTransaction]>([])
    private static let parkedLimit = 32
    /// What the erasure of free pages knows between passes (``eraseFreePages(sync:)``); touched only
    /// holding `writerLock`.
    var erasure = ErasureState()
    private let currentMapSize: Atomic<Int>
    /// Whether ``DataFile/createdMark`` is known to be on disk; touched only holding `writerLock`.
    private var marked: Bool
    /// `data.mdb` as the kernel knows it, to find LMDB's map of it (nil: it could not be read).
    private let dataFile: FileIdentity?
    /// What the open cleared away to create the store afresh (a first start that stopped before its
    /// first commit), for the log; nil otherwise.
    public let creationNote: String?

    /// Takes the exclusive lock without waiting for another registry process, but trying again for
    /// up to 200 ms: a child forked by this process (a spawn from another thread) holds a copy of
    /// the descriptor, and with it the lock, until it executes its program, so a store just closed
    /// here can look held for an instant. Sets errno when it fails.
    private static func lockExclusively(_ descriptor: Int32) -> Bool {
        for _ in 0..<20 {
            if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return true }
            guard errno == EWOULDBLOCK else { return false }
            usleep(10_000)
        }
        errno = EWOULDBLOCK
        return false
    }

    /// Opens and locks `directory/exclusive.lock`: created and held exclusively for a writable open;
    /// held shared, if it exists, for a read-only one (-1 when it does not: a copy no registry has
    /// opened, such as a backup).
    private static func lock(_ directory: String, readOnly: Bool) throws(LMDBError) -> Int32 {
        let path = directory + "/exclusive.lock"
        let descriptor = readOnly ? open(path, O_RDONLY | O_CLOEXEC) : open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if readOnly && errno == ENOENT { return -1 }
            // Not "another process has it open": the directory (or the lock file) is not writable, and
            // the code says why (EACCES, EROFS, …).
            throw LMDBError(code: errno, operation: "open(\(path))")
        }
        let locked = readOnly ? flock(descriptor, LOCK_SH | LOCK_NB) == 0 : Self.lockExclusively(descriptor)
        guard locked else {
            let code = errno
            Glibc.close(descriptor)
            if code == EWOULDBLOCK { throw LMDBError(code: EBUSY, operation: "open(\(directory)): another process has it open") }
            throw LMDBError(code: code, operation: "flock(\(path))")
        }
        return descriptor
    }

    /// Opens (creating if needed, mode 0600) the environment in directory `path`. An existing
    /// `data.mdb` is checked before LMDB maps it (see ``DataFile``): an empty or truncated file, or one
    /// whose meta pages are both invalid, is refused; a new one is created only in an empty directory.
    /// Its trees are checked (``TreeCheck``) once LMDB has mapped it, before any transaction reads them.
    /// - Throws: ``LMDBError``; `EBUSY` when this or another process has it open, `isDamaged` for a
    ///   damaged data file, `ENOENT` when `data.mdb` is missing from a non-empty directory.
    public init(path: String, options: Options = Options()) throws(LMDBError) {
        if !options.readOnly && mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw LMDBError(code: errno, operation: "mkdir(\(path))")
        }
        let canonical: String
        if options.keepsPath && options.readOnly {
            canonical = path
        } else {
            guard let resolved = realpath(path, nil) else {
                throw LMDBError(code: errno, operation: "realpath(\(path))")
            }
            canonical = String(cString: resolved)
            free(resolved)
        }

        let claimed = Self.openPaths.withLock { $0.insert(canonical).inserted }
        guard claimed else { throw LMDBError(code: EBUSY, operation: "open(\(canonical)): already open in this process") }
        // LMDB allows several processes on one environment; the registry does not (each would keep its
        // own index and miss the other's writes), so one process holds an exclusive lock on it.
        let lockFile: Int32
        do {
            lockFile = try Self.lock(canonical, readOnly: options.readOnly)
        } catch {
            _ = Self.openPaths.withLock { $0.remove(canonical) }
            throw error
        }
        // Under the lock, so no other registry process is writing the file meanwhile.
        let found: DataFile.Found
        do {
            found = try DataFile.check(directory: canonical, readOnly: options.readOnly)
        } catch {
            if lockFile >= 0 { Glibc.close(lockFile) }
            _ = Self.openPaths.withLock { $0.remove(canonical) }
            throw error
        }

        var env: OpaquePointer?
        var dataFile: FileIdentity?
        do {
            try check(mdb_env_create(&env), "mdb_env_create")
            // liblmdb asserts on pages that are not what it expects (a damaged file), then aborts: say
            // what happened on standard error and exit instead of dying of SIGABRT.
            mdb_env_set_userctx(env, strdup("\(canonical)/data.mdb is damaged: LMDB's consistency check failed (\u{1}). \(options.damageAdvice)\n"))
            mdb_env_set_assert(env, lmdbAssertionFailed)
            try check(mdb_env_set_maxdbs(env, MDB_dbi(options.maxDatabases)), "mdb_env_set_maxdbs")
            try check(mdb_env_set_maxreaders(env, UInt32(options.maxReaders)), "mdb_env_set_maxreaders")
            try check(mdb_env_set_mapsize(env, options.mapSize), "mdb_env_set_mapsize")
            var flags = UInt32(MDB_NOTLS)
            if !options.durable { flags |= UInt32(MDB_NOSYNC) }
            // No lock.mdb: a reader table would be a file written into the directory. The shared
            // flock above keeps writers of this registry out instead.
            if options.readOnly { flags |= UInt32(MDB_RDONLY | MDB_NOLOCK) }
            try check(mdb_env_open(env, canonical, flags, 0o600), "mdb_env_open(\(canonical))")
            // LMDB opens data.mdb's main descriptor without close-on-exec (its other ones have it),
            // leaving that to the program: without it, every child this process starts (a test's
            // daemon, a shell) holds the store open, and its file system busy, for as long as it runs.
            // The descriptor also says which file LMDB mapped, to find its map (the tree check below, ``mapRanges()``).
            var descriptor: mdb_filehandle_t = -1
            if mdb_env_get_fd(env, &descriptor) == 0, descriptor >= 0 {
                let current = fcntl(descriptor, F_GETFD)
                if current >= 0 { _ = fcntl(descriptor, F_SETFD, current | FD_CLOEXEC) }
                var info = stat()
                if fstat(descriptor, &info) == 0 { dataFile = FileIdentity(info) }
            }
            // LMDB has mapped the file and read only its meta pages: no transaction has followed a
            // tree yet, which is what the check must come before.
            if case .existing(_, let trees) = found { try Self.checkTrees(trees, mappedAs: dataFile) }
        } catch {
            // Free the half-made handle and release the path, as GRDB does for a failed open.
            if let env {
                free(mdb_env_get_userctx(env))
                mdb_env_close(env)
            }
            if lockFile >= 0 { Glibc.close(lockFile) }
            _ = Self.openPaths.withLock { $0.remove(canonical) }
            throw error
        }
        self.lockFile = lockFile
        self.handle = env!
        self.path = canonical
        self.options = options
        self.dataFile = dataFile
        switch found {
        case .new(let note):
            self.creationNote = note
            self.marked = false
        case .existing(let marked, _):
            self.creationNote = nil
            self.marked = marked
        }
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        self.currentMapSize = Atomic<Int>(Int(info.me_mapsize))
    }

    deinit {
        self.close()
    }

    /// The structural check of an existing `data.mdb` (``TreeCheck``), through LMDB's own map of it
    /// when that is found: the pages it faults in stay mapped for the start-up load that reads the
    /// records next, and no second map of the whole file is made and torn down (docs/storage.md has
    /// the figures). Through a private map of its own otherwise: when LMDB's is not found as one map
    /// from the file's start covering its committed pages, or the file LMDB opened (`mapped`, its
    /// descriptor's identity) is not known.
    private static func checkTrees(_ trees: DataFile.Trees, mappedAs mapped: FileIdentity?) throws(LMDBError) {
        let mappings = mapped.map(FileMappings.of) ?? []
        // LMDB maps the file once, from its start, at least up to the end of its last committed page
        // (`mdb_env_open2` raises the map size to that), which is as far as the check reads; a longer
        // file's tail holds no committed page.
        if mappings.count == 1, let map = mappings.first, map.offset == 0, let committed = trees.meta.committedBytes,
            map.length >= min(trees.size, committed), let base = UnsafeRawPointer(bitPattern: map.start)
        {
            try TreeCheck.check(map: base, size: min(trees.size, map.length), meta: trees.meta, path: trees.path)
            return
        }
        let fd = open(trees.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LMDBError(code: errno, operation: "open(\(trees.path))") }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw LMDBError(code: errno, operation: "fstat(\(trees.path))") }
        let size = Int(info.st_size)
        let meta = try DataFile.newestMeta(fd: fd, size: size, path: trees.path)
        try TreeCheck.check(fd: fd, size: size, meta: meta, path: trees.path)
    }

    /// Closes the environment (`mdb_env_close`). Idempotent. The caller must not be inside, or
    /// start, a transaction concurrently.
    public func close() {
        guard !self.closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.gate.withWriteLock {
            let kept = self.parked.withLock { parked in
                defer { parked.removeAll() }
                return parked
            }
            for txn in kept { mdb_txn_abort(txn.handle) }
            let message = mdb_env_get_userctx(self.handle)
            mdb_env_close(self.handle)
            free(message)
        }
        if self.lockFile >= 0 { Glibc.close(self.lockFile) }
        _ = Self.openPaths.withLock { $0.remove(self.path) }
    }

    /// The database page size in bytes (the OS page size LMDB chose at creation).
    public var pageSize: Int {
        self.gate.withReadLock {
            guard !self.closed.load(ordering: .relaxed) else { return 4096 }
            var stat = MDB_stat()
            mdb_env_stat(self.handle, &stat)
            return Int(stat.ms_psize)
        }
    }

    /// Bytes of the map in use: pages up to the last one written (free pages inside included).
    public var usedBytes: Int {
        let pages: Int = self.gate.withReadLock {
            guard !self.closed.load(ordering: .relaxed) else { return 0 }
            var info = MDB_envinfo()
            mdb_env_info(self.handle, &info)
            return Int(info.me_last_pgno) + 1
        }
        return pages * self.pageSize
    }

    /// Drops this process's mappings of the data file's pages (`MADV_DONTNEED` over the map). They
    /// stay in the page cache, and the next read faults them back in unchanged; until then they no
    /// longer count in the process's resident memory. For after a bulk read (loading an index) whose
    /// pages will not be needed again soon.
    public func releaseResidentPages() { self.adviseMap(MADV_DONTNEED) }

    /// Tells the kernel that the data file's map is read at random (`MADV_RANDOM`): a fault then reads
    /// the page it needs, not a readahead window around it. For after the start-up load, once reads
    /// are lookups of single rows: when the store does not fit in memory, each readahead window would
    /// evict pages still needed to bring in ones that are not.
    public func adviseRandomReads() {
        self.readsAtRandom.store(true, ordering: .relaxed)
        self.adviseMap(MADV_RANDOM)
    }

    /// Whether ``adviseRandomReads()`` was called (a grown map is advised again).
    private let readsAtRandom = Atomic<Bool>(false)

    private func adviseMap(_ advice: Int32) {
        self.gate.withReadLock {
            guard !self.closed.load(ordering: .relaxed) else { return }
            for (start, length) in self.mapRanges() {
                _ = madvise(UnsafeMutableRawPointer(bitPattern: start), length, advice)
            }
        }
    }

    /// The map's address ranges once found (nil: to be looked up). LMDB maps anew only when the size
    /// is set (``grow(after:)``, and ``begin(readOnly:)`` after another process grew it), which
    /// forgets them: so they are looked up once per mapping, not at every release of the map's pages
    /// (every few MiB of rows a scan reads). Stale ranges must never be advised: `MADV_DONTNEED` on
    /// memory mapped there since would zero it.
    private let mappedRanges = Mutex<[(start: UInt, length: Int)]?>(nil)

    /// Call holding the gate (so that the map is not replaced meanwhile by ``grow(after:)``).
    private func mapRanges() -> [(start: UInt, length: Int)] {
        if let cached = self.mappedRanges.withLock({ $0 }) { return cached }
        let ranges = self.dataFile.map { FileMappings.of($0).map { ($0.start, $0.length) } } ?? []
        self.mappedRanges.withLock { $0 = ranges }
        return ranges
    }

    /// The current map size in bytes.
    public var mapSize: Int { self.currentMapSize.load(ordering: .relaxed) }

    /// Runs `body` in a read-only transaction (`MDB_RDONLY`), aborted when it returns: a snapshot of
    /// the last committed state. Keep it short: a live reader pins old pages.
    public func read<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        try self.gate.withReadLock {
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            let txn = try self.begin(readOnly: true)
            defer { mdb_txn_abort(txn) }
            return try body(Transaction(handle: txn, isReadOnly: true))
        }
    }

    /// ``read(_:)`` for a caller that reads in many short stretches (a scan, chunk after chunk): the
    /// transaction is renewed from one kept after an earlier use (`mdb_txn_renew`, which reuses its
    /// reader slot) rather than begun, and reset (`mdb_txn_reset`) and kept afterwards.
    public func readReusing<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        try self.gate.withReadLock {
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            var txn: OpaquePointer
            if let kept = self.parked.withLock({ $0.popLast() })?.handle {
                if mdb_txn_renew(kept) == 0 {
                    txn = kept
                } else {
                    // MDB_MAP_RESIZED (another process grew the map) and the like: a fresh begin copes.
                    mdb_txn_abort(kept)
                    txn = try self.begin(readOnly: true)
                }
            } else {
                txn = try self.begin(readOnly: true)
            }
            defer {
                mdb_txn_reset(txn)
                let kept = self.parked.withLock { parked in
                    guard parked.count < Self.parkedLimit else { return false }
                    parked.append(ParkedTransaction(handle: txn))
                    return true
                }
                if !kept { mdb_txn_abort(txn) }
            }
            return try body(Transaction(handle: txn, isReadOnly: true))
        }
    }

    /// Opens the named databases that already exist, in a read-only transaction (which works on a
    /// read-only environment too); the handles stay valid until the environment closes.
    /// - Throws: ``LMDBError``; `MDB_NOTFOUND` when one of them does not exist.
    public func openExistingDatabases(_ names: [String]) throws(LMDBError) -> [Database] {
        try self.gate.withReadLock { () throws(LMDBError) -> [Database] in
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            let txn = try self.begin(readOnly: true)
            var databases: [Database] = []
            for name in names {
                var dbi: MDB_dbi = 0
                let rc = mdb_dbi_open(txn, name, 0, &dbi)
                guard rc == MDB_SUCCESS else {
                    mdb_txn_abort(txn)
                    throw LMDBError(code: rc, operation: "mdb_dbi_open(\(name))")
                }
                databases.append(Database(dbi: dbi, name: name))
            }
            // Committed, not aborted: an aborted transaction closes the handles it opened.
            try check(mdb_txn_commit(txn), "mdb_txn_commit(read)")
            return databases
        }
    }

    /// Runs `body` in the write transaction and commits it durably when `body` returns; aborts when it
    /// throws. On `MDB_MAP_FULL` (from `body` or from the commit) the map grows and `body` runs again.
    /// - Throws: what `body` throws, or ``LMDBError`` from LMDB (including `MDB_MAP_FULL` once
    ///   ``Options/maxMapSize`` is reached).
    public func write<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        let me = UInt(pthread_self())
        precondition(self.writerThread.load(ordering: .relaxed) != me, "nested LMDB write transaction on one thread")
        return try self.writerLock.withLock { () throws -> T in
            self.writerThread.store(me, ordering: .relaxed)
            defer { self.writerThread.store(0, ordering: .relaxed) }
            while true {
                do {
                    return try self.writeOnce(body)
                } catch let error as LMDBError where error.isMapFull {
                    try self.grow(after: error)
                }
            }
        }
    }

    private func writeOnce<T>(_ body: (borrowing Transaction) throws -> T) throws -> T {
        try self.gate.withReadLock {
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            let txn = try self.begin(readOnly: false)
            let changes = ChangeCounter()
            let result: T
            do {
                result = try body(Transaction(handle: txn, isReadOnly: false, changes: changes))
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            // mdb_txn_commit frees the transaction even when it fails: never abort after it.
            try check(mdb_txn_commit(txn), "mdb_txn_commit")
            self.noteCommit(removed: changes.removals > 0)
            // Not a failure of the commit, which is done: a mark that cannot be written now (a full
            // disk) is tried again after the next commit; without it only a store with no valid
            // meta page would be mistaken for an interrupted creation (DataFile.neverCommitted).
            if !self.marked { self.marked = self.markCreated() }
            return result
        }
    }

    /// Doubles the map (at least +64 MiB), with no transaction of this process active.
    private func grow(after error: LMDBError) throws(LMDBError) {
        let current = self.mapSize
        guard current < self.options.maxMapSize else { throw error }
        let target = min(self.options.maxMapSize, max(current * 2, current + (64 << 20)))
        try self.gate.withWriteLock { () throws(LMDBError) in
            try check(mdb_env_set_mapsize(self.handle, target), "mdb_env_set_mapsize(\(target))")
            self.mappedRanges.withLock { $0 = nil }
        }
        self.currentMapSize.store(target, ordering: .relaxed)
        // A new size is a new mapping, without the advice the old one had.
        if self.readsAtRandom.load(ordering: .relaxed) { self.adviseMap(MADV_RANDOM) }
    }

    func begin(readOnly: Bool) throws(LMDBError) -> OpaquePointer {
        var txn: OpaquePointer?
        let flags = readOnly ? UInt32(MDB_RDONLY) : 0
        var rc = mdb_txn_begin(self.handle, nil, flags, &txn)
        if rc == MDB_MAP_RESIZED {
            // Another process grew the map; adopting its size is safe with no transaction active here.
            mdb_env_set_mapsize(self.handle, 0)
            self.mappedRanges.withLock { $0 = nil }
            rc = mdb_txn_begin(self.handle, nil, flags, &txn)
        }
        try check(rc, readOnly ? "mdb_txn_begin(read)" : "mdb_txn_begin(write)")
        return txn!
    }

    /// Writes a consistent copy of the environment to directory `path` (`mdb_env_copy2`), compacted
    /// (free pages omitted) when `compact` is true. Safe while the store is in use (a hot backup).
    public func copy(to path: String, compact: Bool = true) throws(LMDBError) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw LMDBError(code: errno, operation: "mkdir(\(path))")
        }
        try self.gate.withReadLock { () throws(LMDBError) in
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            try check(
                mdb_env_copy2(self.handle, path, compact ? UInt32(MDB_CP_COMPACT) : 0),
                "mdb_env_copy2(\(path))"
            )
        }
    }

    /// Writes a consistent copy of the environment into the open file `descriptor`
    /// (`mdb_env_copyfd2`), compacted when `compact` is true: the caller creates the file, so it
    /// decides how (`O_EXCL | O_NOFOLLOW`, its mode from the first instant) and where (`openat` in a
    /// directory it holds open), which a path could not guarantee. Safe while the store is in use.
    /// The file is not synced.
    public func copy(toDescriptor descriptor: Int32, compact: Bool = true) throws(LMDBError) {
        try self.gate.withReadLock { () throws(LMDBError) in
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            try check(mdb_env_copyfd2(self.handle, descriptor, compact ? UInt32(MDB_CP_COMPACT) : 0), "mdb_env_copyfd2")
        }
    }

    /// Records, once, that the environment holds a durable commit (``DataFile/createdMark``), after
    /// the first commit of a new store (or of one written before the mark existed): until the mark is
    /// there, a `data.mdb` without a commit is taken for an interrupted first start and created afresh.
    /// Its order matters: the commit is made durable (forced, for a non-durable environment) and the
    /// directory synced, so `data.mdb`'s entry is on disk before the mark's. Inside the gate and the
    /// writer lock. Returns whether the mark is durably there.
    private func markCreated() -> Bool {
        guard mdb_env_sync(self.handle, 1) == 0, Self.syncDirectory(self.path) else { return false }
        let markPath = self.path + "/" + DataFile.createdMark
        let descriptor = open(markPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return false }
        let text = "This directory holds an LMDB store whose first commit is durable.\n"
        let written = text.utf8CString.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count - 1) }
        let synced = fsync(descriptor) == 0
        Glibc.close(descriptor)
        return written == text.utf8.count && synced && Self.syncDirectory(self.path)
    }

    private static func syncDirectory(_ path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        return fsync(descriptor) == 0
    }

    /// Flushes buffers to disk (`mdb_env_sync` with force), for environments opened non-durable.
    public func sync() throws(LMDBError) {
        try self.gate.withReadLock { () throws(LMDBError) in
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            try check(mdb_env_sync(self.handle, 1), "mdb_env_sync")
        }
    }
}

/// LMDB's assertion callback (`MDB_assert_func`): the environment's message (its user context, where
/// byte 0x01 stands for the assertion text) on standard error, then exit status 1. Only
/// async-signal-safe calls: it may run anywhere inside liblmdb.
private func lmdbAssertionFailed(_ env: OpaquePointer?, _ assertion: UnsafePointer<CChar>?) {
    if let message = mdb_env_get_userctx(env)?.assumingMemoryBound(to: CChar.self) {
        let length = strlen(message)
        let split = strchr(message, 1).map { $0 - message } ?? length
        _ = write(2, message, split)
        if let assertion { _ = write(2, assertion, strlen(assertion)) }
        if split < length { _ = write(2, message + split + 1, length - split - 1) }
    }
    _exit(1)
}

/// A reset read transaction kept for reuse (``Environment/readReusing(_:)``). `@unchecked Sendable`:
/// only the thread that takes it out of the environment's list uses it, until it puts it back.
private struct ParkedTransaction: @unchecked Sendable {
    let handle: OpaquePointer
}
