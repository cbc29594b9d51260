import CLMDB
import Glibc

/// The checks of an environment directory made before LMDB maps `data.mdb`: LMDB trusts the file, and
/// a file shorter than its meta pages say faults (SIGBUS) on the first read of a missing page, while an
/// empty file is silently made into a new, empty environment.
///
/// The meta pages are read as lmdb.h lays them out on 64-bit Linux (liblmdb 0.9): a 16-byte page
/// header, then `MDB_meta` — magic, version, address, map size, the free and main `MDB_db` records
/// (48 bytes each; the free one's `md_pad` holds the page size), the last page number and the txnid.
enum DataFile {
    static let magic: UInt32 = 0xBEEF_C0DE
    static let headerBytes = 152

    /// What the newer valid meta page says.
    struct Meta: Equatable {
        var pageSize: Int
        var lastPage: UInt64
        var txnid: UInt64

        /// Where the last committed page ends: the length a whole file has at least (nil when that
        /// does not fit an `Int`).
        var committedBytes: Int? {
            Int(exactly: self.lastPage).flatMap { $0 < Int.max / self.pageSize - 1 ? ($0 + 1) * self.pageSize : nil }
        }
    }

    /// The file written beside `data.mdb` once the environment's first commit is durable (see
    /// ``Environment/markCreated()``): from then on the directory holds a store, and damage to it is
    /// refused rather than started over.
    static let createdMark = "data.mdb.created"

    /// The largest `data.mdb` taken for one a creation left before its first commit when it has no
    /// valid meta page and no ``createdMark``. Creating writes two meta pages and, in the first
    /// commit, a handful of tree pages; a store that ever held data is larger. Bigger files without a
    /// valid meta page are refused as damaged, since they may be stores from before the mark existed.
    static let largestUncommittedFile = 1 << 20

    /// What ``check(directory:)`` found.
    enum Found: Equatable {
        /// No store yet: LMDB creates one. `note` says what was cleared away (a creation that never
        /// committed), nil for an empty directory.
        case new(note: String?)
        /// A store that has committed; `marked` tells whether its ``createdMark`` is there yet (stores
        /// written before the mark existed, and creations cut between their first commit and the
        /// mark, lack it).
        case existing(marked: Bool, trees: Trees)
    }

    /// What the structural check of an existing file needs (``TreeCheck``), which ``Environment`` makes
    /// once LMDB has mapped the file and before any transaction reads a tree.
    struct Trees: Equatable {
        var path: String
        /// The file's length when its meta pages were read (before a short tail was made up).
        var size: Int
        var meta: Meta
    }

