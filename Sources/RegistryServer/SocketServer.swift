import CoreMetrics
import Glibc
import Logging
import NIOCore
import NIOPosix
import RegistryEngine
import RegistryModel
import RegistryProtocol
import ServiceLifecycle
import Synchronization

/// The daemon's socket server: a SwiftNIO Unix-domain-socket listener whose connections each read
/// frames, answer them through the ``RequestDispatcher`` and write the responses in request order.
///
/// Per connection, one ``ConnectionHandler`` next to the socket: frames cut, requests dispatched and
/// replies written in order by its ``ConnectionPipeline`` (the promise it keeps is described
/// there), back-pressure, frame deadline and idle timeout. Replies come framed, length prefix
/// included, from the dispatcher: no encoder handler, no copy. On graceful shutdown the listener closes and every connection drains: requests already
/// read are answered (those not yet started with `SHUTTING_DOWN`), then it closes; connections still
/// open at the drain deadline are closed.
public final class SocketServer: Service, Sendable {
    private let configuration: ServerConfiguration
    private let dispatcher: RequestDispatcher
    private let logger: Logger
    private let group: any EventLoopGroup
    private let listening = Mutex<(any Channel)?>(nil)
    private let connections = Mutex<[ObjectIdentifier: Accepted]>([:])
    private let stopping = Atomic<Bool>(false)
    private let budget: BufferBudget
    /// Who holds the connection slots; a new connection gets one, or makes room, or is refused.
    private let slots: ConnectionSlots
    /// Resumed with the bound path once the server accepts connections (for tests and readiness).
    public let ready: AsyncStream<String>
    private let readyContinuation: AsyncStream<String>.Continuation

    /// The listening socket inherited from systemd, if socket-activated.
    private let activatedSocket: Int32?
    /// Called when requests still run 5 s after the drain deadline (an operation that does not end,
    /// such as a backup to a stalled disk): the daemon exits rather than ignore SIGTERM.
    private let onDrainOverrun: @Sendable () -> Void
    private let finished = Atomic<Bool>(false)

    public init(
        configuration: ServerConfiguration,
        dispatcher: RequestDispatcher,
        logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        activatedSocket: Int32? = nil,
        onDrainOverrun: @escaping @Sendable () -> Void = {}
    ) {
        self.activatedSocket = activatedSocket
        self.onDrainOverrun = onDrainOverrun
        self.configuration = configuration
        self.dispatcher = dispatcher
        self.logger = logger
        self.group = group
        self.budget = BufferBudget(limit: configuration.limits.maximumBufferedBytes)
        self.slots = ConnectionSlots(
            limits: .init(
                total: configuration.limits.maximumConnections, perUser: configuration.limits.resolvedMaximumConnectionsPerUser,
                reserved: configuration.limits.resolvedReservedConnections, privileged: [0, getuid()]))
        (self.ready, self.readyContinuation) = AsyncStream.makeStream()
    }

