import Glibc
import Logging
import NIOCore
import NIOPosix
import RegistryCore
import RegistryProtocol
import ServiceLifecycle
import Synchronization

/// The daemon's socket server: a SwiftNIO Unix-domain-socket listener whose connections each read
/// frames, answer them through the ``RequestDispatcher`` and write the responses in request order.
///
/// Per connection, requests that need no waiting (authentications writing nothing, refusals) are
/// answered on the event loop (``FastPathHandler``); the others go to a reader that takes them (at
/// most `maximumRequestsInFlight` unanswered at once), runs each as its own task off the event
/// loops, and a writer that sends their responses in the order the requests came. On graceful shutdown the listener closes, every connection stops reading, and the
/// server returns once the requests already read are answered.
public final class RegistryServer: Service, Sendable {
    private let configuration: ServerConfiguration
    private let dispatcher: RequestDispatcher
    private let logger: Logger
    private let group: any EventLoopGroup
    private let listening = Mutex<(any Channel)?>(nil)
    private let connections = Mutex<[ObjectIdentifier: any Channel]>([:])
    private let stopping = Atomic<Bool>(false)
    /// Resumed with the bound path once the server accepts connections (for tests and readiness).
    public let ready: AsyncStream<String>
    private let readyContinuation: AsyncStream<String>.Continuation

    /// The listening socket inherited from systemd, if socket-activated.
    private let activatedSocket: Int32?

    public init(
        configuration: ServerConfiguration,
        dispatcher: RequestDispatcher,
        logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        activatedSocket: Int32? = nil
    ) {
        self.activatedSocket = activatedSocket
        self.configuration = configuration
        self.dispatcher = dispatcher
        self.logger = logger
        self.group = group
        (self.ready, self.readyContinuation) = AsyncStream.makeStream()
    }

    public func run() async throws {
        defer { self.readyContinuation.finish() }
        let path = self.configuration.socketPath
        let limits = self.configuration.limits
        let dispatcher = self.dispatcher
        let initializer: @Sendable (any Channel) -> EventLoopFuture<NIOAsyncChannel<InboundRequest, ByteBuffer>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let operations = channel.pipeline.syncOperations
                try operations.addHandler(IdleStateHandler(readTimeout: .seconds(Int64(limits.idleTimeoutSeconds))))
                try operations.addHandler(IdleCloseHandler())
                try operations.addHandler(ByteToMessageHandler(FrameDecoder(maximumFrameLength: limits.maximumFrameBytes)))
                try operations.addHandler(MessageToByteHandler(FrameEncoder()))
                try operations.addHandler(FastPathHandler(dispatcher: dispatcher))
                return try NIOAsyncChannel<InboundRequest, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
        let bootstrap = ServerBootstrap(group: self.group).serverChannelOption(.backlog, value: 256)
        let server: NIOAsyncChannel<NIOAsyncChannel<InboundRequest, ByteBuffer>, Never>
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
                    for try await connection in inbound {
                        group.addTask { await self.serve(connection) }
                    }
                }
            }
        } onGracefulShutdown: {
            self.beginShutdown()
        }
        if activated == nil { unlink(path) }
        self.logger.info("stopped serving")
    }

    /// Stops accepting and stops reading on every connection; requests already read are answered.
    public func beginShutdown() {
        guard !self.stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.logger.info("shutting down: finishing requests in flight")
        Systemd.notify("STOPPING=1\nSTATUS=finishing requests in flight")
        self.listening.withLock { $0?.close(promise: nil) }
        for channel in self.connections.withLock({ Array($0.values) }) {
            channel.close(mode: .input, promise: nil)
        }
    }

    private func serve(_ connection: NIOAsyncChannel<InboundRequest, ByteBuffer>) async {
        let channel = connection.channel
        let key = ObjectIdentifier(channel)
        let open = self.dispatcher.connections.wrappingAdd(1, ordering: .relaxed).newValue
        self.connections.withLock { $0[key] = channel }
        defer {
            self.connections.withLock { $0[key] = nil }
            self.dispatcher.connections.subtract(1, ordering: .relaxed)
        }
        if self.stopping.load(ordering: .relaxed) {
            channel.close(mode: .input, promise: nil)
        }
        do {
            try await connection.executeThenClose { inbound, outbound in
                if open > self.configuration.limits.maximumConnections {
                    let reply = self.dispatcher.reply(
                        id: 0,
                        error: RegistryError(
                            .internal, "the daemon's connection limit (\(self.configuration.limits.maximumConnections)) is reached; try again later"))
                    try await outbound.write(reply.frame)
                    return
                }
                try await self.exchange(inbound: inbound, outbound: outbound, peer: await Self.peer(of: channel))
            }
        } catch {
            self.logger.debug("connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// Reads requests and writes their responses in order until the client stops sending, the
    /// connection breaks, or a reply asks to close it.
    private func exchange(
        inbound: NIOAsyncChannelInboundStream<InboundRequest>,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        peer: Peer?
    ) async throws {
        let slots = AsyncSemaphore(self.configuration.limits.maximumRequestsInFlight)
        let (replies, queue) = AsyncStream<Task<RequestDispatcher.Reply, Never>>.makeStream()
        let dispatcher = self.dispatcher
        let logger = self.logger
        enum Side { case reader, writer }
        try await withThrowingTaskGroup(of: Side.self) { group in
            // The writer: responses in request order. It returns when the reader is done and every
            // reply is written, or early when a reply closes the connection.
            group.addTask {
                // However the writer ends (the peer gone, cancellation), a reader waiting for a slot
                // must not wait forever.
                defer { slots.close() }
                for await pending in replies {
                    let reply = await pending.value
                    try await outbound.write(reply.frame)
                    slots.release()
                    if reply.closeConnection { return .writer }
                }
                return .writer
            }
            // The reader.
            group.addTask {
                defer { queue.finish() }
                do {
                    var first = true
                    for try await request in inbound {
                        await slots.acquire()
                        // Each request is its own task, awaited in order by the writer: requests of one
                        // connection run concurrently (and may share a group commit), replies stay ordered.
                        let task = Task {
                            switch request {
                            case .frame(let frame): await dispatcher.respond(to: frame, from: peer)
                            case .pending(let pending): await dispatcher.finish(pending, from: peer)
                            }
                        }
                        queue.yield(task)
                        if first {
                            // The first request may be a hello; nothing after a refused one may run.
                            first = false
                            if await task.value.closeConnection { break }
                        }
                    }
                } catch let error as FrameTooLargeError {
                    let reply = dispatcher.reply(id: 0, error: RegistryError(.frameTooLarge, error.description))
                    queue.yield(Task { RequestDispatcher.Reply(frame: reply.frame, closeConnection: true) })
                } catch {
                    logger.debug("connection read ended", metadata: ["error": "\(error)"])
                }
                return .reader
            }
            if try await group.next() == .writer {
                group.cancelAll()  // a reply closed the connection: stop reading
            } else {
                _ = try await group.next()  // the reader is done: let the writer drain
            }
        }
    }
}

extension RegistryServer {
    /// The connected peer's credentials (SO_PEERCRED), read once per connection.
    static func peer(of channel: any Channel) async -> Peer? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let credentials: PeerCredentials? = try? await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)
        ).get()
        return credentials.map(Peer.init(credentials:))
    }
}

/// Closes a connection on which nothing was read for the idle timeout.
final class IdleCloseHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

@available(*, unavailable)
extension IdleCloseHandler: Sendable {}
