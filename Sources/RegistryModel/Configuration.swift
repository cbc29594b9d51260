/// The three thresholds of a registry (README, engine behaviour). A score equal to a threshold passes.
public struct Thresholds: Sendable, Hashable {
    public var authentication: Float
    public var identification: Float
    public var autoEnrolment: Float

    public init(authentication: Float, identification: Float, autoEnrolment: Float) {
        self.authentication = authentication
        self.identification = identification
        self.autoEnrolment = autoEnrolment
    }

    /// The defaults: the algorithm's threshold for authentication and identification, and the
    /// identification threshold for auto-enrolment.
    public init(defaultsFor algorithm: Algorithm) {
        self.init(
            authentication: algorithm.defaultThreshold,
            identification: algorithm.defaultThreshold,
            autoEnrolment: algorithm.defaultThreshold)
    }
}

/// One registry of a gallery as configured: the algorithm and, optionally, its thresholds and the
/// capture quality it requires.
public struct RegistryConfiguration: Sendable, Hashable {
    /// The algorithm's version id.
    public var algorithm: UInt32
    /// Thresholds; `nil` takes the algorithm's defaults.
    public var thresholds: Thresholds?
    /// The capture quality score (0...1) a face must reach to be registered here; nil: no gate.
    public var minimumQuality: Float?
    /// The capture quality score a face must reach to be auto-enrolled here; nil: no gate.
    public var minimumAutoEnrolmentQuality: Float?

    public init(
        algorithm: UInt32, thresholds: Thresholds? = nil, minimumQuality: Float? = nil, minimumAutoEnrolmentQuality: Float? = nil
    ) {
        self.algorithm = algorithm
        self.thresholds = thresholds
        self.minimumQuality = minimumQuality
        self.minimumAutoEnrolmentQuality = minimumAutoEnrolmentQuality
    }
}

/// Which operations of a gallery need a live face (depth liveness, the capture-gates design).
public struct LivenessPolicy: Sendable, Hashable {
    public var authenticate: Bool
    public var identify: Bool
    public var register: Bool
    /// Also require two of the depth liveness design's optional checks: a non-planar surface (`depthDistribution`)
    /// and micro-movement across frames (`microMovement`). The depth liveness design's 3-of-5 rule alone accepts a
    /// photo held at about 26° or more and a static mask; strict mode refuses both.
    public var strict: Bool

    public init(authenticate: Bool = false, identify: Bool = false, register: Bool = false, strict: Bool = false) {
        self.authenticate = authenticate
        self.identify = identify
        self.register = register
        self.strict = strict
    }

    /// No operation requires liveness.
    public static let none = LivenessPolicy()
}

/// A gallery as configured: its name and its registries in priority order (first = preferred).
public struct GalleryConfiguration: Sendable, Hashable {
    public var name: String
    public var registries: [RegistryConfiguration]
    /// Which operations require a live face.
    public var liveness: LivenessPolicy
    /// k of the liveness profiles' thresholds (mean ± k·std), used when a profile is enrolled.
    public var livenessK: Float

    public init(
        name: String, registries: [RegistryConfiguration], liveness: LivenessPolicy = .none, livenessK: Float = Self.defaultLivenessK
    ) {
        self.name = name
        self.registries = registries
        self.liveness = liveness
        self.livenessK = livenessK
    }

    /// The name of the gallery that always exists.
    public static let defaultName = "default"

    /// The k of a gallery that names none: liveness ranges of mean ± 2 standard deviations.
    public static let defaultLivenessK: Float = 2.0

    /// The `default` gallery out of the box: one registry per built-in algorithm, newest model first —
    /// except `landmarks-aligned`, which came later: a gallery takes it by definition (with
    /// `landmarks` before it, to migrate; README), so the default gallery of every store, old or new,
    /// holds the same registries.
    public static let defaultGallery = GalleryConfiguration(
        name: Self.defaultName,
        registries: Algorithm.builtIn.filter { $0 != .alignedLandmarks }.map { RegistryConfiguration(algorithm: $0.version) })
}

extension GalleryConfiguration {
    /// A rule of gallery definitions that this one breaks: where (the registry's position in
    /// ``registries``, nil for the gallery itself; and the field) and what `define_gallery` answers.
    package struct Problem: Sendable {
        package var registry: Int?
        package var field: String
        package var error: RegistryError
    }

    /// Every rule a definition must keep that needs no store: a valid name, at least one registry,
    /// each registry's algorithm known and listed once, thresholds (given or the algorithm's
    /// defaults) within (0, 1], quality gates within [0, 1], liveness k within (0, maximumK]. The
    /// engine refuses a definition with the first problem (`define_gallery`, and the galleries of the
    /// configuration at start), and the configuration check lists them all: one set of rules.
    /// Registries a gallery may have.
    public static let maximumRegistries = 64

