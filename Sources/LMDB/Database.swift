import CLMDB

/// A handle on one named database inside an ``Environment`` (an `MDB_dbi`). Valid for the life of the
/// environment once the transaction that opened it committed.
public struct Database: Sendable, Hashable {
    let dbi: MDB_dbi
    /// The name it was opened with, for error messages.
    public let name: String
}

/// Flags for ``Transaction/put(_:key:value:flags:)``.
public struct PutFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Fail with `MDB_KEYEXIST` instead of replacing an existing value.
    public static let noOverwrite = PutFlags(rawValue: UInt32(MDB_NOOVERWRITE))
    /// The key is greater than every key in the database: append without a search and fill pages
    /// completely instead of splitting them in half (fails with `MDB_KEYEXIST` otherwise).
    public static let append = PutFlags(rawValue: UInt32(MDB_APPEND))
}

/// What a cursor walk does after visiting an entry.
public enum IterationControl: Sendable {
    case `continue`
    case stop
}
