import FoundationEssentials
import Glibc
import RegistryEngine
import RegistryModel

/// The daemon's configuration: a JSON file, every field optional, overridable by flags.
///
/// ```json
/// {
///   "socketPath": "run/registryd.sock",
///   "dataDirectory": "data",
///   "logLevel": "info",
///   "limits": { "maximumFrameBytes": 4194304, "maximumConnections": 256,
///               "idleTimeoutSeconds": 300, "maximumRequestsInFlight": 64, "eventLoops": 1 },
///   "algorithms": [ { "version": 5000, "name": "model512", "dimension": 512,
///                     "scoreFunction": "cosine", "threshold": 0.5 } ],
///   "galleries": [ { "name": "default", "livenessRequiredFor": ["authenticate"], "livenessK": 2.0,
///       "registries": [ { "algorithm": "arcface", "authentication": 0.6, "identification": 0.6,
///                         "autoEnrolment": 0.6, "minimumQuality": 0.6, "minimumAutoEnrolmentQuality": 0.6 } ] } ]
/// }
/// ```
///
/// Galleries listed here are created or reconfigured (registry order and thresholds) at start-up and
/// on SIGHUP; galleries not listed are left as they are in the store.
public struct ServerConfiguration: Sendable, Codable, Equatable {
    /// Connection limits.
    public struct Limits: Sendable, Codable, Equatable {
        /// Largest frame accepted, checked from the length prefix.
        public var maximumFrameBytes: Int = 4 << 20
        /// Connections served at once; more are told so and closed, unless one that is doing nothing
        /// (idle, or trickling a frame) can be closed to make room (see ``SocketServer``).
        public var maximumConnections: Int = 256
        /// Connections one user (peer uid) may hold at once, so that one misbehaving app cannot take
        /// every slot from the others (nil: a quarter of ``maximumConnections``, rounded up: it takes
        /// four users' worth of patient connections to fill the daemon, not two).
        public var maximumConnectionsPerUser: Int? = nil
        /// Slots only root and the daemon's own user may take (the operator's registryctl, the backup
        /// and metrics timers), so that other users together never hold every slot (nil: a sixteenth of
        /// ``maximumConnections``, at least 2; 0: none).
        public var reservedConnections: Int? = nil
        /// A connection with no request in progress that sends nothing for this long is closed (one
        /// waiting for the reply to its own long request is not idle).
        public var idleTimeoutSeconds: Int = 300
        /// A frame must arrive whole within this long of its first byte; a client trickling bytes to
        /// hold a connection slot is closed after it.
        public var frameDeadlineSeconds: Int = 10
        /// A frame in progress must arrive at least this fast (bytes per second, after its first
        /// second), as Apache's mod_reqtimeout `MinRate`: a client trickling bytes to hold a slot is
        /// closed within a couple of seconds rather than at the frame deadline. 0 turns it off.
        public var minimumFrameBytesPerSecond: Int = 1024
        /// Requests of one connection being processed at once; further frames wait unread.
        public var maximumRequestsInFlight: Int = 64
        /// Reply bytes a connection may have waiting to be written before the daemon stops reading its
        /// requests (a client that pipelines and never reads is slowed, not buffered without end).
        public var maximumUnwrittenReplyBytes: Int = 1 << 20
        /// Request and reply bytes held across all connections (read but not answered, answered but
        /// not yet written); above it, connections already holding bytes are not read from.
        public var maximumBufferedBytes: Int = 256 << 20
        /// After SIGTERM, how long requests already started get to finish and their replies to be
        /// written before the remaining connections are closed. Keep it below the unit's
        /// TimeoutStopSec (45 s), after which systemd sends SIGKILL.
        public var drainDeadlineSeconds: Int = 30
        /// Free bytes kept on the store's file system for deletions: below it, writes that add data
        /// are refused with `STORAGE_FULL` while deletions, the audit trail and verify go on (nil: 1%
        /// of the file system, within 1 MiB...256 MiB; 0: no reserve).
        public var storageReserveBytes: Int? = nil
        /// The fewest templates for which a clean stop writes the index snapshot that the next start
        /// maps instead of loading every payload (docs/storage.md). Below the default a full load takes
        /// well under a second; a lower value makes small stores write it too (the power-loss harness
        /// cuts inside its writes that way).
        public var snapshotMinimumTemplates: Int = EngineConfiguration().snapshotMinimumTemplates
        /// The most float32 row bytes a vector registry keeps in memory beside its codes; a larger one
        /// reads the rows it rescores from the store (docs/scans.md). 0: every one reads them from the
        /// store (the least memory; authentications then read the store).
        public var residentRowBytes: Int = EngineConfiguration().residentRowBytes
        /// Threads serving the socket (nil: one fewer than the cores, at least one). Clients of a Unix
        /// socket run on the same machine: measured on 2 cores with 50 connections, one event loop
        /// answered 90-96k authentications/s and two 79-86k (fewer context switches, and the other
        /// core is left to the clients, the scans and the writer).
        public var eventLoops: Int? = nil