    package func problems(catalog: AlgorithmCatalog) -> [Problem] {
        var problems: [Problem] = []
        do throws(RegistryError) {
            try Names.validateGallery(self.name)
        } catch {
            problems.append(Problem(registry: nil, field: "name", error: error))
        }
        if self.registries.isEmpty {
            problems.append(
                Problem(registry: nil, field: "registries", error: .malformedRequest("gallery '\(self.name)' needs at least one registry")))
        }
        // The protocol's bound (RequestBounds), for a gallery of the configuration file too; the
        // stored gallery record counts its registries in 16 bits.
        if self.registries.count > Self.maximumRegistries {
            problems.append(
                Problem(
                    registry: nil, field: "registries",
                    error: .malformedRequest("gallery '\(self.name)' has \(self.registries.count) registries, at most \(Self.maximumRegistries)")))
        }
        var seen = Set<UInt32>()
        for (position, entry) in self.registries.enumerated() {
            let algorithm: Algorithm
            do throws(RegistryError) {
                algorithm = try catalog.algorithm(version: entry.algorithm)
            } catch {
                problems.append(Problem(registry: position, field: "algorithm", error: error))
                continue
            }
            if !seen.insert(entry.algorithm).inserted {
                problems.append(
                    Problem(registry: position, field: "algorithm", error: .malformedRequest("gallery '\(self.name)' lists \(algorithm) twice")))
            }
            let thresholds = entry.thresholds ?? Thresholds(defaultsFor: algorithm)
            for (field, value) in [
                ("authentication", thresholds.authentication), ("identification", thresholds.identification),
                ("autoEnrolment", thresholds.autoEnrolment),
            ] where !(value > 0 && value <= 1) {
                // 0 would let every pair "match", including landmark pairs that cannot be compared.
                problems.append(
                    Problem(
                        registry: position, field: field,
                        error: .malformedRequest("\(algorithm.name) \(field) threshold \(value) is outside (0, 1]")))
            }
            for (field, minimum) in [("minimumQuality", entry.minimumQuality), ("minimumAutoEnrolmentQuality", entry.minimumAutoEnrolmentQuality)] {
                if let minimum, !(0...1).contains(minimum) {
                    problems.append(
                        Problem(registry: position, field: field, error: .malformedRequest("\(algorithm.name) \(field) \(minimum) is outside [0, 1]"))
                    )
                }
            }
        }
        if !(self.livenessK > 0 && self.livenessK <= LivenessProfile.maximumK) {
            problems.append(
                Problem(
                    registry: nil, field: "livenessK",
                    error: .malformedRequest("gallery '\(self.name)' liveness k must be within (0, \(LivenessProfile.maximumK)]")))
        }
        return problems
    }
}

/// How the engine opens its store.
public struct EngineConfiguration: Sendable {
    /// Vector algorithms added to the built-in ones.
    public var algorithms: [Algorithm]
    /// How `default` is created when the store is new (an existing one keeps its stored definition).
    public var defaultGallery: GalleryConfiguration
    /// Initial LMDB map size in bytes; the map grows by itself.
    public var initialMapSize: Int
    /// Upper bound for the map; writes beyond it fail with `STORAGE_FULL`. For library users and tests:
    /// the daemon keeps the default (1 TiB), which its configuration file does not set.
    public var maximumMapSize: Int
    /// fsync every commit (acknowledged means on disk). Only benchmarks turn this off.
    public var durable: Bool
    /// Most operations that share one group commit.
    public var maximumBatch: Int
    /// How long the audit trail keeps entries.
    public var auditRetention: AuditRetention = AuditRetention()
    /// The key of templates at rest (32 bytes, or 64 hex characters): required to open an encrypted
    /// store, refused for an unencrypted store that holds templates (encrypt it with ``Engine/setEncryptionKey(_:)``).
    public var encryptionKey: [UInt8]?
    /// The fewest templates for which closing writes an index snapshot (`index.snapshot` in the data
    /// directory), which the next open maps instead of loading every payload. Below it a full load
    /// takes a fraction of a second, and every start reads and checks every payload. For tests and
    /// library users; the daemon keeps the default.
    public var snapshotMinimumTemplates: Int = 100_000
    /// Free space kept on the store's file system for the writes that free space (deletions, the
    /// audit trail, verify): below it, writes that add data are refused with `STORAGE_FULL` unless
    /// the store's own free pages can hold them. nil: 1% of the file system, within 1 MiB...256 MiB;
    /// 0: no reserve.
    public var storageReserveBytes: Int? = nil
    /// The most float32 row bytes a vector registry keeps in memory. A registry within it keeps its
    /// rows beside its int8 codes (an authentication or a rescored row costs no store read); a larger
    /// one keeps only its codes and reads the rows a scan rescores from the store, whose pages the
    /// kernel may evict (docs/scans.md, *Where the rows are*). The default keeps registries up to about
    /// 130,000 templates of 128 floats resident, and any million-template registry stored; 0: every
    /// vector registry reads its rows from the store.
    public var residentRowBytes: Int = 64 << 20
    /// Where backups go (the backup root): each is a new directory in it, named by the engine. nil:
    /// the data directory's path with `-backups` appended (`/var/lib/registryd` →
    /// `/var/lib/registryd-backups`). Created (0700) at the first backup when missing.
    public var backupDirectory: String? = nil
    /// Further directories a backup request may name instead of the root (absolute paths, compared
    /// as strings). No other directory is ever written.
    public var allowedBackupDirectories: [String] = []

    public init(
        algorithms: [Algorithm] = [],
        defaultGallery: GalleryConfiguration = .defaultGallery,
        initialMapSize: Int = 64 << 20,
        maximumMapSize: Int = 1 << 40,
        durable: Bool = true,
        maximumBatch: Int = 256
    ) {
        self.algorithms = algorithms
        self.defaultGallery = defaultGallery
        self.initialMapSize = initialMapSize
        self.maximumMapSize = maximumMapSize
        self.durable = durable
        self.maximumBatch = maximumBatch
    }
}

// The JSON form (registryctl --json; JSONEncoding.swift): the properties as they are.
extension Thresholds: Encodable {}
extension LivenessPolicy: Encodable {}
