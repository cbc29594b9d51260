import Glibc
import Logging
import NIOPosix
import RegistryEngine
import RegistryModel
import ServiceLifecycle
import UnixSignals

/// The whole daemon: opens the store, applies the configured galleries, serves the socket until
/// SIGTERM or SIGINT, reloads thresholds on SIGHUP, and closes the store after the last request.
public struct RegistryDaemon: Sendable {
    public let configuration: ServerConfiguration
    /// The file the configuration came from, re-read on SIGHUP (nil: nothing to reload).
    public let configurationPath: String?
    public let logger: Logger

    public init(configuration: ServerConfiguration, configurationPath: String?, logger: Logger) {
        self.configuration = configuration
        self.configurationPath = configurationPath
        self.logger = logger
    }

    /// Runs until a shutdown signal, then drains and closes.
    /// - Parameter onReady: called once the store is open and the socket accepts connections.
    public func run(onReady: @escaping @Sendable (Engine) -> Void = { _ in }) async throws {
        // Every check --check-config makes, all problems at once, before anything is bound or opened.
        let (engineConfiguration, galleries) = try self.configuration.checkedForStart()
        let fleetSettings = try self.configuration.fleetSettings()
        try FileDescriptorLimit.ensure(connections: self.configuration.limits.maximumConnections, logger: self.logger)
        let activated = Systemd.activatedSocket()
        if activated == nil {
            // Refuse early, before touching the store, when another daemon serves on the socket.
            try UnixSocketPath.prepare(self.configuration.socketPath)
        }
        let metrics = ServerMetrics()
        let engine = try Engine(path: self.configuration.dataDirectory, configuration: engineConfiguration, metrics: metrics.factory)
        defer {
            // Closing writes the index snapshot the next start maps (see docs/storage.md).
            engine.close()
            if let report = engine.snapshotReport { self.logger.info("\(report)") }
            self.logger.info("store closed; bye")
        }
        if let note = engine.creationNote { self.logger.warning("\(note)") }
        let logger = self.logger
        engine.onStorageReserveChange { reached, description in
            if reached { logger.warning("\(description)") } else { logger.notice("\(description)") }
        }
        var fleet: FleetNode?
        if let fleetSettings {
            // A replica defines nothing alone: its configured galleries go through the log.
            let node = FleetNode(settings: fleetSettings, engine: engine, logger: self.logger, metrics: metrics.factory)
            node.configuredGalleries = galleries
            if Engine.unorderedFleetWritesForTesting {
                self.logger.critical(
                    """
                    REGISTRYD_TEST_UNORDERED_FLEET_WRITES=1: this node carries out writes without the fleet's log, so its store will \
                    differ from the fleet's for good; a test's broken build only, never a deployment
                    """)
            }
            try await node.join(timeout: .seconds(5))
            fleet = node
        } else {
            if try engine.fleetMembership().fleetId != nil {
                throw RegistryError(
                    .malformedRequest,
                    "the store in \(self.configuration.dataDirectory) is a fleet replica: start registryd with its fleet settings "
                        + "(--fleet, --node and the fleet key); alone it would go its own way and never agree with the fleet again")
            }
            try await engine.defineGalleries(galleries)
        }
        let info = engine.galleries()
        self.logger.info(
            "store open",
            metadata: [
                "data": "\(self.configuration.dataDirectory)",
                "galleries": "\(info.count)",
                "templates": "\(info.reduce(0) { $0 + $1.registries.reduce(0) { $0 + $1.templateCount } })",
                "scan-kernels": "\(Engine.scanKernels)",
                "index": "\(engine.indexLoad)",
            ])

        let policy = try AccessPolicy(self.configuration.access)
        let dispatcher = RequestDispatcher(engine: engine, logger: self.logger, policy: policy, metrics: metrics, fleet: fleet)
        fleet?.dispatcher = dispatcher
        fleet?.routeAutoEnrolments()
        // The refusals counted since the periodic report's last flush (those of the drain included:
        // it stops before the server does), into the log and the trail before the store closes (this
        // runs before the close above).
        defer { dispatcher.refusals.flush() }
        let server = SocketServer(
            configuration: self.configuration, dispatcher: dispatcher, logger: self.logger, activatedSocket: activated,
            onDrainOverrun: {
                // Like a crash, which the store survives (every acknowledged write is durable): better
                // than leaving systemd to SIGKILL, or a manual stop hanging.
                Systemd.notify("STATUS=exiting with requests still running")
                exit(EXIT_FAILURE)
            })
        let reloader = ReloadService(
            configurationPath: self.configurationPath, engine: engine, dispatcher: dispatcher, fleet: fleet, logger: self.logger)
        // The group stops its services one at a time, the last listed first, each once the one
        // before has returned: the order says what still runs while the server drains.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let interval = Systemd.watchdogInterval() {
            // First, so that it stops last: keep-alives go on through the drain. (Listed last, it
            // held the drain back until its next keep-alive, up to half of WatchdogSec.)
            let watchdog = WatchdogService(
                interval: interval, engine: engine, eventLoops: MultiThreadedEventLoopGroup.singleton, logger: self.logger)
            services.append(.init(service: watchdog, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        // Before the server, so that it stops after it: the writes the server drains are applied through it.
        if let fleet { services.append(.init(service: fleet)) }
        services += [
            .init(service: server, successTerminationBehavior: .gracefullyShutdownGroup),
            .init(service: reloader, successTerminationBehavior: .gracefullyShutdownGroup),
            .init(service: PeriodicReportService(engine: engine, dispatcher: dispatcher, period: .seconds(60))),
        ]
        var groupConfiguration = ServiceGroupConfiguration(
            services: services,
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: self.logger)
        // The server closes connections still open at its drain deadline itself, and exits 5 s later
        // if requests still run; this cancellation is the last resort after both.
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(self.configuration.limits.drainDeadlineSeconds + 10)
        let group = ServiceGroup(configuration: groupConfiguration)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                for await _ in server.ready {
                    // READY only now: the store is open, the index loaded and the socket accepting.
                    Systemd.notify("READY=1\nSTATUS=\(PeriodicReportService.status(engine, dispatcher.counters))")
                    onReady(engine)
                    return
                }
            }
            try await tasks.waitForAll()
        }
    }
}