        /// The per-user connection limit in force.
        public var resolvedMaximumConnectionsPerUser: Int {
            self.maximumConnectionsPerUser ?? (self.maximumConnections + 3) / 4
        }

        /// The slots kept for root and the daemon's user, in force.
        public var resolvedReservedConnections: Int {
            self.reservedConnections ?? min(max(2, self.maximumConnections / 16), max(0, self.maximumConnections - 1))
        }

        /// The event-loop thread count to use on this machine.
        public var resolvedEventLoops: Int { self.eventLoops ?? max(1, UsableCPUs.count - 1) }

        /// The keys of `limits` in the file (``ConfigurationCheck`` knows these and no others).
        public enum CodingKeys: String, CodingKey, CaseIterable {
            case maximumFrameBytes, maximumConnections, maximumConnectionsPerUser, reservedConnections, idleTimeoutSeconds, frameDeadlineSeconds
            case minimumFrameBytesPerSecond, maximumRequestsInFlight, maximumUnwrittenReplyBytes, maximumBufferedBytes
            case drainDeadlineSeconds, storageReserveBytes, snapshotMinimumTemplates, residentRowBytes, eventLoops
        }

        public init() {}

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let defaults = Limits()
            self.maximumFrameBytes = try container.decodeIfPresent(Int.self, forKey: .maximumFrameBytes) ?? defaults.maximumFrameBytes
            self.maximumConnections = try container.decodeIfPresent(Int.self, forKey: .maximumConnections) ?? defaults.maximumConnections
            self.maximumConnectionsPerUser = try container.decodeIfPresent(Int.self, forKey: .maximumConnectionsPerUser)
            self.reservedConnections = try container.decodeIfPresent(Int.self, forKey: .reservedConnections)
            self.minimumFrameBytesPerSecond =
                try container.decodeIfPresent(Int.self, forKey: .minimumFrameBytesPerSecond) ?? defaults.minimumFrameBytesPerSecond
            self.idleTimeoutSeconds = try container.decodeIfPresent(Int.self, forKey: .idleTimeoutSeconds) ?? defaults.idleTimeoutSeconds
            self.maximumRequestsInFlight =
                try container.decodeIfPresent(Int.self, forKey: .maximumRequestsInFlight) ?? defaults.maximumRequestsInFlight
            self.frameDeadlineSeconds = try container.decodeIfPresent(Int.self, forKey: .frameDeadlineSeconds) ?? defaults.frameDeadlineSeconds
            self.maximumUnwrittenReplyBytes =
                try container.decodeIfPresent(Int.self, forKey: .maximumUnwrittenReplyBytes) ?? defaults.maximumUnwrittenReplyBytes
            self.maximumBufferedBytes = try container.decodeIfPresent(Int.self, forKey: .maximumBufferedBytes) ?? defaults.maximumBufferedBytes
            self.drainDeadlineSeconds = try container.decodeIfPresent(Int.self, forKey: .drainDeadlineSeconds) ?? defaults.drainDeadlineSeconds
            self.eventLoops = try container.decodeIfPresent(Int.self, forKey: .eventLoops)
            self.storageReserveBytes = try container.decodeIfPresent(Int.self, forKey: .storageReserveBytes)
            self.snapshotMinimumTemplates =
                try container.decodeIfPresent(Int.self, forKey: .snapshotMinimumTemplates) ?? defaults.snapshotMinimumTemplates
            self.residentRowBytes = try container.decodeIfPresent(Int.self, forKey: .residentRowBytes) ?? defaults.residentRowBytes
        }
    }

    /// A vector algorithm added by configuration.
    public struct AlgorithmEntry: Sendable, Codable, Equatable {
        public var version: UInt32
        public var name: String
        public var dimension: Int
        public var scoreFunction: String
        public var threshold: Float

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case version, name, dimension, scoreFunction, threshold
        }
    }

    /// One registry of a configured gallery; thresholds default to the algorithm's.
    public struct RegistryEntry: Sendable, Codable, Equatable {
        /// The algorithm's name (`arcface`) or version (`"24"` or 24).
        public var algorithm: String
        public var authentication: Float?
        public var identification: Float?
        public var autoEnrolment: Float?
        /// Capture quality (0...1) required to register / to auto-enrol into this registry.
        public var minimumQuality: Float?
        public var minimumAutoEnrolmentQuality: Float?

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case algorithm, authentication, identification, autoEnrolment, minimumQuality, minimumAutoEnrolmentQuality
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let number = try? container.decode(UInt32.self, forKey: .algorithm) {
                self.algorithm = String(number)
            } else {
                self.algorithm = try container.decode(String.self, forKey: .algorithm)
            }
            self.authentication = try container.decodeIfPresent(Float.self, forKey: .authentication)
            self.identification = try container.decodeIfPresent(Float.self, forKey: .identification)
            self.autoEnrolment = try container.decodeIfPresent(Float.self, forKey: .autoEnrolment)
            self.minimumQuality = try container.decodeIfPresent(Float.self, forKey: .minimumQuality)
            self.minimumAutoEnrolmentQuality = try container.decodeIfPresent(Float.self, forKey: .minimumAutoEnrolmentQuality)
        }
    }

    public struct GalleryEntry: Sendable, Codable, Equatable {
        public var name: String
        public var registries: [RegistryEntry]
        /// Operations that require a live face: any of "authenticate", "identify", "register".
        public var livenessRequiredFor: [String]?
        /// k of the gallery's liveness profiles (mean ± k·std); default 2.0.
        public var livenessK: Float?
        /// Also require the non-planar and micro-movement liveness checks (default false).
        public var livenessStrict: Bool?

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case name, registries, livenessRequiredFor, livenessK, livenessStrict
        }
    }

    public var socketPath: String = "run/registryd.sock"
    public var dataDirectory: String = "data"
    public var logLevel: String = "info"
    public var limits = Limits()
    public var algorithms: [AlgorithmEntry] = []
    public var galleries: [GalleryEntry] = []
    /// Per gallery name (or "*"), per operation class (identify, enrol, admin): the principals
    /// allowed (`uid:N`, `gid:N`, `user:NAME`, `group:NAME`). Absent: the default policy (root, the
    /// daemon's user and group registryd-admin everything; group registryd identify and enrol in default).
    public var access: [String: [String: [String]]]?
    /// Audit trail retention: `maximumEntries` (default 1,000,000), `maximumAgeDays` (default 365) and
    /// `maximumBytes` (default 256 MiB, at least 1 MiB).
    public var audit: AuditEntryRetention?
    /// Where backups go (`backup.directory`, default: the data directory's path with `-backups`
    /// appended) and which other directories a backup request may name (`backup.allowedDirectories`).
    public var backup: BackupEntry?
    /// The file holding the key of templates at rest (32 bytes or 64 hex characters). Absent: the
    /// systemd credential `store-key` ($CREDENTIALS_DIRECTORY/store-key) when there is one, else none.
    public var keyFile: String?
    /// Fleet mode (docs/fleet.md): absent, the daemon is standalone.
    public var fleet: FleetEntry?

    /// The `fleet` section: where the fleet's PostgreSQL is, this node's name, the fleet key and the
    /// database password (files; or the systemd credentials `fleet-key` and `fleet-password`).
    public struct FleetEntry: Sendable, Codable, Equatable {
        /// `postgresql://USER@HOST:PORT/DB`, or a Unix socket directory (`?host=/run/postgresql`).
        public var url: String
        /// This node's name in the fleet: 1 to 64 letters, digits, `.`, `_` or `-`, unique in the fleet.
        public var node: String
        public var keyFile: String?
        public var passwordFile: String?
        /// How often the node looks whether a snapshot is due and compacts the log (default 60).
        public var compactionSeconds: Int?
        /// How long the log waits for a node that has not applied it (default 7 days): entries
        /// older than this, and nodes not seen for this long, no longer hold the log's trimming back
        /// (such a node loads the newest snapshot when it comes back).
        public var retentionSeconds: Int?

        public init(
            url: String, node: String, keyFile: String? = nil, passwordFile: String? = nil, compactionSeconds: Int? = nil,
            retentionSeconds: Int? = nil
        ) {
            self.url = url
            self.node = node
            self.keyFile = keyFile
            self.passwordFile = passwordFile
            self.compactionSeconds = compactionSeconds
            self.retentionSeconds = retentionSeconds
        }

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case url, node, keyFile, passwordFile, compactionSeconds, retentionSeconds
        }
    }

    /// The longest audit retention `validated()` accepts: 100 years.
    static let maximumAuditAgeDays = 36_500

    public struct AuditEntryRetention: Sendable, Codable, Equatable {
        public var maximumEntries: Int?
        public var maximumAgeDays: Int?
        public var maximumBytes: Int?

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case maximumEntries, maximumAgeDays, maximumBytes
        }
    }

    /// The `backup` section. A backup request may name no directory but these: the daemon writes
    /// the copy as itself, so it decides where (docs/security.md).
    public struct BackupEntry: Sendable, Codable, Equatable {
        /// The backup root: where a request that names no directory has its copy made (relative: to
        /// the daemon's working directory, as `dataDirectory`). Created (0700) when missing.
        public var directory: String?
        /// Further directories, absolute, that a request may name; compared with the request as
        /// strings (after trailing slashes), never resolved.
        public var allowedDirectories: [String]?

        public init(directory: String? = nil, allowedDirectories: [String]? = nil) {
            self.directory = directory
            self.allowedDirectories = allowedDirectories
        }

        public enum CodingKeys: String, CodingKey, CaseIterable {
            case directory, allowedDirectories
        }
    }

    /// The keys of the file's top level. Each type of the file spells out its keys (`CodingKeys`,
    /// `CaseIterable`): the decoder reads them and ``ConfigurationCheck`` takes them as the keys it
    /// knows, so a setting added to a type is known to the check without a second list
    /// (ConfigurationTests decodes with every key present and compares).
    public enum CodingKeys: String, CodingKey, CaseIterable {
        case socketPath, dataDirectory, logLevel, limits, algorithms, galleries, access, audit, backup, keyFile, fleet
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = ServerConfiguration()
        self.socketPath = try container.decodeIfPresent(String.self, forKey: .socketPath) ?? defaults.socketPath
        self.dataDirectory = try container.decodeIfPresent(String.self, forKey: .dataDirectory) ?? defaults.dataDirectory
        self.logLevel = try container.decodeIfPresent(String.self, forKey: .logLevel) ?? defaults.logLevel
        self.limits = try container.decodeIfPresent(Limits.self, forKey: .limits) ?? defaults.limits
        self.algorithms = try container.decodeIfPresent([AlgorithmEntry].self, forKey: .algorithms) ?? []
        self.galleries = try container.decodeIfPresent([GalleryEntry].self, forKey: .galleries) ?? []
        self.access = try container.decodeIfPresent([String: [String: [String]]].self, forKey: .access)
        self.audit = try container.decodeIfPresent(AuditEntryRetention.self, forKey: .audit)
        self.backup = try container.decodeIfPresent(BackupEntry.self, forKey: .backup)
        self.keyFile = try container.decodeIfPresent(String.self, forKey: .keyFile)
        self.fleet = try container.decodeIfPresent(FleetEntry.self, forKey: .fleet)
    }

    /// Reads a configuration file.
    /// - Throws: ``ConfigurationError`` naming the file and the problem.
    public static func load(path: String) throws(ConfigurationError) -> ServerConfiguration {
        try Self.decode(Data(try Self.readFile(path)), from: path)
    }

    /// Decodes a configuration file's contents (`path` names it in messages). Every key must be
    /// known: a misspelt one is reported (all of them at once), not ignored.
    /// - Throws: ``ConfigurationError``, one line per problem.
    public static func decode(_ data: Data, from path: String) throws(ConfigurationError) -> ServerConfiguration {
        let unknown = try ConfigurationCheck.unknownKeys(in: data, file: path)
        guard unknown.isEmpty else { throw ConfigurationError(unknown.joined(separator: "\n")) }
        do {
            // A gallery listed twice decodes: `validated()` reports it with every other problem.
            return try JSONDecoder().decode(ServerConfiguration.self, from: data)
        } catch {
            // Every wrong value, not only the one the decoder stopped at.
            let problems = ConfigurationCheck.typeProblems(in: data, as: ServerConfiguration.self, file: path)
            throw ConfigurationError(problems.isEmpty ? ConfigurationCheck.describe(error, file: path) : problems.joined(separator: "\n"))
        }
    }

    /// The largest configuration file read (a configuration is a few kilobytes).
    static let maximumFileBytes = 16 << 20

    /// A regular file's bytes (errors as the system names them: "No such file or directory").
    static func readFile(_ path: String) throws(ConfigurationError) -> [UInt8] {
        switch Self.readRegularFile(path, maximumBytes: Self.maximumFileBytes) {
        case .success(let bytes): return bytes
        case .failure(.system(let reason)): throw ConfigurationError("cannot read \(path): \(reason)")
        case .failure(.notRegular): throw ConfigurationError("cannot read \(path): not a regular file")
        case .failure(.tooLarge): throw ConfigurationError("cannot read \(path): larger than \(Self.maximumFileBytes >> 20) MiB")
        }
    }

    /// Checks the limits, and turns algorithms and galleries into the engine's types: the checks
    /// of the file that the store's own (at open) would otherwise make, so that a start refuses what
    /// the store would, before binding or opening anything.
    /// - Throws: ``ConfigurationError`` listing every problem found, one per line, each with its place
    ///   in the file (`galleries[1].registries[0].authentication: …`).
    public func validated() throws(ConfigurationError) -> (engine: EngineConfiguration, galleries: [GalleryConfiguration]) {
        var problems: [String] = []
        func require(_ condition: Bool, _ problem: @autoclosure () -> String) {
            if !condition { problems.append(problem()) }
        }
        let limits = self.limits
        require(
            limits.maximumFrameBytes >= 64 && limits.maximumFrameBytes <= Int(Int32.max), "limits.maximumFrameBytes must be within 64...\(Int32.max)")
        require(limits.maximumConnections >= 1, "limits.maximumConnections must be at least 1")
        require(
            limits.maximumConnectionsPerUser.map { $0 >= 1 && $0 <= limits.maximumConnections } ?? true,
            "limits.maximumConnectionsPerUser must be within 1...limits.maximumConnections")
        require(
            limits.reservedConnections.map { $0 >= 0 && $0 < limits.maximumConnections } ?? true,
            "limits.reservedConnections must be within 0...limits.maximumConnections - 1 (other users need one slot)")
        require(limits.minimumFrameBytesPerSecond >= 0, "limits.minimumFrameBytesPerSecond must not be negative")
        require(limits.idleTimeoutSeconds >= 1, "limits.idleTimeoutSeconds must be at least 1")
        require(limits.maximumRequestsInFlight >= 1, "limits.maximumRequestsInFlight must be at least 1")
        require(limits.frameDeadlineSeconds >= 1, "limits.frameDeadlineSeconds must be at least 1")
        require(limits.maximumUnwrittenReplyBytes >= 1024, "limits.maximumUnwrittenReplyBytes must be at least 1024")
        require(limits.maximumBufferedBytes >= limits.maximumFrameBytes, "limits.maximumBufferedBytes must be at least limits.maximumFrameBytes")
        require(limits.drainDeadlineSeconds >= 1, "limits.drainDeadlineSeconds must be at least 1")
        require((limits.storageReserveBytes ?? 0) >= 0, "limits.storageReserveBytes must not be negative")
        require(limits.snapshotMinimumTemplates >= 1, "limits.snapshotMinimumTemplates must be at least 1")
        require(limits.residentRowBytes >= 0, "limits.residentRowBytes must not be negative")
        require((1...256).contains(limits.resolvedEventLoops), "limits.eventLoops must be within 1...256")
        var algorithms: [Algorithm] = []
        for (index, entry) in self.algorithms.enumerated() {
            guard let scoreFunction = ScoreFunction(rawValue: entry.scoreFunction) else {
                problems.append(
                    "algorithms[\(index)].scoreFunction: algorithm \(entry.name): scoreFunction must be one of "
                        + ScoreFunction.allCases.map(\.rawValue).joined(separator: ", "))
                continue
            }
            algorithms.append(
                Algorithm(
                    version: entry.version, name: entry.name, kind: .vector(dimension: entry.dimension),
                    scoreFunction: scoreFunction, defaultThreshold: entry.threshold))
        }
        let catalog: AlgorithmCatalog
        do {
            catalog = try AlgorithmCatalog(configured: algorithms)
        } catch {
            problems.append("algorithms: \(error.message)")
            // The galleries are still checked, against the built-in algorithms (which always load).
            catalog = try! AlgorithmCatalog(configured: [])
        }
        var galleries: [GalleryConfiguration] = []
        // Where each name was first listed: a second listing would define the gallery twice over.
        var listed: [String: Int] = [:]
        for (index, gallery) in self.galleries.enumerated() {
            if let first = listed[gallery.name] {
                problems.append("galleries[\(index)].name: gallery '\(gallery.name)' is listed twice (first as galleries[\(first)])")
            } else {
                listed[gallery.name] = index
            }
            if let configured = Self.checked(gallery, at: "galleries[\(index)]", catalog: catalog, problems: &problems) {
                galleries.append(configured)
            }
        }
        var engine = EngineConfiguration(algorithms: algorithms)
        engine.storageReserveBytes = limits.storageReserveBytes
        engine.snapshotMinimumTemplates = limits.snapshotMinimumTemplates
        engine.residentRowBytes = limits.residentRowBytes
        let credential = getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) + "/store-key" }
        if let path = self.keyFile ?? credential.flatMap({ Glibc.access($0, R_OK) == 0 ? $0 : nil }) {
            do throws(RegistryError) {
                // Parsed here, not first when the store opens: --check-config must refuse every key
                // a start would, and a start must refuse it before it creates anything.
                var material = try Self.readKey(path: path)
                defer { KeyMaterial.wipe(&material) }
                do {
                    engine.encryptionKey = try KeyMaterial.keyBytes(material)
                } catch {
                    throw RegistryError.malformedRequest("the key file \(path) holds \(material.count) bytes that are not a key: \(error.message)")
                }
            } catch {
                problems.append("\(self.keyFile == nil ? "the store-key credential" : "keyFile"): \(error.message)")
            }
        }
        if let audit = self.audit {
            if let entries = audit.maximumEntries, entries < 1 {
                problems.append("audit.maximumEntries must be at least 1")
            }
            // Bounded so that the age in seconds cannot overflow (and a century is retention enough).
            if let days = audit.maximumAgeDays, !(1...Self.maximumAuditAgeDays).contains(days) {
                problems.append("audit.maximumAgeDays must be within 1...\(Self.maximumAuditAgeDays)")
            }
            // At least one full block of entries of the largest size, so that retention never removes
            // the block it has just written.
            if let bytes = audit.maximumBytes, bytes < 1 << 20 {
                problems.append("audit.maximumBytes must be at least 1048576 (1 MiB)")
            }
            let defaults = AuditRetention()
            let days = audit.maximumAgeDays.flatMap { (1...Self.maximumAuditAgeDays).contains($0) ? $0 : nil }
            engine.auditRetention = AuditRetention(
                maximumEntries: audit.maximumEntries ?? defaults.maximumEntries,
                maximumAgeSeconds: days.map { Int64($0) * 86_400 } ?? defaults.maximumAgeSeconds,
                maximumBytes: audit.maximumBytes ?? defaults.maximumBytes)
        }
        Self.checkBackup(self.backup, dataDirectory: self.dataDirectory, into: &engine, problems: &problems)
        if let configuredDefault = galleries.first(where: { $0.name == GalleryConfiguration.defaultName }) {
            engine.defaultGallery = configuredDefault
        }
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "\n")) }
        return (engine, galleries)
    }

    /// ``validated()``, the access policy, and what the process must be allowed at start (files for
    /// `maximumConnections`): every check the daemon makes before it binds the socket and opens the
    /// store, all problems at once. `registryd --check-config` and a real start both run it.
    public func checkedForStart() throws(ConfigurationError) -> (engine: EngineConfiguration, galleries: [GalleryConfiguration]) {
        var problems: [String] = []
        var result: (engine: EngineConfiguration, galleries: [GalleryConfiguration])?
        do {
            result = try self.validated()
        } catch {
            problems.append(error.description)
        }
        do {
            _ = try AccessPolicy(self.access)
        } catch {
            problems.append(error.description)
        }
        if self.limits.maximumConnections >= 1, let problem = FileDescriptorLimit.problem(connections: self.limits.maximumConnections) {
            problems.append(problem)
        }
        do {
            _ = try self.fleetSettings()
        } catch {
            problems.append(error.description)
        }
        guard problems.isEmpty, let result else { throw ConfigurationError(problems.joined(separator: "\n")) }
        return result
    }

    /// The `backup` section, checked and handed to the engine. The root may be relative (to the
    /// working directory, as `dataDirectory` is); an allowed directory must be absolute, as requests
    /// name it so. None may be the data directory or inside it: a copy there would be taken for part
    /// of the store, and removed or overwritten with it.
    private static func checkBackup(
        _ backup: BackupEntry?, dataDirectory: String, into engine: inout EngineConfiguration, problems: inout [String]
    ) {
        guard let backup else { return }
        let data = Self.comparable(dataDirectory)
        func check(_ path: String, at place: String) -> Bool {
            guard !path.isEmpty else {
                problems.append("\(place) must not be empty")
                return false
            }
            let compared = Self.comparable(path)
            guard compared != data && !compared.hasPrefix(data == "/" ? "/" : data + "/") else {
                problems.append("\(place): \(path) is the data directory or inside it; backups must be kept apart from the store")
                return false
            }
            return true
        }
        if let directory = backup.directory, check(directory, at: "backup.directory") {
            engine.backupDirectory = directory
        }
        var seen = Set<String>()
        for (index, directory) in (backup.allowedDirectories ?? []).enumerated() {
            let place = "backup.allowedDirectories[\(index)]"
            guard check(directory, at: place) else { continue }
            guard directory.hasPrefix("/") else {
                problems.append("\(place): \(directory) must be an absolute path (requests name it so)")
                continue
            }
            if seen.insert(Self.comparable(directory)).inserted { engine.allowedBackupDirectories.append(directory) }
        }
    }

    /// A path made absolute against the working directory, without trailing slashes, for comparing
    /// configured directories with one another (not resolved: no links followed).
    private static func comparable(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        while trimmed.hasPrefix("./") { trimmed = trimmed.dropFirst(2) }
        guard !trimmed.hasPrefix("/") else { return String(trimmed) }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return String(trimmed) }
        let cwd = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return trimmed == "." ? cwd : (cwd == "/" ? "" : cwd) + "/" + trimmed
    }

    /// One gallery of the file as the engine takes it, or nil with its problems added: its
    /// algorithms named as the file may name them (name or version), its liveness settings, and then
    /// the rules the engine applies to every definition (``GalleryConfiguration/problems(catalog:)``),
    /// each placed in the file.
    private static func checked(
        _ gallery: GalleryEntry, at path: String, catalog: AlgorithmCatalog, problems: inout [String]
    ) -> GalleryConfiguration? {
        let before = problems.count
        var registries: [RegistryConfiguration] = []
        // The file's position of each registry kept in `registries`.
        var positions: [Int] = []
        for (position, entry) in gallery.registries.enumerated() {
            guard
                let algorithm = catalog.algorithm(named: entry.algorithm)
                    ?? UInt32(entry.algorithm).flatMap({ try? catalog.algorithm(version: $0) })
            else {
                problems.append("\(path).registries[\(position)].algorithm: gallery \(gallery.name): unknown algorithm '\(entry.algorithm)'")
                continue
            }
            let defaults = Thresholds(defaultsFor: algorithm)
            let identification = entry.identification ?? defaults.identification
            let thresholds = Thresholds(
                authentication: entry.authentication ?? defaults.authentication, identification: identification,
                autoEnrolment: entry.autoEnrolment ?? identification)
            registries.append(
                RegistryConfiguration(
                    algorithm: algorithm.version, thresholds: thresholds, minimumQuality: entry.minimumQuality,
                    minimumAutoEnrolmentQuality: entry.minimumAutoEnrolmentQuality))
            positions.append(position)
        }
        var liveness = LivenessPolicy(strict: gallery.livenessStrict ?? false)
        for operation in gallery.livenessRequiredFor ?? [] {
            switch operation {
            case "authenticate": liveness.authenticate = true
            case "identify": liveness.identify = true
            case "register": liveness.register = true
            default:
                problems.append(
                    "\(path).livenessRequiredFor: gallery \(gallery.name): livenessRequiredFor takes authenticate, identify and register, not '\(operation)'"
                )
            }
        }
        let configuration = GalleryConfiguration(
            name: gallery.name, registries: registries, liveness: liveness, livenessK: gallery.livenessK ?? GalleryConfiguration.defaultLivenessK)
        // A gallery whose registries all name unknown algorithms has registries in the file.
        for problem in configuration.problems(catalog: catalog) where !(problem.field == "registries" && !gallery.registries.isEmpty) {
            let place = problem.registry.map { "\(path).registries[\(positions[$0])]" } ?? path
            problems.append("\(place).\(problem.field): \(problem.error.message)")
        }
        guard problems.count == before else { return nil }
        return configuration
    }
}

