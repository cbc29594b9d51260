import CLMDB
import Glibc
import Locks
import Synchronization

/// What ``Environment/eraseFreePages(sync:)`` or ``Environment/freePageResidue()`` found.
public struct FreePages: Sendable, Equatable {
    /// Free pages no snapshot can read any more (LMDB's own rule for reusing a page), plus the pages
    /// past the last one in use.
    public var erasable = 0
    /// Of those, the pages that held data: set to zero by ``Environment/eraseFreePages(sync:)``, only
    /// counted by ``Environment/freePageResidue()``.
    public var holdingData = 0
    /// Free pages that the previous commit (which a crash could fall back to) or an open reader may
    /// still read: they cannot be touched yet.
    public var held = 0
    /// Whether a commit that removed data still has pages among the held ones: its erasure ends only
    /// after a later commit and once every reader older than it has finished.
    public var removalPending = false
    /// Whether zeros were written that no sync has reached yet (the next commit's, or a pass with
    /// `sync`).
    public var unsynced = false

    public init() {}
}

/// Erasure of free pages: what the writer knows between calls. Touched only holding the writer lock.
struct ErasureState {
    /// Erasable pages known to be all zeros, so that they are not read again on every pass.
    var knownZero: Set<Int> = []
    /// The last commit that removed data (a delete or a drop), 0 when none is pending.
    var lastRemoval = 0
    /// The last commit this process saw.
    var lastCommit = 0
    /// Zeros written since the file was last synced.
    var unsynced = false
    /// The oldest snapshot at the last pass: the pages freed before it were wiped then (0: no pass).
    var passOldest = 0

    /// Whether the last commit removed data: its pages can be wiped only after a later commit.
    var removalAwaitsCommit: Bool { self.lastRemoval != 0 && self.lastRemoval == self.lastCommit }
}

extension Environment {
    /// Sets every erasable page that holds data to zero: free pages that no snapshot can read any
    /// more, and pages past the last page in use (left by a commit that failed part-way). This is
    /// what makes a deletion an erasure: LMDB copies a page before changing it and never wipes the
    /// copy it frees (``docs/security.md``, *Erasure*).
    ///
    /// A page is erasable under LMDB's own rule for reusing it: freed by a transaction older than
    /// both the last commit (the previous commit's pages are kept for a crash that tears the last
    /// meta page) and every open reader. Runs holding the writer lock, so no write transaction can
    /// allocate one of them meanwhile; readers never read a free page.
    /// - Parameter sync: `fdatasync` the file when zeros were written since the last sync (pass
    ///   false when a commit follows soon: its own sync covers them).
    /// - Throws: ``LMDBError`` from LMDB or from reading and writing the file.
    public func eraseFreePages(sync: Bool) throws(LMDBError) -> FreePages {
        try self.writerLock.withLock { () throws(LMDBError) -> FreePages in
            try self.gate.withReadLock { () throws(LMDBError) -> FreePages in
                guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
                let free = try self.collectFreePages()
                self.erasure.passOldest = free.oldest
                let descriptor = try self.fileDescriptor()
                var result = free.report
                var page = [UInt8](repeating: 0, count: free.pageSize)
                var knownZero = Set<Int>(minimumCapacity: free.erasable.count)
                for number in free.erasable {
                    if self.erasure.knownZero.contains(number) {
                        knownZero.insert(number)
                        continue
                    }
                    if try Self.holdsData(descriptor, page: number, buffer: &page) {
                        try Self.zero(descriptor, page: number, size: free.pageSize)
                        result.holdingData += 1
                        self.erasure.unsynced = true
                    }
                    knownZero.insert(number)
                }
                // Pages now in use are no longer known to be zero.
                self.erasure.knownZero = knownZero
                if sync && self.erasure.unsynced && self.options.durable {
                    guard fdatasync(descriptor) == 0 else { throw LMDBError(code: errno, operation: "fdatasync(data.mdb)") }
                }
                if sync || !self.options.durable { self.erasure.unsynced = false }
                if !free.report.removalPending { self.erasure.lastRemoval = 0 }
                result.unsynced = self.erasure.unsynced
                return result
            }
        }
    }

    /// Counts the erasable pages that hold data without changing anything (for a verify): 0 once
    /// every erasure has finished.
    public func freePageResidue() throws(LMDBError) -> FreePages {
        try self.gate.withReadLock { () throws(LMDBError) -> FreePages in
            guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
            return try self.residue()
        }
    }

