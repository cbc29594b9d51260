import Glibc

/// One line of the audit trail (PROTOCOL.md): who (uid, pid) did what to which identifiers, when, and
/// the outcome. Never template data.
public struct AuditEntry: Sendable, Hashable {
    /// Microseconds since the Unix epoch.
    public var time: Int64
    public var uid: UInt32
    public var pid: Int32
    /// The protocol operation, e.g. `register`, `identify`.
    public var operation: String
    public var gallery: String
    /// The identifiers concerned: registered, authenticated, deleted, or identified.
    public var identifiers: [String]
    /// `ok`, `match`, `no-match` or `refused`.
    public var outcome: String
    /// The deciding score (identify's top match, authenticate's best), when there is one.
    public var score: Float?
    /// The error code of a refusal (`PERMISSION_DENIED`, `SIMILAR_FACE_REGISTERED`, …).
    public var errorCode: String?

    public init(
        time: Int64, uid: UInt32, pid: Int32, operation: String, gallery: String, identifiers: [String], outcome: String,
        score: Float? = nil, errorCode: String? = nil
    ) {
        self.time = time
        self.uid = uid
        self.pid = pid
        self.operation = operation
        self.gallery = gallery
        self.identifiers = identifiers
        self.outcome = outcome
        self.score = score
        self.errorCode = errorCode
    }

    /// Microseconds since the Unix epoch, now.
    public static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1_000
    }
}

/// Which audit entries to return.
public struct AuditQuery: Sendable, Hashable {
    /// Only entries concerning this identifier.
    public var identifier: String?
    /// Only entries at or after / before this time (µs since the epoch).
    public var since: Int64?
    public var until: Int64?
    /// Only entries with this outcome.
    public var outcome: String?
    /// At most this many, the newest.
    public var limit: Int

    public init(identifier: String? = nil, since: Int64? = nil, until: Int64? = nil, outcome: String? = nil, limit: Int = 100) {
        self.identifier = identifier
        self.since = since
        self.until = until
        self.outcome = outcome
        self.limit = limit
    }
}

/// How long the audit trail keeps entries; nil: no bound of that kind.
public struct AuditRetention: Sendable, Hashable {
    public var maximumEntries: Int?
    public var maximumAgeSeconds: Int64?

    public init(maximumEntries: Int? = 1_000_000, maximumAgeSeconds: Int64? = 365 * 86_400) {
        self.maximumEntries = maximumEntries
        self.maximumAgeSeconds = maximumAgeSeconds
    }
}
