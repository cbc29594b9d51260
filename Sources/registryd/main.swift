// registryd: the face template registry daemon. Thin: parsing flags and logging setup; the daemon
// itself is RegistryServer.RegistryDaemon.
import ArgumentParser
import Glibc
import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryServer

@main
struct RegistryDaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registryd",
        abstract: "Serve the face template registry on a Unix domain socket.",
        discussion: """
            Reads the JSON configuration file given by --config (every field optional; the \
            installed service's is /etc/registryd/registryd.json, the source tree's example \
            config/registryd.json), then applies the flags on top. SIGTERM and SIGINT stop \
            accepting connections and reading requests, answer every request already read (those \
            not yet started with SHUTTING_DOWN) within the drain deadline, and close the store. \
            SIGHUP re-reads the configuration file and applies its access policy and gallery \
            definitions (registry order, thresholds, capture gates), all of it or, when any part \
            is refused, none.

            EXIT STATUS
              0   a clean stop (SIGTERM, SIGINT); the configuration, store or backup
                  checked is sound; the restore succeeded
              1   the daemon could not start or stopped on an error; the
                  configuration, store or backup checked has problems; the restore
                  failed
              64  usage error (bad arguments or options)
            """,
        version: RegistryVersion.current)

    @Option(name: .long, help: ArgumentHelp("The JSON configuration file.", valueName: "file"), completion: .file())
    var config: String?

    @Option(name: .long, help: ArgumentHelp("The Unix socket path (default: run/registryd.sock).", valueName: "path"), completion: .file())
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("The LMDB data directory (default: data).", valueName: "dir"), completion: .directory)
    var data: String?

    @Option(
        name: .long,
        help: ArgumentHelp("The key of templates at rest (32 bytes or 64 hex characters; default: the store-key credential).", valueName: "file"),
        completion: .file())
    var keyFile: String?

    @Option(
        name: .long, help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (default: info).", valueName: "level"),
        completion: .list(["trace", "debug", "info", "notice", "warning", "error", "critical"]))
    var logLevel: String?

    @Option(name: .long, help: ArgumentHelp("The largest frame accepted, in bytes (default: 4194304).", valueName: "bytes"))
    var maximumFrameBytes: Int?

    @Option(name: .long, help: ArgumentHelp("Connections served at once (default: 256).", valueName: "count"))
    var maximumConnections: Int?

    @Option(
        name: .long,
        help: ArgumentHelp("Connections one user (peer uid) may hold at once (default: a quarter of the maximum).", valueName: "count"))
    var maximumConnectionsPerUser: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Bytes per second a frame in progress must arrive at after its first second; 0: no minimum (default: 1024).", valueName: "bytes"))
    var minimumFrameRate: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Free bytes kept on the store's file system for deletions; below it, writes that add data are refused \
            (default: 1% of the file system, 1-256 MiB; 0: none).
            """,
            valueName: "bytes"))
    var storageReserve: Int?

    @Option(
        name: .long,
        help: ArgumentHelp("The fewest templates for which a clean stop writes the index snapshot (default: 100000).", valueName: "count"))
    var snapshotMinimumTemplates: Int?

    @Option(name: .long, help: ArgumentHelp("Seconds a connection with no request in progress may stay silent (default: 300).", valueName: "seconds"))
    var idleTimeout: Int?

    @Option(
        name: .long, help: ArgumentHelp("Seconds a frame may take to arrive whole once its first byte is in (default: 10).", valueName: "seconds"))
    var frameDeadline: Int?

    @Option(name: .long, help: ArgumentHelp("Seconds requests in flight get to finish after SIGTERM (default: 30).", valueName: "seconds"))
    var drainDeadline: Int?

    @Option(name: .long, help: ArgumentHelp("Requests per connection processed at once (default: 64).", valueName: "count"))
    var maximumInFlight: Int?

    @Option(name: .long, help: ArgumentHelp("Threads serving the socket (default: one fewer than the cores, at least one).", valueName: "count"))
    var eventLoops: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Fleet mode: the fleet's PostgreSQL, postgresql://USER@HOST:PORT/DB or postgresql://USER@/DB?host=SOCKETDIR (fleet.url).",
            valueName: "url"))
    var fleet: String?

    @Option(name: .long, help: ArgumentHelp("Fleet mode: this node's name, unique in the fleet (fleet.node).", valueName: "name"))
    var node: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Fleet mode: the fleet key, the same on every node (fleet.keyFile).", valueName: "file"), completion: .file())
    var fleetKey: String?

    @Flag(
        name: .long,
        help: """
            Check the configuration (FILE, else --config) with the flags applied, as the daemon would \
            at start, print what it defines, and exit: 0 when it is usable, 1 with every problem found. \
            The store is not opened.
            """)
    var checkConfig = false

    @Argument(help: "With --check-config: the configuration file to check.", completion: .file())
    var file: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Check the store or backup in DIR against itself (and a backup against its manifest), offline and read-only \
            (nothing in DIR changes; no daemon may be running on it), and exit: 0 when it is sound.
            """,
            valueName: "DIR"),
        completion: .directory)
    var verifyStore: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            """
            Install the backup in BACKUP (a directory registryctl backup wrote) as the store in --data, with the daemon \
            stopped: checked against its manifest and verified before it replaces anything; the store that was there is \
            kept as DATA.before-restore-<time>.
            """,
            valueName: "BACKUP"),
        completion: .directory)
    var restore: String?

    func validate() throws {
        if (self.node != nil || self.fleetKey != nil) && self.fleet == nil && self.config == nil && self.file == nil {
            throw ValidationError("--node and --fleet-key go with --fleet (or a configuration file's fleet section)")
        }
        if self.file != nil && !self.checkConfig { throw ValidationError("a FILE argument goes with --check-config (or use --config FILE)") }
        if self.file != nil && self.config != nil { throw ValidationError("give the file either as FILE or as --config, not both") }
    }

    func run() async throws {
        // Nothing the daemon creates is for its group or others (the store, its lock files, backups,
        // the index snapshot, a restore's copies), whatever umask it was started with: every file is
        // created with its mode anyway, and this keeps one forgotten mode from meaning a readable
        // copy of the store. The socket, which its group must reach, is bound under a umask of 0117
        // of its own (SocketServer), and stays 0660.
        umask(0o077)
        var configuration = ServerConfiguration()
        do {
            if let path = self.file ?? self.config {
                configuration = try ServerConfiguration.load(path: path)
            }
        } catch {
            Self.printError(Self.describe(error))
            throw ExitCode.failure
        }
        if let socket { configuration.socketPath = socket }
        if let data { configuration.dataDirectory = data }
        if let keyFile { configuration.keyFile = keyFile }
        if let fleet {
            // The URL given here, the rest of the file's section kept.
            var entry = configuration.fleet ?? ServerConfiguration.FleetEntry(url: fleet, node: "")
            entry.url = fleet
            configuration.fleet = entry
        }
        if let node, configuration.fleet != nil { configuration.fleet?.node = node }
        if let fleetKey, configuration.fleet != nil { configuration.fleet?.keyFile = fleetKey }
        if let logLevel { configuration.logLevel = logLevel }
        if let maximumFrameBytes { configuration.limits.maximumFrameBytes = maximumFrameBytes }
        if let maximumConnections { configuration.limits.maximumConnections = maximumConnections }
        if let maximumConnectionsPerUser { configuration.limits.maximumConnectionsPerUser = maximumConnectionsPerUser }
        if let minimumFrameRate { configuration.limits.minimumFrameBytesPerSecond = minimumFrameRate }
        if let storageReserve { configuration.limits.storageReserveBytes = storageReserve }
        if let snapshotMinimumTemplates { configuration.limits.snapshotMinimumTemplates = snapshotMinimumTemplates }
        if let idleTimeout { configuration.limits.idleTimeoutSeconds = idleTimeout }
        if let frameDeadline { configuration.limits.frameDeadlineSeconds = frameDeadline }
        if let drainDeadline { configuration.limits.drainDeadlineSeconds = drainDeadline }
        if let maximumInFlight { configuration.limits.maximumRequestsInFlight = maximumInFlight }
        if let eventLoops { configuration.limits.eventLoops = eventLoops }
        guard let level = Logger.Level(rawValue: configuration.logLevel) else {
            Self.printError("unknown log level '\(configuration.logLevel)' (trace, debug, info, notice, warning, error or critical)")
            throw ExitCode.failure
        }
        if self.verifyStore != nil || self.restore != nil {
            try await self.runOffline(configuration)
            return
        }
        if self.checkConfig {
            do {
                print(try ConfigurationReport(configuration, file: self.file ?? self.config).text)
                return
            } catch {
                Self.printError(Self.describe(error))
                throw ExitCode.failure
            }
        }

        LogOutput.bootstrap()
        var logger = Logger(label: "registryd")
        logger.logLevel = level
        do {
            // Process-wide, and only settable before the first use of NIO's shared group.
            // (An out-of-range value is left for the configuration check to report.)
            let loops = configuration.limits.resolvedEventLoops
            if (1...256).contains(loops) { NIOSingletons.groupLoopCountSuggestion = loops }
            try await RegistryDaemon(configuration: configuration, configurationPath: config, logger: logger).run()
        } catch {
            logger.critical("registryd stopped: \(error)")
            throw ExitCode.failure
        }
    }

    /// "1 template", "2 templates".
    static func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }

    /// --verify-store and --restore: work on a store no daemon serves, then exit.
    func runOffline(_ configuration: ServerConfiguration) async throws {
        do {
            let engine = try configuration.validated().engine
            if let directory = self.verifyStore {
                let result = try await OfflineStore.verify(path: directory, configuration: engine)
                if result.problems.isEmpty {
                    print(
                        "\(directory): \(Self.count(result.checked, "template")) checked, no problems"
                            + (result.manifestChecked ? ", matching its manifest" : ""))
                    return
                }
                print("\(directory): \(Self.count(result.checked, "template")) checked, \(Self.count(result.problems.count, "problem")):")
                for problem in result.problems { print("  \(problem)") }
                throw ExitCode.failure
            }
            if let backup = self.restore {
                let data = configuration.dataDirectory
                let result = try await OfflineStore.restore(backup: backup, into: data, configuration: engine)
                print(
                    "restored \(backup) into \(data): \(result.templates) templates, verified"
                        + (result.manifestChecked ? ", matching its manifest" : " (no manifest to check it against)"))
                if let previous = result.previous { print("the store that was there is kept in \(previous)") }
            }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            Self.printError(Self.describe(error))
            throw ExitCode.failure
        }
    }

    /// An error for the operator: a registry error's message without its protocol code (the code is
    /// for clients of the socket; "MALFORMED_REQUEST" about a key file only puzzles the reader).
    static func describe(_ error: any Error) -> String {
        (error as? RegistryError)?.message ?? "\(error)"
    }

    /// One message per line on standard error, each prefixed with the program's name.
    static func printError(_ message: String) {
        for line in message.split(separator: "\n") { LogOutput.writeStandardError("registryd: \(line)") }
    }
}
