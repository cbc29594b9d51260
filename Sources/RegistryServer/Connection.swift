import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol
import Synchronization

/// One client connection: the reader that takes the requests its ``FastPathHandler`` passes on, the
/// writer that answers them in order, the in-flight accounting, and its state.
///
/// The promise it keeps (PROTOCOL §3), with its handler: every request it reads ends in exactly one of
/// - carried out and answered, or
/// - refused with an error and not carried out;
/// and a request it did not read (still in the socket when the connection closed) was not carried
/// out. Concretely:
/// - Each request passed on runs as a child task of the connection's task group, or (registrations)
///   is started with a completion whose reply the writer awaits in turn; the handler holds the end
///   of the input back until the requests it answers itself are answered. So no request outlives its
///   connection: the connection ends only after every request it started has finished and its reply
///   was written (or the peer was gone).
/// - ``drain()`` (the daemon stopping) stops reading; requests already read but not started are
///   answered `SHUTTING_DOWN` and not carried out; started ones finish and are answered; then the
///   connection closes.
/// - A client that half-closes its sending side still gets every reply (remote half-closure is
///   allowed on the channel).
/// - A reply that closes the connection (an unsupported hello, a frame too large) is decided while
///   reading, before any later request starts, so nothing after it runs.
final class Connection: Sendable {
    let channel: any Channel
    let account: ConnectionAccount
    private let dispatcher: RequestDispatcher
    private let maximumRequestsInFlight: Int
    private let logger: Logger
    /// Shared with the connection's ``FastPathHandler``, which refuses new work once draining.
    private let lifecycle: ConnectionState

    init(
        channel: any Channel, account: ConnectionAccount, state: ConnectionState, dispatcher: RequestDispatcher,
        maximumRequestsInFlight: Int, logger: Logger
    ) {
        self.channel = channel
        self.account = account
        self.lifecycle = state
        self.dispatcher = dispatcher
        self.maximumRequestsInFlight = maximumRequestsInFlight
        self.logger = logger
    }

    var state: ConnectionState.Value { self.lifecycle.value }

    /// Stops reading: what was read still gets its reply, what was not started is refused.
    func drain() {
        // Shutting the input down makes the frames already buffered arrive, then ends the inbound
        // stream; the client's unread bytes stay unread (and so not carried out).
        if self.lifecycle.beginDraining() { self.channel.close(mode: .input, promise: nil) }
    }

    /// Closes at once (the drain deadline passed): replies not yet written are lost to the client.
    func abort() {
        self.lifecycle.close()
        self.channel.close(promise: nil)
    }

