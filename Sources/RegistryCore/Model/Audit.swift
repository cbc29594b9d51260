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
    public static func now() -> Int64 { Store.now() }

    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        writer.append(self.time)
        writer.append(self.uid)
        writer.append(self.pid)
        writer.append(string: self.operation)
        writer.append(string: self.gallery)
        writer.append(UInt16(self.identifiers.count))
        for identifier in self.identifiers { writer.append(string: identifier) }
        writer.append(string: self.outcome)
        writer.append(self.score ?? .nan)
        writer.append(string: self.errorCode ?? "")
        return writer.bytes
    }

    init(decoding bytes: UnsafeRawBufferPointer) throws(StoreCorruption) {
        var reader = ByteReader(bytes)
        do {
            self.time = try reader.read()
            self.uid = try reader.read()
            self.pid = try reader.read()
            self.operation = try reader.readString()
            self.gallery = try reader.readString()
            let count: UInt16 = try reader.read()
            self.identifiers = []
            for _ in 0..<count { self.identifiers.append(try reader.readString()) }
            self.outcome = try reader.readString()
            let score = try reader.read(Float.self)
            self.score = score.isNaN ? nil : score
            let code = try reader.readString()
            self.errorCode = code.isEmpty ? nil : code
        } catch {
            throw StoreCorruption("truncated audit entry")
        }
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