    public func run() async throws {
        defer { self.readyContinuation.finish() }
        let path = self.configuration.socketPath
        let limits = self.configuration.limits
        let dispatcher = self.dispatcher
        let budget = self.budget
        let logger = self.logger
        // The connection's handlers are added here, but not its NIOAsyncChannel: the listener drops
        // connections accepted as it closes (SwiftNIO issue 2813), and a dropped NIOAsyncChannel
        // traps ("Deinited NIOAsyncWriter without calling finish()"; seen on SIGTERM right after a
        // connect). `serve` wraps the channel instead, and nothing is read before it does (autoRead
        // is off until then), so a connection dropped unserved had no request read.
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Accepted> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let account = ConnectionAccount(budget: budget)
                let (handler, finished) = try Self.addConnectionHandler(
                    to: channel, requests: dispatcher, account: account, limits: Self.connectionLimits(limits), logger: logger)
                return Accepted(channel: channel, account: account, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop), finished: finished)
            }
        }
        let unwritten = limits.maximumUnwrittenReplyBytes
        let bootstrap = ServerBootstrap(group: self.group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptErrorLogger(logger: logger))
                }
            }
            // A client that half-closes its sending side still gets every reply.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelOption(.autoRead, value: false)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: unwritten / 2, high: unwritten))
        let server: NIOAsyncChannel<Accepted, Never>
        let activated = self.activatedSocket
        if let activated {
            // systemd owns the socket file (its mode and group come from the .socket unit).
            server = try await bootstrap.bind(activated, childChannelInitializer: initializer)
        } else {
            try UnixSocketPath.prepare(path)
            // Created group read-write, others nothing (the socket's group is the access list): set
            // through the umask so there is no moment with looser permissions.
            let previous = umask(0o117)
            defer { umask(previous) }
            server = try await bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: false, childChannelInitializer: initializer)
        }
        self.listening.withLock { $0 = server.channel }
        self.logger.info("listening", metadata: ["socket": "\(activated == nil ? path : "fd \(activated!) from systemd")"])
        self.readyContinuation.yield(path)

        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await accepted in inbound {
                        group.addTask { await self.serve(accepted) }
                    }
                }
            }
        } onGracefulShutdown: {
            self.beginShutdown()
        }
        if activated == nil { unlink(path) }
        self.finished.store(true, ordering: .releasing)
        self.logger.info("stopped serving")
    }

    /// Stops accepting and drains every connection: requests already read are answered, those not
    /// yet started with `SHUTTING_DOWN`. Connections still open after the drain deadline are closed.
    public func beginShutdown() {
        guard !self.stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let deadline = self.configuration.limits.drainDeadlineSeconds
        self.logger.info("shutting down: finishing requests in flight", metadata: ["deadline": "\(deadline) s"])
        Systemd.notify("STOPPING=1\nSTATUS=finishing requests in flight")
        self.listening.withLock { $0?.close(promise: nil) }
        for connection in self.connections.withLock({ Array($0.values) }) {
            connection.drain()
        }
        // A fleet node's writes whose outcome is not known yet are answered before the deadline.
        self.dispatcher.fleet?.drainBegins(deadline: .now + .seconds(deadline))
        // Not a child of the server's task: it must not delay the return once every connection is
        // done; when it fires after that, there is nothing left to close.
        Task { [self] in
            try? await Task.sleep(for: .seconds(deadline))
            let late = self.connections.withLock { Array($0.values) }
            if !late.isEmpty {
                self.logger.warning("drain deadline passed: closing connections still open", metadata: ["connections": "\(late.count)"])
            }
            for connection in late { connection.abort() }
            try? await Task.sleep(for: .seconds(5))
            if !self.finished.load(ordering: .acquiring) {
                self.logger.critical("requests still running 5 s after the drain deadline")
                self.onDrainOverrun()
            }
        }
    }

    /// A connection as its channel initializer leaves it: the channel, its account of the buffer
    /// budget, its handler, and the future that says it is over.
    struct Accepted: Sendable {
        let channel: any Channel
        let account: ConnectionAccount
        let handler: NIOLoopBound<ConnectionHandler<RequestDispatcher>>
        /// Succeeds once the channel is closed and every request it started has finished.
        let finished: EventLoopFuture<Void>

        /// Stops reading: what was read still gets its reply, what was not started is refused.
        func drain() {
            let handler = self.handler
            handler.eventLoop.execute { handler.value.drain() }
        }

        /// Closes at once (the drain deadline passed): replies not yet written are lost to the client.
        func abort() {
            self.channel.close(promise: nil)
        }
    }

    static func connectionLimits(_ limits: ServerConfiguration.Limits) -> ConnectionHandler<RequestDispatcher>.Limits {
        .init(
            maximumInFlight: limits.maximumRequestsInFlight, maximumFrameBytes: limits.maximumFrameBytes,
            frameDeadline: .seconds(Int64(limits.frameDeadlineSeconds)), minimumFrameRate: limits.minimumFrameBytesPerSecond,
            idleTimeout: .seconds(Int64(limits.idleTimeoutSeconds)))
    }

    private func serve(_ accepted: Accepted) async {
        let channel = accepted.channel
        let key = ObjectIdentifier(channel)
        self.dispatcher.counters.connections.add(1, ordering: .relaxed)
        self.connections.withLock { $0[key] = accepted }
        defer {
            self.connections.withLock { $0[key] = nil }
            self.dispatcher.counters.connections.subtract(1, ordering: .relaxed)
            // Requests unread and replies never written give their bytes back.
            accepted.account.releaseAll()
        }
        // The peer's credentials, read once, before anything is read from the connection.
        let peer = await Self.peer(of: channel)
        let admission = await self.slots.admit(key, uid: peer?.uid, account: accepted.account)
        guard admission == .admitted else {
            if case .refused(let reason) = admission {
                self.dispatcher.metrics.connectionsRefused.increment()
                // Counted, and logged once a minute, not per attempt: a client retrying in a loop
                // would otherwise flood the journal.
                self.dispatcher.refusals.record(peer: peer, operation: "connect", code: .tooManyConnections)
                let reply = self.dispatcher.reply(id: 0, error: RegistryError(.tooManyConnections, reason))
                let handler = accepted.handler
                handler.eventLoop.execute { handler.value.refuse(with: reply) }
            } else {
                channel.close(promise: nil)
            }
            try? await accepted.finished.get()
            return
        }
        defer { self.slots.leave(key) }
        self.dispatcher.metrics.connectionsAccepted.increment()
        // Reading starts only now (autoRead was off): a connection the listener dropped as it
        // closed, or one refused above, had nothing read.
        let handler = accepted.handler
        let started = channel.eventLoop.submit {
            handler.value.admit(peer: peer)
            try channel.syncOptions?.setOption(.autoRead, value: true)
        }
        if (try? await started.get()) == nil { channel.close(promise: nil) }
        // A connection accepted as shutdown began drains like the others.
        if self.stopping.load(ordering: .acquiring) { accepted.drain() }
        try? await accepted.finished.get()
    }
}