    /// Checks `directory`'s `data.mdb` before it is opened. A directory without a store must be empty
    /// apart from `exclusive.lock` (created by ``Environment`` just before), a mount point's
    /// `lost+found`, and what a creation leaves before its first commit: any other entry means a
    /// store was expected here.
    ///
    /// A store counts as created once its first commit is durable (``createdMark``). Until then, a
    /// power cut or a kill during the very first start can leave `lock.mdb` alone, or a `data.mdb`
    /// that is empty, torn, or whose meta pages have never recorded a commit; such a directory holds
    /// nothing anyone was told is stored, so it is cleared and created afresh (not in a read-only
    /// open, which writes nothing and refuses instead). With the mark, the same damage is refused.
    /// - Throws: ``LMDBError`` (`isDamaged`, or `ENOENT` for a missing data file) saying what was found.
    static func check(directory: String, readOnly: Bool = false) throws(LMDBError) -> Found {
        let path = directory + "/data.mdb"
        let marked = access(directory + "/" + self.createdMark, F_OK) == 0
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            guard code == ENOENT else { throw LMDBError(code: code, operation: "open(\(path))") }
            guard !marked else {
                throw LMDBError(
                    code: MDB_INVALID, operation: "open(\(path))",
                    detail: "data.mdb is missing from a store that was created (\(self.createdMark) is there)")
            }
            return try self.startAfresh(directory, readOnly: readOnly, leftover: nil)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw LMDBError(code: errno, operation: "fstat(\(path))") }
        let size = Int(info.st_size)
        if !marked, let uncommitted = self.neverCommitted(fd: fd, size: size) {
            return try self.startAfresh(directory, readOnly: readOnly, leftover: uncommitted)
        }
        guard size > 0 else {
            throw LMDBError(
                code: MDB_INVALID, operation: "open(\(path))",
                detail: "data.mdb is empty (0 bytes) where a store is expected")
        }
        let meta = try self.newestMeta(fd: fd, size: size, path: path)
        try self.settleLength(path: path, size: size, meta: meta)
        return .existing(marked: marked, trees: Trees(path: path, size: size, meta: meta))
    }

    /// Makes a file that ends a few pages before its last committed page whole (see below); refuses
    /// one that ends further short.
    private static func settleLength(path: String, size: Int, meta: Meta) throws(LMDBError) {
        let needed = meta.committedBytes ?? Int.max
        guard size < needed else { return }
        // LMDB does not write a page that a transaction allocated and freed again ("loose"): when that
        // page is the highest one, a healthy file ends before the last page its meta counts (seen:
        // one page short after a clean shutdown, once in 970 crash-loop rounds). Such a page is free,
        // so nothing reads it; a few missing pages at the end are made up with zeros, so that even a
        // page that was needed reads as zeros, which the load's checks report as damage, instead of
        // faulting. More missing than that is a truncated file.
        let missingPages = (needed - size + meta.pageSize - 1) / meta.pageSize
        guard missingPages <= self.maximumUnwrittenTailPages else {
            throw LMDBError(
                code: MDB_CORRUPTED, operation: "open(\(path))",
                detail:
                    "data.mdb is truncated: \(size) bytes, but its last committed page (\(meta.lastPage), transaction \(meta.txnid)) ends at byte \(needed)"
            )
        }
        guard truncate(path, off_t(needed)) == 0 else {
            throw LMDBError(
                code: errno, operation: "truncate(\(path))",
                detail: "data.mdb ends \(missingPages) page(s) before its last page and cannot be extended")
        }
    }

    /// How many pages at the end of `data.mdb` may be missing and still be taken for pages LMDB
    /// allocated and freed in one transaction (never written), rather than for a truncated file.
    static let maximumUnwrittenTailPages = 16

    /// The meta page LMDB would use: the valid one of the two with the greater txnid.
    static func newestMeta(fd: Int32, size: Int, path: String) throws(LMDBError) -> Meta {
        func damaged(_ detail: String) -> LMDBError {
            LMDBError(code: MDB_INVALID, operation: "open(\(path))", detail: detail)
        }
        guard size >= self.headerBytes else {
            throw damaged("data.mdb (\(size) bytes) is too short to hold an LMDB meta page")
        }
        var metas: [Meta] = []
        let first = self.readMeta(fd: fd, offset: 0)
        if let first { metas.append(first) }
        // The second meta page sits one page further; the first says how long a page is (when it is
        // damaged, LMDB's default, the OS page size, is the one place left to look).
        let pageSize = first?.pageSize ?? Int(sysconf(Int32(_SC_PAGESIZE)))
        if size >= pageSize + self.headerBytes, let second = self.readMeta(fd: fd, offset: pageSize), second.pageSize == pageSize {
            metas.append(second)
        }
        guard let newest = metas.max(by: { $0.txnid < $1.txnid }) else {
            throw damaged("neither meta page of data.mdb (\(size) bytes) is valid")
        }
        guard size >= 2 * newest.pageSize else {
            throw LMDBError(
                code: MDB_CORRUPTED, operation: "open(\(path))",
                detail: "data.mdb is truncated: \(size) bytes, shorter than its two meta pages of \(newest.pageSize) bytes")
        }
        return newest
    }

    /// Reads the meta page at `offset`; nil when it cannot be read or is not a valid meta page.
    private static func readMeta(fd: Int32, offset: Int) -> Meta? {
        var bytes = [UInt8](repeating: 0, count: self.headerBytes)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, self.headerBytes, off_t(offset)) }
        guard count == self.headerBytes else { return nil }
        return bytes.withUnsafeBytes { page in
            func load<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T { T(littleEndian: page.loadUnaligned(fromByteOffset: at, as: T.self)) }
            let flags = load(10, UInt16.self)
            let pageSize = Int(load(40, UInt32.self))
            guard flags & 0x08 != 0,  // P_META
                load(16, UInt32.self) == self.magic, load(20, UInt32.self) == 1,  // MDB_DATA_VERSION
                pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0
            else { return nil }
            return Meta(pageSize: pageSize, lastPage: load(136, UInt64.self), txnid: load(144, UInt64.self))
        }
    }

    /// Why `data.mdb` (with no ``createdMark`` beside it) holds no commit, or nil when it holds one or
    /// may: empty, shorter than a meta page, no valid meta page in a file no bigger than
    /// ``largestUncommittedFile``, or meta pages that still say transaction 0 (what creating writes;
    /// the first commit is transaction 1).
    private static func neverCommitted(fd: Int32, size: Int) -> String? {
        if size == 0 { return "an empty data.mdb" }
        if size < self.headerBytes { return "a data.mdb of \(size) bytes" }
        let first = self.readMeta(fd: fd, offset: 0)
        let pageSize = first?.pageSize ?? Int(sysconf(Int32(_SC_PAGESIZE)))
        let second = self.readMeta(fd: fd, offset: pageSize).flatMap { $0.pageSize == pageSize ? $0 : nil }
        guard let newest = [first, second].compactMap({ $0 }).max(by: { $0.txnid < $1.txnid }) else {
            return size <= self.largestUncommittedFile ? "a data.mdb of \(size) bytes with no valid meta page" : nil
        }
        return newest.txnid == 0 ? "a data.mdb of \(size) bytes that never recorded a commit" : nil
    }

    /// Clears what a creation left before its first commit (`leftover` describes its `data.mdb`, nil
    /// when there is none) so that LMDB creates the store afresh; refuses when the directory holds
    /// anything else, or in a read-only open.
    private static func startAfresh(_ directory: String, readOnly: Bool, leftover: String?) throws(LMDBError) -> Found {
        let creationFiles = ["lock.mdb"] + (leftover == nil ? [] : ["data.mdb"])
        let (present, others) = try self.entries(of: directory, except: creationFiles)
        guard others.isEmpty else {
            let found = others.sorted().prefix(3).joined(separator: ", ")
            throw LMDBError(
                code: leftover == nil ? ENOENT : MDB_INVALID, operation: "open(\(directory)/data.mdb)",
                detail: leftover == nil
                    ? "data.mdb is missing from a directory that is not empty (it holds \(found)); a new store is created only in an empty directory"
                    : "\(directory) holds \(leftover ?? "") beside other files (\(found)): not a first start that can be begun again")
        }
        guard let leftover else {
            if readOnly || present.isEmpty { return .new(note: nil) }
            // lock.mdb alone: LMDB's reader table, created just before data.mdb.
            unlink(directory + "/lock.mdb")
            return .new(note: "\(directory) held lock.mdb but no data.mdb: a first start stopped before creating it; the store is created afresh")
        }
        guard !readOnly else {
            throw LMDBError(
                code: MDB_INVALID, operation: "open(\(directory)/data.mdb)",
                detail: "\(directory) holds \(leftover): a first start stopped before its first commit, so it holds no store")
        }
        for name in creationFiles { unlink(directory + "/" + name) }
        return .new(
            note: "\(directory) held \(leftover): a first start stopped before its first commit (nothing was stored); the store is created afresh")
    }

    /// The entries of `directory` among `except`, and those that are neither in it nor the lock file,
    /// a mount point's `lost+found`, `.` or `..`.
    private static func entries(of directory: String, except: [String]) throws(LMDBError) -> (present: [String], others: [String]) {
        guard let dir = opendir(directory) else { throw LMDBError(code: errno, operation: "opendir(\(directory))") }
        defer { closedir(dir) }
        var others: [String] = []
        var present: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if except.contains(name) {
                present.append(name)
            } else if ![".", "..", "exclusive.lock", "lost+found"].contains(name) {
                others.append(name)
            }
        }
        return (present, others)
    }
}
