import CoreMetrics
import Logging
import NIOCore
import PostgresNIO
import RegistryEngine
import RegistryFleet
import RegistryModel
import RegistryProtocol
import ServiceLifecycle
import Synchronization

/// What fleet mode needs (docs/fleet.md): where PostgreSQL is, the node's name, the fleet key.
public struct FleetSettings: Sendable {
    public var location: FleetLocation
    public var node: String
    /// The fleet key (32 bytes): entries are sealed with it before they reach PostgreSQL.
    public var key: [UInt8]
    /// The database role's password (nil: none, e.g. peer or trust authentication on a socket).
    public var password: String?
    /// How often the node looks whether a snapshot is due and compacts the log.
    public var compactionInterval: Duration
    /// How long the log waits for a node that has not applied it (docs/fleet.md, "Compaction").
    public var retention: Duration

    public static let defaultCompactionSeconds = 60
    public static let defaultRetentionSeconds = 7 * 86_400

    public init(
        location: FleetLocation, node: String, key: [UInt8], password: String?,
        compactionInterval: Duration = .seconds(FleetSettings.defaultCompactionSeconds),
        retention: Duration = .seconds(FleetSettings.defaultRetentionSeconds)
    ) {
        self.location = location
        self.node = node
        self.key = key
        self.password = password
        self.compactionInterval = compactionInterval
        self.retention = retention
    }
}

/// This daemon as a node of a fleet (docs/fleet.md): every write of the registry's contents is an
/// entry appended to the fleet's log in PostgreSQL and applied, in the log's order, to the local
/// store by the same operation code as standalone; identify and authenticate read the local store.
///
/// - **Writes**: a request that changes the registry is appended (with the other writes waiting at
///   that moment, in one transaction) and answered once this node has applied it, with what
///   applying it gave: the node that wrote reads its own write, and a registration's similar-face
///   check has seen every entry before it in the log, whichever node wrote them. Every replica
///   makes the same decision, since it applies the same entries in the same order to the same
///   contents. A write PostgreSQL does not take is refused with `FLEET_UNAVAILABLE`, carried out
///   nowhere.
/// - **Following**: entries are applied in position order; each entry's write records its position
///   in the same commit, and the store refuses a position that does not follow its last, so a crash
///   or a failure of this node's own (full disk) never applies an entry twice or skips one: the
///   node then applies again from the store's position.
///
/// `@unchecked Sendable`: the mutable state is in `state`, under its mutex.
public final class FleetNode: @unchecked Sendable {
    let settings: FleetSettings
    let engine: Engine
    let logger: Logger
    /// The fleet's PostgreSQL: its servers' pools, and which one is the primary.
    let database: FleetDatabase
    let log: FleetLog
    /// Set by the daemon once the dispatcher exists (it applies the entries).
    var dispatcher: RequestDispatcher?
    /// The galleries of the node's configuration, proposed to the fleet once it is joined (a node
    /// never defines them in its store alone).
    var configuredGalleries: [GalleryConfiguration] {
        get { self.state.withLock { $0.configuredGalleries } }
        set { self.state.withLock { $0.configuredGalleries = newValue } }
    }
    /// The connection pool's task: from the join at start to the end of ``run()``.
    let pool: Task<Void, Never>

    struct State {
        /// The fleet's identity and seal, once the database answered.
        var fleetId: Int64?
        var seal: FleetSeal?
        /// Writes of this node waiting for PostgreSQL, in their order.
        var pending: [FleetWrite] = []
        var flushing = false
        /// Writes of this node appended (or being appended), by token: the entry is applied with the
        /// request's own operation and completion. Taken out by whoever answers it first.
        var waiting: [UInt64: FleetWrite] = [:]
        var nextToken: UInt64 = .random(in: 1...(1 << 62))
        /// The newest position seen in the log, and when the oldest entry not applied was committed.
        var head: Int64 = 0
        /// When the oldest entry not applied here was committed (microseconds since 1970; nil: none).
        var oldestUnapplied: Int64?
        var reachable = false
        /// An entry failed on this node alone: the follower applies again from the store's position.
        var failedHere: String?
        /// Whom to wake when this node appended (its follower, waiting for entries).
        var wake: CheckedContinuation<Void, Never>?
        var woken = false
        var configuredGalleries: [GalleryConfiguration] = []
        /// The last position the follower has read and started applying.
        var followed: Int64 = 0
        /// The entry the follower stopped at, unable to apply it yet, and why (nil: not stopped).
        var stuck: (position: Int64, reason: String)?
    }

