import CLMDB
import Glibc

/// An LMDB call that failed: the raw return code (an `MDB_*` code or an errno), the operation that
/// returned it, and LMDB's own message for it.
///
/// Every return code of the C API goes through ``check(_:_:)``, so the raw code is never lost and
/// callers can test for the conditions they handle (`isMapFull`, `isNotFound`, …).
public struct LMDBError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The return code: one of LMDB's `MDB_*` codes or a system `errno` value.
    public let code: Int32
    /// The C call (and, where useful, its object) that failed, e.g. `"mdb_txn_commit"`.
    public let operation: String

    /// What was found, when the code's own message would mislead (the data file checks at open).
    public let detail: String?

    public init(code: Int32, operation: String, detail: String? = nil) {
        self.code = code
        self.operation = operation
        self.detail = detail
    }

    /// ``detail`` when set, else LMDB's message for ``code`` (it also knows the system's `errno`
    /// messages).
    public var message: String { self.detail ?? String(cString: mdb_strerror(self.code)) }

    public var description: String { "\(self.operation): \(self.message) (\(self.code))" }

    /// The map is full: the environment must grow before the write can succeed.
    public var isMapFull: Bool { self.code == MDB_MAP_FULL }
    /// The key was not found (only surfaced by calls where absence is an error).
    public var isNotFound: Bool { self.code == MDB_NOTFOUND }
    /// `MDB_NOOVERWRITE` or `MDB_APPEND` refused the key.
    public var isKeyExists: Bool { self.code == MDB_KEYEXIST }
    /// Another process grew the map; re-reading the size fixes it.
    public var isMapResized: Bool { self.code == MDB_MAP_RESIZED }
    /// A transaction was asked of an environment that has been closed.
    public static let environmentClosed = LMDBError(code: EBADF, operation: "transaction on a closed environment")
    /// See ``environmentClosed``.
    public var isEnvironmentClosed: Bool { self == Self.environmentClosed }
    /// The data file is damaged or is not an LMDB file: LMDB's own checks (`MDB_CORRUPTED`,
    /// `MDB_PAGE_NOTFOUND`, `MDB_INVALID`) or the checks at open (see ``Environment/init(path:options:)``).
    /// `MDB_BAD_TXN` too: this wrapper ends a transaction at its first error, so a transaction LMDB
    /// finds already failed failed inside LMDB, where a result is dropped (`mdb_cursor_init` ignores
    /// the page search that loads a named database's root: a page it could not read).
    public var isDamaged: Bool { [MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID, MDB_BAD_TXN].contains(self.code) }
    /// The files are not writable: permission denied, or a read-only file system.
    public var isNotWritable: Bool { [EACCES, EPERM, EROFS].contains(self.code) }
    /// The disk failed or filled up under a write (`EIO` is how a full disk often shows at commit).
    public var isDiskFull: Bool { [ENOSPC, EDQUOT, EIO].contains(self.code) }
    /// Every reader slot is in use.
    public var isReadersFull: Bool { self.code == MDB_READERS_FULL }
}

/// The one checker for LMDB return codes: throws an ``LMDBError`` carrying the code and the operation.
@inline(__always)
func check(_ rc: Int32, _ operation: @autoclosure () -> String) throws(LMDBError) {
    if rc != MDB_SUCCESS {
        throw LMDBError(code: rc, operation: operation())
    }
}
