import Logging
import PostgresNIO
import Synchronization

/// The fleet's PostgreSQL as a node reaches it: one connection pool per server the URL names, and
/// which of them is the primary (docs/fleet.md, "Failover").
///
/// With one server, that one. With several (a primary and its standbys), the primary is looked for
/// by asking every server at once whether it is in recovery (`pg_is_in_recovery()`): the first to
/// answer that it is not wins, and it is kept until a query on it fails: then it is looked for
/// again on the next query. After a failover, the first query that fails on the old primary
/// (gone, or restarted read-only) makes the node find the promoted standby.
public final class FleetDatabase: Sendable {
    let clients: [PostgresClient]
    let logger: Logger
    /// Whether ``run()`` runs the pools (false: their owner runs them, as tests do).
    private let ownsPools: Bool
    /// The index of the known primary (nil: to be looked for).
    private let primary = Mutex<Int?>(nil)
    /// How long a server has to say whether it is the primary.
    static let probeLimit: Duration = .seconds(1)

    /// Pools for every server of `location`, run by ``run()``.
    public init(location: FleetLocation, password: String?, connectTimeout: Duration = .seconds(3), logger: Logger) {
        self.clients = location.endpoints.map { endpoint in
            var configuration = location.clientConfiguration(password: password, endpoint: endpoint)
            configuration.options.connectTimeout = connectTimeout
            return PostgresClient(configuration: configuration, backgroundLogger: logger)
        }
        self.logger = logger
        self.ownsPools = true
    }

    /// A database of one pool its caller runs.
    public init(client: PostgresClient, logger: Logger) {
        self.clients = [client]
        self.logger = logger
        self.ownsPools = false
    }

    /// Runs the pools until cancelled.
    public func run() async {
        guard self.ownsPools else { return }
        await withDiscardingTaskGroup { group in
            for client in self.clients { group.addTask { await client.run() } }
        }
    }

    /// Runs `body` with the primary's pool. A failure makes the next call look for the primary
    /// again, and ends at once the other calls still running on that pool (with
    /// ``FleetPrimaryLost``): a pool whose server is gone keeps a query waiting for a connection
    /// until its caller's deadline, and after a failover that would be seconds of writes refused
    /// for nothing.
    public func withPrimary<T: Sendable>(_ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let index = try await self.primaryIndex()
        let client = self.clients[index]
        guard self.clients.count > 1 else { return try await body(client) }
        let call = self.running.withLock { running in
            running.next &+= 1
            return running.next
        }
        defer { self.running.withLock { _ = $0.calls.removeValue(forKey: call) } }
        do {
            return try await racing(
                deadline: nil,
                interruptible: { interrupt in self.running.withLock { $0.calls[call] = (index, interrupt) } },
                { try await body(client) })
        } catch {
            self.forget(index)
            throw error
        }
    }

    /// Calls running on a server's pool, by number, each with what ends it.
    private let running = Mutex<(next: UInt64, calls: [UInt64: (index: Int, interrupt: @Sendable (any Error) -> Void)])>((0, [:]))

    /// The primary at `index` failed a call: looked for again next time, and the calls still
    /// running on it ended.
    private func forget(_ index: Int) {
        self.primary.withLock { if $0 == index { $0 = nil } }
        let interrupted = self.running.withLock { running in running.calls.values.filter { $0.index == index }.map(\.interrupt) }
        for interrupt in interrupted { interrupt(FleetPrimaryLost()) }
    }

    /// The primary's index: the one known, or the first server that says it is not in recovery.
    private func primaryIndex() async throws -> Int {
        if self.clients.count == 1 { return 0 }
        if let known = self.primary.withLock({ $0 }) { return known }
        // The first server to say it is the primary wins: one that is gone may not answer before
        // the probe's deadline (its pool waits for a connection), and the others need not wait for it.
        let (found, reasons) = await withTaskGroup(of: (Int, Result<Bool, any Error>).self) { group -> (Int?, [Int: String]) in
            for (index, client) in self.clients.enumerated() {
                group.addTask {
                    (index, await Result(catching: { try await Self.isPrimary(client, logger: self.logger) }))
                }
            }
            var reasons: [Int: String] = [:]
            for await (index, answer) in group {
                switch answer {
                case .success(true):
                    group.cancelAll()
                    return (index, reasons)
                case .success(false): reasons[index] = "server \(index + 1) is a standby"
                case .failure(let error): reasons[index] = "server \(index + 1): \(String(reflecting: error).prefix(120))"
                }
            }
            return (nil, reasons)
        }
        guard let found else { throw FleetNoPrimary(reasons: reasons.keys.sorted().map { reasons[$0]! }) }
        let changed = self.primary.withLock { known in
            defer { known = found }
            return known != found
        }
        if changed { self.logger.info("found the fleet's primary database", metadata: ["server": "\(found + 1)"]) }
        return found
    }

    /// Whether `client`'s server is a primary (within ``probeLimit``).
    private static func isPrimary(_ client: PostgresClient, logger: Logger) async throws -> Bool {
        try await withinDeadline(Self.probeLimit) {
            let rows = try await client.query("SELECT pg_is_in_recovery()", logger: logger)
            for try await recovering in rows.decode(Bool.self) { return !recovering }
            return false
        }
    }
}

/// A call on the primary ended because another call on it failed (the server is probably gone).
public struct FleetPrimaryLost: Error, CustomStringConvertible {
    public var description: String { "the fleet's primary database stopped answering" }
}

/// None of the servers answered as a primary.
public struct FleetNoPrimary: Error, CustomStringConvertible {
    public let reasons: [String]

    public var description: String { "no server of the fleet's database answers as the primary (\(self.reasons.joined(separator: "; ")))" }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