    let state = Mutex(State())

    /// The node's figures for Prometheus (docs/metrics.md), recorded every second by ``report()``.
    struct Gauges {
        let applied: Gauge
        let head: Gauge
        let lagEntries: Gauge
        let lagSeconds: Gauge
        let databaseUp: Gauge

        init(factory: any MetricsFactory) {
            self.applied = Gauge(label: "registryd_fleet_applied_position", factory: factory)
            self.head = Gauge(label: "registryd_fleet_head_position", factory: factory)
            self.lagEntries = Gauge(label: "registryd_fleet_lag_entries", factory: factory)
            self.lagSeconds = Gauge(label: "registryd_fleet_lag_seconds", factory: factory)
            self.databaseUp = Gauge(label: "registryd_fleet_database_up", factory: factory)
        }

        func record(_ status: FleetNode.Status) {
            self.applied.record(status.applied)
            self.head.record(status.head)
            self.lagEntries.record(status.head - status.applied)
            self.lagSeconds.record(status.lagSeconds)
            self.databaseUp.record(status.reachable ? 1 : 0)
        }
    }

    let gauges: Gauges

    /// Entries read per query while following.
    static let page = 512
    /// Writes appended in one transaction at most.
    static let maximumAppend = 512

    public init(settings: FleetSettings, engine: Engine, logger: Logger, metrics: any MetricsFactory = NOOPMetricsHandler.instance) {
        self.settings = settings
        self.gauges = Gauges(factory: metrics)
        self.engine = engine
        self.logger = logger
        let database = FleetDatabase(location: settings.location, password: settings.password, logger: logger)
        self.database = database
        self.log = FleetLog(database: database, node: settings.node, logger: logger)
        self.pool = Task { await database.run() }
    }

    deinit {
        self.pool.cancel()
    }

    // MARK: Joining

    /// Prepares the fleet's schema and joins this store to the fleet, waiting at most `timeout` for
    /// PostgreSQL. Throws when the store cannot join (another fleet's, standalone data) or the
    /// database is of a newer schema; returns without joining when PostgreSQL does not answer in time
    /// (a store that joined before goes on as a replica: reads are answered, writes refused until it
    /// answers; ``run()`` keeps trying).
    func join(timeout: Duration) async throws {
        if let id = try self.engine.fleetMembership().fleetId {
            // Already a replica: nothing is written locally outside the log, even before PostgreSQL answers.
            try await self.engine.joinFleet(id: id)
        }
        do {
            try await withinDeadline(timeout) { try await self.prepare() }
        } catch let error as RegistryError {
            throw error
        } catch let error as FleetSchemaError {
            throw RegistryError(.internal, "\(error)")
        } catch {
            self.logger.warning(
                "the fleet's database does not answer; serving reads from the local replica, refusing writes until it does",
                metadata: ["fleet": "\(self.settings.location)", "error": "\(String(reflecting: error).prefix(300))"])
        }
    }

    /// The schema, the fleet's id, and the store joined to it.
    private func prepare() async throws {
        let prepared = try await self.database.withPrimary { try await FleetSchema.prepare($0, logger: self.logger) }
        try await self.engine.joinFleet(id: prepared.fleetId)
        self.state.withLock { state in
            state.fleetId = prepared.fleetId
            state.seal = FleetSeal(key: self.settings.key, fleetId: prepared.fleetId)
            state.reachable = true
        }
        self.logger.info(
            "joined the fleet",
            metadata: ["fleet": "\(FleetMembership.hex(prepared.fleetId))", "node": "\(self.settings.node)", "database": "\(self.settings.location)"])
    }

    // MARK: Status

    /// What `stats` and the metrics show of the node.
    public struct Status: Sendable, Equatable {
        public var node: String
        public var fleetId: Int64?
        public var applied: Int64
        public var head: Int64
        public var lagSeconds: Double
        public var reachable: Bool
    }

    public func status() -> Status {
        let applied = (try? self.engine.fleetPosition()) ?? 0
        return self.state.withLock { state in
            Status(
                node: self.settings.node, fleetId: state.fleetId, applied: applied, head: max(state.head, applied),
                lagSeconds: state.head > applied ? state.oldestUnapplied.map { max(0, Double(AuditEntry.now() - $0) / 1e6) } ?? 0 : 0,
                reachable: state.reachable)
        }
    }
}