    /// What the last erasure pass should have left zero and did not, from inside a write transaction
    /// (which holds the writer lock, so no pass runs meanwhile): only the pages that were erasable at
    /// that pass (a reader may have ended since, or a commit made outside the engine's writer freed
    /// more), and the pages past the last one in use. In a read-only environment (no pass ever runs
    /// in it), from a read transaction: every erasable page, which the last pass of whoever wrote
    /// the store, at its close, wiped.
    public func freePageResidue(within txn: borrowing Transaction) throws(LMDBError) -> FreePages {
        if self.options.readOnly { return try self.residue() }
        precondition(!txn.isReadOnly, "only a write transaction holds the writer lock")
        return try self.residue(freedBefore: self.erasure.passOldest)
    }

    /// - Parameter freedBefore: count only pages freed before this transaction (nil: every erasable one).
    private func residue(freedBefore limit: Int? = nil) throws(LMDBError) -> FreePages {
        let free = try self.collectFreePages(freedBefore: limit)
        let descriptor = try self.fileDescriptor()
        var result = free.report
        var page = [UInt8](repeating: 0, count: free.pageSize)
        for number in free.erasable where try Self.holdsData(descriptor, page: number, buffer: &page) {
            result.holdingData += 1
        }
        return result
    }

    /// Counts the last commit as one that removed data: at open, when nothing says whether the
    /// process that wrote the store finished erasing what it deleted before it stopped.
    public func assumeRemovalPending() {
        self.writerLock.withLock {
            self.erasure.lastCommit = self.lastCommittedTransaction
            self.erasure.lastRemoval = self.erasure.lastCommit
        }
    }

    /// Whether the erasure of a removal waits for a commit after it (nothing has been committed
    /// since): a write that changes anything then lets ``eraseFreePages(sync:)`` finish it.
    public var removalAwaitsCommit: Bool {
        self.writerLock.withLock { self.erasure.removalAwaitsCommit }
    }

    /// ``removalAwaitsCommit`` from inside a write transaction (which holds the writer lock).
    public func removalAwaitsCommit(within txn: borrowing Transaction) -> Bool {
        precondition(!txn.isReadOnly, "only a write transaction holds the writer lock")
        return self.erasure.removalAwaitsCommit
    }

    /// Whether an erasure is under way: a removal's pages are not all wiped yet, or its zeros not
    /// synced. Without one, a pass has nothing to do that matters (free pages then hold only copies
    /// of data that is still stored, which the pass after the next removal wipes).
    public var erasureOutstanding: Bool {
        self.writerLock.withLock { self.erasure.lastRemoval != 0 || self.erasure.unsynced }
    }

    /// Pages inside `data.mdb` that LMDB can give a write without growing the file: every page of the
    /// free list (also those an older snapshot still holds, soon reusable) and those past the last
    /// page in use. Reads the free list; call it outside a write transaction.
    public func freePageCount() throws(LMDBError) -> Int {
        try self.writerLock.withLock { () throws(LMDBError) -> Int in
            try self.gate.withReadLock { () throws(LMDBError) -> Int in
                guard !self.closed.load(ordering: .relaxed) else { throw LMDBError.environmentClosed }
                let free = try self.collectFreePages()
                return free.report.erasable + free.report.held
            }
        }
    }

    /// The id of the last committed transaction.
    public var lastCommittedTransaction: Int {
        var info = MDB_envinfo()
        mdb_env_info(self.handle, &info)
        return Int(info.me_last_txnid)
    }

    /// Called by the writer after each commit, holding the writer lock.
    func noteCommit(removed: Bool) {
        let committed = self.lastCommittedTransaction
        // A commit that wrote anything synced the whole file, zeros included.
        if committed != self.erasure.lastCommit { self.erasure.unsynced = false }
        self.erasure.lastCommit = committed
        if removed { self.erasure.lastRemoval = committed }
    }

    private struct Collected {
        var erasable: [Int] = []
        var report = FreePages()
        var pageSize = 4096
        /// The oldest snapshot still readable: pages freed before it are erasable.
        var oldest = 0
    }