extension SocketServer {
    /// The handler of a connection: ``ConnectionHandler`` (see there). `peer`: for a channel without
    /// socket credentials (tests).
    static func addConnectionHandler<Requests: ConnectionRequests>(
        to channel: any Channel, requests: Requests, account: ConnectionAccount, limits: ConnectionHandler<Requests>.Limits,
        logger: Logger, peer: Peer? = nil
    ) throws -> (ConnectionHandler<Requests>, EventLoopFuture<Void>) {
        let finished = channel.eventLoop.makePromise(of: Void.self)
        let handler = ConnectionHandler(requests: requests, account: account, limits: limits, logger: logger, finished: finished, peer: peer)
        try channel.pipeline.syncOperations.addHandler(handler)
        return (handler, finished.futureResult)
    }
}

/// Logs the listener's accept errors (running out of file descriptors, typically) instead of
/// letting them pass silently; NIO's own handler after it backs accepting off for a second.
final class AcceptErrorLogger: ChannelInboundHandler {
    typealias InboundIn = any Channel
    private let logger: Logger
    private var lastLogged: NIODeadline?

    init(logger: Logger) {
        self.logger = logger
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // At most one line every 10 s: the condition tends to persist while it lasts.
        let now = NIODeadline.now()
        if self.lastLogged.map({ now - $0 >= .seconds(10) }) ?? true {
            self.lastLogged = now
            self.logger.error("accepting a connection failed; retrying in 1 s", metadata: ["error": "\(error)"])
        }
        context.fireErrorCaught(error)
    }
}

@available(*, unavailable)
extension AcceptErrorLogger: Sendable {}

extension SocketServer {
    /// The connected peer's credentials (SO_PEERCRED), read once per connection.
    static func peer(of channel: any Channel) async -> Peer? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let credentials: PeerCredentials? = try? await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)
        ).get()
        return credentials.map(Peer.init(credentials:))
    }
}