/// A write of this node on its way through the log: its entry, and how to apply it here with the
/// request's own operation and completion.
struct FleetWrite: Sendable {
    var kind = FleetEntryKind.request
    /// ``RegistryOperation/isPipelinedInTheFleet`` of its operation.
    var pipelined = false
    let gallery: String
    /// The entry before sealing: the request as the client sent it (a `registry.v1.Request`), or
    /// an auto-enrolment (``FleetAutoEnrolment``).
    let frame: [UInt8]
    /// Starts the request's operation bound to its entry; its completion tells the ticket.
    let apply: @Sendable (FleetApplication, FleetTicket) -> Void
    /// Answers the client with a refusal (the write was carried out nowhere).
    let refuse: @Sendable (RegistryError) -> Void
}

/// One entry being applied: whether its write is queued, and how its operation ended.
final class FleetTicket: Sendable {
    enum Outcome: Sendable, Equatable {
        /// Applied, or refused the same way on every replica (recorded as applied).
        case done
        /// Failed on this node alone (its disk, damage, shutdown): to be applied again.
        case failedHere(String)
    }

    let position: Int64
    private let state = Mutex<
        (queued: Bool, outcome: Outcome?, started: CheckedContinuation<Void, Never>?, finished: [CheckedContinuation<Void, Never>])
    >(
        (false, nil, nil, []))

    init(position: Int64) {
        self.position = position
    }

    /// The entry's write is in the writer's queue (``FleetApplication``).
    func queued() {
        let waiter = self.state.withLock { state in
            state.queued = true
            defer { state.started = nil }
            return state.started
        }
        waiter?.resume()
    }

    /// The entry's operation ended with `result`.
    func finished<T>(_ result: Result<T, any Error>) {
        var outcome = Outcome.done
        if case .failure(let error) = result, !Engine.failsEverywhere(error) {
            outcome = .failedHere((error as? RegistryError)?.message ?? "\(error)")
        }
        let waiters = self.state.withLock { state in
            if state.outcome == nil { state.outcome = outcome }
            defer {
                state.started = nil
                state.finished = []
            }
            return (state.started, state.finished)
        }
        waiters.0?.resume()
        for waiter in waiters.1 { waiter.resume() }
    }

    /// The entry's operation failed before it started (the entry could not be read, or is refused).
    func failed(_ error: any Error) {
        self.finished(Result<Void, any Error>.failure(error))
    }

    /// Returns once the write is queued or the operation ended (refused before writing).
    func started() async -> (queued: Bool, outcome: Outcome?) {
        await withCheckedContinuation { continuation in
            let now = self.state.withLock { state -> Bool in
                if state.queued || state.outcome != nil { return true }
                state.started = continuation
                return false
            }
            if now { continuation.resume() }
        }
        return self.state.withLock { ($0.queued, $0.outcome) }
    }

    /// The outcome, once the operation ended.
    func outcome() async -> Outcome {
        await withCheckedContinuation { continuation in
            let now = self.state.withLock { state -> Bool in
                if state.outcome != nil { return true }
                state.finished.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        return self.state.withLock { $0.outcome ?? .done }
    }

    var ended: Outcome? { self.state.withLock { $0.outcome } }
}

/// A completion that tells the entry's ticket how the operation ended, then answers as `inner` does.
struct FleetCompletion<Inner: Completion>: Completion {
    let inner: Inner
    let ticket: FleetTicket

    func complete(_ result: Result<Inner.Value, any Error>) {
        self.ticket.finished(result)
        if case .failure(let error) = result, !Engine.failsEverywhere(error) {
            // In the log, so it will take effect everywhere, this node included: not a refusal.
            let reason = (error as? RegistryError)?.message ?? "\(error)"
            return self.inner.complete(
                .failure(
                    RegistryError(
                        .internal,
                        "the write is entry \(self.ticket.position) of the fleet's log, but this node could not apply it yet (\(reason)); "
                            + "it takes effect on every node, this one once it applies it")))
        }
        self.inner.complete(result)
    }
}

/// A completion for an entry another node wrote: only the ticket hears how it went.
struct FleetTicketCompletion<Value: Sendable>: Completion {
    let ticket: FleetTicket

    func complete(_ result: Result<Value, any Error>) {
        self.ticket.finished(result)
    }
}
