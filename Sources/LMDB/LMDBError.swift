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

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// LMDB's message for ``code`` (it also knows the system's `errno` messages).
    public var message: String { String(cString: mdb_strerror(self.code)) }

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