/// Re-reads the configuration file on SIGHUP and applies its galleries' registry order, thresholds
/// and gates, and the access policy: all of it or, when anything is wrong (the file, a gallery the
/// store refuses, the policy), none of it. Anything else in the file (socket, limits, algorithms)
/// needs a restart.
struct ReloadService: Service {
    let configurationPath: String?
    let engine: Engine
    let dispatcher: RequestDispatcher
    let fleet: FleetNode?
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            guard let path = self.configurationPath else {
                self.logger.notice("SIGHUP: no configuration file to reload")
                continue
            }
            do {
                // File access off the cooperative pool (the path could name a FIFO or a slow mount).
                let configuration = try await NIOThreadPool.singleton.runIfActive { try ServerConfiguration.load(path: path) }
                let (_, galleries) = try configuration.validated()
                // The policy is built before any gallery changes, so that a bad policy changes nothing;
                // the galleries are defined in one transaction, so that a refused one changes nothing.
                let policy = try AccessPolicy(configuration.access)
                if let fleet = self.fleet {
                    // Through the log, as every write of a replica (each gallery an entry of its own).
                    fleet.configuredGalleries = galleries
                    try await fleet.proposeGalleries(galleries)
                } else {
                    try await self.engine.defineGalleries(galleries)
                }
                self.dispatcher.update(policy: policy)
                self.logger.notice("SIGHUP: configuration reloaded", metadata: ["galleries": "\(galleries.count)"])
            } catch {
                self.logger.error(
                    "SIGHUP: reload refused, nothing changed", metadata: ["error": "\((error as? RegistryError)?.message ?? "\(error)")"])
            }
        }
    }
}