    /// Reads the free list (LMDB's database 0: per freeing transaction, the pages it freed) in a read
    /// transaction, and sorts its pages into erasable and held.
    private func collectFreePages(freedBefore limit: Int? = nil) throws(LMDBError) -> Collected {
        var collected = Collected()
        var stat = MDB_stat()
        mdb_env_stat(self.handle, &stat)
        collected.pageSize = Int(stat.ms_psize)
        let txn = try self.begin(readOnly: true)
        defer { mdb_txn_abort(txn) }
        let snapshot = Int(mdb_txn_id(txn))
        let readable = min(snapshot, try self.oldestReader() ?? snapshot)
        let oldest = min(readable, limit ?? readable)
        collected.oldest = readable
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(txn, 0, &cursor), "mdb_cursor_open(free list)")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var value = MDB_val()
        var op = MDB_FIRST
        while true {
            let rc = mdb_cursor_get(cursor, &key, &value, op)
            if rc == MDB_NOTFOUND { break }
            try check(rc, "mdb_cursor_get(free list)")
            op = MDB_NEXT
            guard key.mv_size == MemoryLayout<Int>.size, value.mv_size >= MemoryLayout<Int>.size else {
                throw LMDBError(code: MDB_CORRUPTED, operation: "reading the free list")
            }
            let freedBy = key.mv_data.loadUnaligned(as: Int.self)
            let ids = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)
            let count = ids.loadUnaligned(as: Int.self)
            guard count >= 0, count <= value.mv_size / MemoryLayout<Int>.size - 1 else {
                throw LMDBError(code: MDB_CORRUPTED, operation: "reading the free list")
            }
            if freedBy < oldest {
                for i in stride(from: 1, through: count, by: 1) {
                    collected.erasable.append(ids.loadUnaligned(fromByteOffset: i * MemoryLayout<Int>.size, as: Int.self))
                }
            } else {
                collected.report.held += count
            }
        }
        // Past the last page in use: nothing reads there; a failed commit may have written there.
        var info = MDB_envinfo()
        mdb_env_info(self.handle, &info)
        let pages = try self.fileSize() / collected.pageSize
        if pages > Int(info.me_last_pgno) + 1 { collected.erasable += (Int(info.me_last_pgno) + 1)..<pages }
        collected.report.erasable = collected.erasable.count
        let removal = self.erasure.lastRemoval
        collected.report.removalPending = removal != 0 && removal >= oldest
        return collected
    }

    /// The snapshot of the oldest open reader (this process's or LMDB's own, such as a hot copy's),
    /// from LMDB's reader table; nil when none is open.
    private func oldestReader() throws(LMDBError) -> Int? {
        final class Oldest { var value: Int? }
        let oldest = Oldest()
        let rc = mdb_reader_list(
            self.handle,
            { line, context in
                // "<pid> <thread> <txnid>" per slot, "-" for a slot not in a transaction.
                guard let line, let context else { return 0 }
                let fields = String(cString: line).split { $0 == " " || $0 == "\n" }
                if fields.count == 3, let txnid = Int(fields[2]) {
                    let oldest = Unmanaged<Oldest>.fromOpaque(context).takeUnretainedValue()
                    oldest.value = min(oldest.value ?? txnid, txnid)
                }
                return 0
            }, Unmanaged.passUnretained(oldest).toOpaque())
        guard rc >= 0 else { throw LMDBError(code: MDB_PANIC, operation: "mdb_reader_list") }
        return oldest.value
    }

    func fileDescriptor() throws(LMDBError) -> Int32 {
        var descriptor: Int32 = -1
        try check(mdb_env_get_fd(self.handle, &descriptor), "mdb_env_get_fd")
        return descriptor
    }

    func fileSize() throws(LMDBError) -> Int {
        var status = stat()
        guard fstat(try self.fileDescriptor(), &status) == 0 else { throw LMDBError(code: errno, operation: "fstat(data.mdb)") }
        return Int(status.st_size)
    }

    private static func holdsData(_ descriptor: Int32, page: Int, buffer: inout [UInt8]) throws(LMDBError) -> Bool {
        let size = buffer.count
        let read = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, size, off_t(page * size)) }
        guard read >= 0 else { throw LMDBError(code: errno, operation: "pread(data.mdb, page \(page))") }
        return buffer.withUnsafeBytes { bytes in bytes.prefix(read).contains { $0 != 0 } }
    }

    private static func zero(_ descriptor: Int32, page: Int, size: Int) throws(LMDBError) {
        let zeros = [UInt8](repeating: 0, count: size)
        let written = zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, size, off_t(page * size)) }
        guard written == size else { throw LMDBError(code: written < 0 ? errno : EIO, operation: "pwrite(data.mdb, page \(page))") }
    }
}