    /// Serves the connection until the client stops sending (and has every reply), the daemon
    /// drains it, the peer goes away, or a reply closes it.
    func run(_ connection: NIOAsyncChannel<InboundRequest, ByteBuffer>, peer: Peer?) async {
        defer {
            self.lifecycle.close()
            // Requests unread in the channel's buffers and replies never written give their bytes back.
            self.account.releaseAll()
        }
        do {
            try await connection.executeThenClose { inbound, outbound in
                await self.exchange(inbound: inbound, outbound: outbound, peer: peer)
            }
        } catch {
            self.logger.debug("connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// Refuses the connection with one reply (the connection limit is reached), then closes it.
    func refuse(_ connection: NIOAsyncChannel<InboundRequest, ByteBuffer>, with error: RegistryError) async {
        defer {
            self.lifecycle.close()
            self.account.releaseAll()
        }
        try? await connection.executeThenClose { _, outbound in
            try await outbound.write(self.dispatcher.reply(id: 0, error: error).framed)
        }
    }

    /// A reply in the order of the requests: one given at once, or one a request task will give.
    private enum Queued: Sendable {
        case ready(RequestDispatcher.Reply, requestBytes: Int)
        case awaited(EventLoopFuture<RequestDispatcher.Reply>, requestBytes: Int)
    }

    private func exchange(
        inbound: NIOAsyncChannelInboundStream<InboundRequest>,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        peer: Peer?
    ) async {
        let slots = AsyncSemaphore(self.maximumRequestsInFlight)
        let (replies, queue) = AsyncStream<Queued>.makeStream()
        await withDiscardingTaskGroup { group in
            group.addTask { await self.write(replies, to: outbound, slots: slots) }
            await self.read(inbound, into: queue, slots: slots, group: &group, peer: peer)
            queue.finish()
        }
    }

    /// The reader: takes requests in order, at most `maximumRequestsInFlight` unanswered at once
    /// (further frames wait unread: back-pressure, not refusal), and starts each as a child task.
    private func read(
        _ inbound: NIOAsyncChannelInboundStream<InboundRequest>,
        into queue: AsyncStream<Queued>.Continuation,
        slots: AsyncSemaphore,
        group: inout DiscardingTaskGroup,
        peer: Peer?
    ) async {
        let dispatcher = self.dispatcher
        do {
            for try await request in inbound {
                await slots.acquire()
                let bytes = request.frameBytes
                let start: RequestDispatcher.Start
                switch request {
                case .frame(let frame): start = dispatcher.begin(frame, from: peer)
                case .pending(let pending, _): start = .pending(pending)
                }
                switch start {
                case .reply(let reply):
                    self.account.charge(reply.framed.readableBytes)
                    queue.yield(.ready(reply, requestBytes: bytes))
                    // Nothing after a reply that closes the connection may run.
                    if reply.closeConnection { return }
                case .pending(let pending) where self.state != .open:
                    let reply = dispatcher.refuse(
                        pending, with: RegistryError(.shuttingDown, "the daemon is shutting down; the request was not carried out"),
                        from: peer)
                    self.account.charge(reply.framed.readableBytes)
                    queue.yield(.ready(reply, requestBytes: bytes))
                case .pending(let pending):
                    let promise = self.channel.eventLoop.makePromise(of: RequestDispatcher.Reply.self)
                    queue.yield(.awaited(promise.futureResult, requestBytes: bytes))
                    let account = self.account
                    if pending.startsWithoutTask {
                        // Completed from the engine's writer without a task of its own; the writer
                        // below still waits for its reply before the connection ends.
                        dispatcher.finish(pending, from: peer, on: self.channel.eventLoop) { reply in
                            account.charge(reply.framed.readableBytes)
                            promise.succeed(reply)
                        }
                        continue
                    }
                    group.addTask {
                        let reply = await dispatcher.finish(pending, from: peer)
                        account.charge(reply.framed.readableBytes)
                        promise.succeed(reply)
                    }
                }
            }
        } catch let error as FrameTooLargeError {
            let reply = dispatcher.reply(id: 0, error: RegistryError(.frameTooLarge, error.description))
            self.account.charge(reply.framed.readableBytes)
            queue.yield(.ready(RequestDispatcher.Reply(framed: reply.framed, closeConnection: true), requestBytes: 0))
        } catch {
            self.logger.debug("connection read ended", metadata: ["error": "\(error)"])
        }
    }

    /// The writer: replies in request order. A reply that cannot be written (the peer is gone) is
    /// dropped, but the queue is still followed to the end so every slot and byte is released.
    private func write(
        _ replies: AsyncStream<Queued>, to outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, slots: AsyncSemaphore
    ) async {
        // However the writer ends, a reader waiting for a slot must not wait forever.
        defer { slots.close() }
        var peerGone = false
        for await queued in replies {
            let reply: RequestDispatcher.Reply
            let requestBytes: Int
            switch queued {
            case .ready(let ready, let bytes):
                (reply, requestBytes) = (ready, bytes)
            case .awaited(let future, let bytes):
                // Only ever succeeded, by a child task of this connection.
                reply = (try? await future.get()) ?? RequestDispatcher.Reply(framed: ByteBuffer(), closeConnection: true)
                requestBytes = bytes
            }
            if !peerGone {
                do {
                    try await outbound.write(reply.framed)
                } catch {
                    peerGone = true
                    self.logger.debug("reply not written: the peer is gone", metadata: ["error": "\(error)"])
                }
            }
            self.account.release(requestBytes + reply.framed.readableBytes)
            slots.release()
            if reply.closeConnection { return }
        }
    }
}

/// A connection's state, shared by its ``Connection`` (which changes it) and its
/// ``FastPathHandler`` (which starts no more requests once the connection drains).
final class ConnectionState: Sendable {
    enum Value: UInt8 {
        /// Reading and running requests.
        case open
        /// Not reading; requests read but not started are refused with `SHUTTING_DOWN`.
        case draining
        /// Every request answered (or the peer gone); the channel is closed.
        case closed
    }

    private let raw = Atomic<UInt8>(Value.open.rawValue)

    var value: Value { Value(rawValue: self.raw.load(ordering: .acquiring))! }

    /// Open → draining; false when it was not open.
    func beginDraining() -> Bool {
        self.raw.compareExchange(expected: Value.open.rawValue, desired: Value.draining.rawValue, ordering: .acquiringAndReleasing)
            .exchanged
    }

    func close() {
        self.raw.store(Value.closed.rawValue, ordering: .releasing)
    }
}