extension ServerConfiguration {
    /// Reads key material from a file (the daemon's own; never logged).
    ///
    /// Only a regular file is read, and it is opened non-blocking: a FIFO, a device or a socket named
    /// as the key file is refused at once instead of blocking the thread that reads it (a FIFO with
    /// no writer would block `open` and `read` forever).
    /// - Throws: ``RegistryError`` (`malformedRequest`) naming the file and the problem.
    public static func readKey(path: String) throws(RegistryError) -> [UInt8] {
        guard !path.isEmpty else { throw .malformedRequest("the key file's path is empty") }
        // A key is 32 bytes or 64 hexadecimal characters (and a newline); read a little more so an
        // over-long file is reported as such by the key parser rather than silently cut.
        switch Self.readRegularFile(path, maximumBytes: 256, truncating: true) {
        case .success(let bytes): return bytes
        case .failure(.system(let reason)): throw .malformedRequest("cannot read the key file \(path): \(reason)")
        // (tooLarge cannot happen: the read is truncated.)
        case .failure(.notRegular), .failure(.tooLarge): throw .malformedRequest("the key file \(path) is not a regular file")
        }
    }

    /// The key a `set_encryption_key` request names, read for a client: the path must be absolute,
    /// name a regular file itself (not through a symbolic link), owned by root or the daemon's user
    /// and readable by its owner alone — a key others can read is no secret, and the daemon must not
    /// take any 32-byte file it can read as a key. Every reason for refusing gets the same answer, so
    /// that the request cannot tell a client which files exist or what the daemon may read; the
    /// precise reason goes to the daemon's log (`reason`).
    public static func readRequestedKey(path: String, reason: (String) -> Void) throws(RegistryError) -> [UInt8] {
        let refusal = RegistryError.malformedRequest(
            "the key file cannot be used: name an absolute path to a regular file (not a symbolic link) owned by root or the daemon's "
                + "user and readable by its owner alone, holding 32 bytes or 64 hexadecimal characters")
        guard path.hasPrefix("/") else {
            reason("not an absolute path")
            throw refusal
        }
        let file = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW)
        guard file >= 0 else {
            reason(String(cString: strerror(errno)))
            throw refusal
        }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            reason("not a regular file")
            throw refusal
        }
        guard info.st_uid == 0 || info.st_uid == geteuid(), info.st_mode & 0o077 == 0 else {
            reason("owned by uid \(info.st_uid) with mode \(String(info.st_mode & 0o777, radix: 8)): not private to root or the daemon's user")
            throw refusal
        }
        guard info.st_size <= 256 else {
            reason("\(info.st_size) bytes: longer than any key")
            throw refusal
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress! + count, $0.count - count) }
            if read < 0 && errno == EINTR { continue }
            guard read > 0 else { break }
            count += read
        }
        guard count == bytes.count else {
            KeyMaterial.wipe(&bytes)
            reason("read \(count) of \(bytes.count) bytes")
            throw refusal
        }
        return bytes
    }

    /// Why a file could not be read.
    enum FileProblem: Error {
        case system(String)
        case notRegular
        case tooLarge
    }

    /// The bytes of a regular file, opened non-blocking: a FIFO, a device or a socket named as the
    /// file is refused at once instead of blocking the thread that reads it (a FIFO with no writer
    /// would block `open` and `read` forever). Above `maximumBytes`: `tooLarge`, or the first
    /// `maximumBytes` bytes when `truncating`.
    static func readRegularFile(_ path: String, maximumBytes: Int, truncating: Bool = false) -> Result<[UInt8], FileProblem> {
        let file = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard file >= 0 else { return .failure(.system(String(cString: strerror(errno)))) }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return .failure(.notRegular) }
        guard truncating || Int(info.st_size) <= maximumBytes else { return .failure(.tooLarge) }
        var bytes = [UInt8](repeating: 0, count: truncating ? maximumBytes : Int(info.st_size))
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress! + count, $0.count - count) }
            if read < 0 && errno == EINTR { continue }
            guard read >= 0 else { return .failure(.system(String(cString: strerror(errno)))) }
            if read == 0 { break }
            count += read
        }
        return .success(Array(bytes.prefix(count)))
    }
}

/// A configuration that cannot be used, with what is wrong.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
