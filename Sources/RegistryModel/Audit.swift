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
    public var outcome: AuditOutcome
    /// The deciding score (identify's top match, authenticate's best), when there is one.
    public var score: Float?
    /// The error code of a refusal (`PERMISSION_DENIED`, `SIMILAR_FACE_REGISTERED`, …).
    public var errorCode: String?
    /// How many requests the entry stands for: 1, or, for a summary of refusals of one kind from one
    /// peer in one period (docs/security.md, "Refusals"), how many there were beyond the one recorded
    /// in full; `pid` is then the last one's.
    public var count: UInt32

    public init(
        time: Int64, uid: UInt32, pid: Int32, operation: String, gallery: String, identifiers: [String], outcome: AuditOutcome,
        score: Float? = nil, errorCode: String? = nil, count: UInt32 = 1
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
        self.count = count
    }

    /// Microseconds since the Unix epoch, now.
    public static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1_000
    }
}

/// How a request ended, as the audit trail records it (and the request metrics count it). A value
/// rather than a closed enum: an entry read from a newer daemon keeps an outcome this build does not
/// know.
public struct AuditOutcome: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Carried out (every operation but those that decide matches).
    public static let ok = AuditOutcome(rawValue: "ok")
    /// Identify found someone; authenticate matched.
    public static let match = AuditOutcome(rawValue: "match")
    public static let noMatch = AuditOutcome(rawValue: "no-match")
    /// Refused with an error, not carried out.
    public static let refused = AuditOutcome(rawValue: "refused")
    /// Every outcome this build records, for checking a query.
    public static let known: [AuditOutcome] = [.ok, .match, .noMatch, .refused]

    public var description: String { self.rawValue }
}

/// Which audit entries to return.
public struct AuditQuery: Sendable, Hashable {
    /// Only entries concerning this identifier.
    public var identifier: String?
    /// Only entries at or after / before this time (µs since the epoch).
    public var since: Int64?
    public var until: Int64?
    /// Only entries with this outcome.
    public var outcome: AuditOutcome?
    /// At most this many, the newest.
    public var limit: Int

    public init(identifier: String? = nil, since: Int64? = nil, until: Int64? = nil, outcome: AuditOutcome? = nil, limit: Int = 100) {
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
    /// The stored size of the trail's blocks together: a bound on disk whatever the entries hold.
    public var maximumBytes: Int?

    public init(maximumEntries: Int? = 1_000_000, maximumAgeSeconds: Int64? = 365 * 86_400, maximumBytes: Int? = Self.defaultMaximumBytes) {
        self.maximumEntries = maximumEntries
        self.maximumAgeSeconds = maximumAgeSeconds
        self.maximumBytes = maximumBytes
    }

    /// 256 MiB: about three times what 1,000,000 entries of a typical size take (about 80 bytes each),
    /// so the count is what usually bounds the trail and the bytes only when entries are unusually
    /// large (long identifiers, identify results listing many people).
    public static let defaultMaximumBytes = 256 << 20
}
