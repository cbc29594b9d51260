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
    }

    /// Checks `directory`'s `data.mdb` before it is opened. A directory without one must be empty apart
    /// from `exclusive.lock` (created by ``Environment`` just before) and a mount point's `lost+found`:
    /// any other entry, `lock.mdb` in particular, means a store was expected here.
    /// - Throws: ``LMDBError`` (`isDamaged`, or `ENOENT` for a missing data file) saying what was found.
    static func check(directory: String) throws(LMDBError) {
        let path = directory + "/data.mdb"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            guard code == ENOENT else { throw LMDBError(code: code, operation: "open(\(path))") }
            try self.requireEmpty(directory)
            return
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw LMDBError(code: errno, operation: "fstat(\(path))") }
        let size = Int(info.st_size)
        guard size > 0 else {
            throw LMDBError(
                code: MDB_INVALID, operation: "open(\(path))",
                detail: "data.mdb is empty (0 bytes) where a store is expected")
        }
        let meta = try self.newestMeta(fd: fd, size: size, path: path)
        let needed = (Int(exactly: meta.lastPage).flatMap { $0 < Int.max / meta.pageSize - 1 ? ($0 + 1) * meta.pageSize : nil }) ?? Int.max
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

    private static func requireEmpty(_ directory: String) throws(LMDBError) {
        guard let dir = opendir(directory) else { throw LMDBError(code: errno, operation: "opendir(\(directory))") }
        defer { closedir(dir) }
        var others: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if ![".", "..", "exclusive.lock", "lost+found"].contains(name) { others.append(name) }
        }
        guard others.isEmpty else {
            let found = others.sorted().prefix(3).joined(separator: ", ")
            throw LMDBError(
                code: ENOENT, operation: "open(\(directory)/data.mdb)",
                detail:
                    "data.mdb is missing from a directory that is not empty (it holds \(found)); a new store is created only in an empty directory")
        }
    }
}
