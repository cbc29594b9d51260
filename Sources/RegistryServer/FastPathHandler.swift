import Glibc
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol

/// What reaches a connection's async reader: a frame it must start itself, or a request the event
/// loop already decoded and checked (with the size of its frame, charged to the connection's account
/// until its reply is written).
enum InboundRequest: Sendable {
    case frame(ByteBuffer)
    case pending(RequestDispatcher.Pending, frameBytes: Int)

    var frameBytes: Int {
        switch self {
        case .frame(let frame): frame.readableBytes
        case .pending(_, let bytes): bytes
        }
    }
}

/// Splits the connection's bytes into frames and answers on the event loop every request that needs
/// no task: authentications that write nothing and refusals (answered at once), and registrations
/// (started on the engine's writer, answered from its completion). Everything else is passed on to
/// the connection's async reader.
///
/// It splits the frames itself (with ``FrameDecoder/nextFrame(_:)``) rather than behind a
/// `ByteToMessageHandler`: one handler less for every request to pass. A frame announcing more than
/// the maximum reaches the reader as ``FrameTooLargeError`` after the frames before it are answered,
/// and nothing after it is read; a partial frame left when the input ends is dropped (no whole
/// request to answer).
///
/// Most traffic is authentication: a few dot products under a read lock, microseconds of work.
/// Answering it here saves two task switches per request. A registration waits for a group commit;
/// started here with a completion, it costs no task, no continuation and no trip through the async
/// channel's reader and writer. Identifications and administration still run as tasks.
///
/// The promise of ``Connection`` holds across both ways:
/// - Replies stay in request order. Requests answered here queue in `inFlight` and are written as
///   their heads complete. A request that must be passed on waits (in `waiting`) until nothing
///   here is unanswered; while anything passed on is unanswered, every request is passed on.
/// - At most `maximumRequestsInFlight` requests are owed a reply here at once; beyond that, and while
///   a request waits, the socket is not read (back-pressure, as in the async reader).
/// - The end of the input (the client half-closed, or the daemon draining) and a frame too large
///   reach the async reader only once every request before them is answered, so the connection
///   does not close under a running registration. Once draining, a registration not yet started is
///   refused with `SHUTTING_DOWN`.
final class FastPathHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = InboundRequest
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A request answered here, in request order, with its reply once known.
    private struct Slot {
        let sequence: UInt64
        /// Its frame's size, charged to the account until the reply is written.
        let requestBytes: Int
        var reply: RequestDispatcher.Reply?
    }

    private let dispatcher: RequestDispatcher
    private let account: ConnectionAccount
    private let state: ConnectionState
    private let maximumInFlight: Int
    private let decoder: FrameDecoder
    /// The start of a frame whose end has not arrived yet.
    private var partial: ByteBuffer?
    /// A frame was too large: nothing more is read as frames.
    private var broken = false
    private var peer: Peer?
    /// False until the peer's credentials are read; requests meanwhile go the async way.
    private var peerKnown = false
    /// Requests passed on whose reply has not been written yet.
    private var passedOnUnanswered = 0
    /// Requests answered here whose reply has not been written yet, oldest first.
    private var inFlight = CircularBuffer<Slot>()
    private var nextSequence: UInt64 = 0
    /// Requests read and not yet answered, started or passed on, oldest first: each waits for the
    /// requests before it (one to be passed on), or for room in `inFlight`.
    private var waiting = CircularBuffer<InboundRequest>()
    /// Inbound events held back until every request read before them is answered.
    private var heldEvents: [HeldEvent] = []
    /// A read of the socket was asked for and held back (back-pressure).
    private var readHeld = false
    private var closing = false
    private var inactive = false
    /// Whether ``pump(_:)`` is running (a completion on the event loop can call it from inside).
    private var pumping = false
    /// Whether requests were passed on since the async reader last had a read-complete event (it
    /// takes them on that event).
    private var passedOn = false

    private enum HeldEvent {
        case inputClosed
        case error(any Error)
    }

    /// - Parameter peer: the peer, for a channel that cannot tell its credentials (an in-memory test
    ///   channel); nil: read from the socket when the channel becomes active.
    init(
        dispatcher: RequestDispatcher, account: ConnectionAccount, state: ConnectionState, maximumRequestsInFlight: Int,
        maximumFrameBytes: Int, peer: Peer? = nil
    ) {
        self.dispatcher = dispatcher
        self.account = account
        self.state = state
        self.maximumInFlight = max(1, maximumRequestsInFlight)
        self.decoder = FrameDecoder(maximumFrameLength: maximumFrameBytes)
        self.peer = peer
        self.peerKnown = peer != nil
    }

    func channelActive(context: ChannelHandlerContext) {
        if let provider = context.channel as? any SocketOptionProvider {
            // On the event loop this completes at once.
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
                .whenComplete { (result: Result<PeerCredentials, any Error>) in
                    self.peer = (try? result.get()).map(Peer.init(credentials:))
                    self.peerKnown = true
                }
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Nothing more can be written. The connection gives back every byte still charged when it
        // ends, so the requests dropped here release nothing themselves; registrations still
        // running finish (carried out, their replies lost with the peer).
        self.inactive = true
        self.inFlight.removeAll()
        self.waiting.removeAll()
        self.heldEvents.removeAll()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.broken else { return }
        var bytes = self.unwrapInboundIn(data)
        if var partial = self.partial {
            self.partial = nil
            partial.writeBuffer(&bytes)
            bytes = partial
        }
        do {
            while let frame = try self.decoder.nextFrame(&bytes) {
                // Held until the reply is written (here, or by the connection's writer).
                self.account.charge(frame.readableBytes)
                if self.waiting.isEmpty && !self.closing {
                    // The usual case, without a trip through the queue: nothing waits before it.
                    self.pumping = true
                    if let blocked = self.take(.frame(frame), context: context), !self.inactive { self.waiting.append(blocked) }
                    self.pumping = false
                } else {
                    self.waiting.append(.frame(frame))
                }
            }
        } catch {
            self.broken = true
            self.heldEvents.append(.error(error))
        }
        if bytes.readableBytes > 0 && !self.broken { self.partial = bytes }
        if !self.waiting.isEmpty || !self.heldEvents.isEmpty || self.readHeld { self.pump(context) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        // A burst answered here entirely gives the async reader nothing to take: skipping the event
        // saves its handler's work on every fast-path request.
        self.completePassingOn(context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .some(.inputClosed) = event as? ChannelEvent {
            self.heldEvents.append(.inputClosed)
            self.pumpAndFlush(context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// A reply from the async side: one fewer request passed on outstanding.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if self.passedOnUnanswered > 0 { self.passedOnUnanswered -= 1 }
        context.write(data, promise: promise)
    }

    /// Holds the socket's reads back while requests wait or the most allowed run here.
    func read(context: ChannelHandlerContext) {
        if self.mustHoldReads {
            self.readHeld = true
        } else {
            context.read()
        }
    }

    private var mustHoldReads: Bool { !self.waiting.isEmpty || self.inFlight.count >= self.maximumInFlight }

    /// Takes the waiting requests in order as far as they can go, then passes on the held events
    /// once nothing read before them is unanswered.
    private func pump(_ context: ChannelHandlerContext) {
        guard !self.pumping else { return }
        self.pumping = true
        defer { self.pumping = false }
        while !self.waiting.isEmpty {
            // Taken off first: answering can close the channel at once (a reply that ends the
            // connection), which empties the queue from inside `take`.
            let request = self.waiting.removeFirst()
            if self.closing || self.inactive {
                // After a reply that closes the connection nothing more is run or answered.
                if !self.inactive { self.account.release(request.frameBytes) }
                continue
            }
            if let blocked = self.take(request, context: context) {
                if !self.inactive { self.waiting.prepend(blocked) }
                break
            }
        }
        if self.waiting.isEmpty && self.inFlight.isEmpty && !self.heldEvents.isEmpty && !self.inactive {
            let events = self.heldEvents
            self.heldEvents = []
            // What was passed on reaches the reader before the events that end its input.
            self.completePassingOn(context)
            for event in events {
                switch event {
                case .inputClosed: context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
                case .error(let error): context.fireErrorCaught(error)
                }
            }
        }
        if self.readHeld && !self.mustHoldReads && !self.broken {
            self.readHeld = false
            context.read()
        }
    }

    /// Answers, starts or passes on one request; returns it (begun, if it was) when it has to wait.
    private func take(_ request: InboundRequest, context: ChannelHandlerContext) -> InboundRequest? {
        let bytes = request.frameBytes
        guard self.peerKnown && self.passedOnUnanswered == 0 else {
            self.passOn(request, context: context)
            return nil
        }
        let pending: RequestDispatcher.Pending
        switch request {
        case .frame(let frame):
            switch self.dispatcher.begin(frame, from: self.peer) {
            case .reply(let reply):
                self.answer(reply, requestBytes: bytes, context: context)
                return nil
            case .pending(let begun):
                pending = begun
            }
        case .pending(let begun, _):
            pending = begun
        }
        if self.state.value != .open {
            let refusal = self.dispatcher.refuse(
                pending, with: RegistryError(.shuttingDown, "the daemon is shutting down; the request was not carried out"), from: self.peer)
            self.answer(refusal, requestBytes: bytes, context: context)
            return nil
        }
        if pending.startsWithoutTask {
            guard self.inFlight.count < self.maximumInFlight else { return .pending(pending, frameBytes: bytes) }
            self.start(pending, requestBytes: bytes, context: context)
            return nil
        }
        guard self.inFlight.isEmpty else { return .pending(pending, frameBytes: bytes) }
        self.passOn(.pending(pending, frameBytes: bytes), context: context)
        return nil
    }

    /// A reply known at once: written now when nothing before it is unanswered, else queued.
    private func answer(_ reply: RequestDispatcher.Reply, requestBytes: Int, context: ChannelHandlerContext) {
        if reply.closeConnection { self.closing = true }
        guard self.inFlight.isEmpty else {
            self.inFlight.append(Slot(sequence: self.takeSequence(), requestBytes: requestBytes, reply: reply))
            return
        }
        self.write(reply, requestBytes: requestBytes, context: context)
    }

    /// Starts a registration; its completion writes the reply in turn.
    private func start(_ pending: RequestDispatcher.Pending, requestBytes: Int, context: ChannelHandlerContext) {
        let sequence = self.takeSequence()
        // Queued first: a refusal before the write queue completes at once, inside the call.
        self.inFlight.append(Slot(sequence: sequence, requestBytes: requestBytes, reply: nil))
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.dispatcher.finish(pending, from: self.peer, on: context.eventLoop) { reply in
            let (handler, context) = bound.value
            handler.complete(sequence, with: reply, context: context)
        }
    }

    /// A started registration's reply: written with any answered behind it once it is the oldest.
    private func complete(_ sequence: UInt64, with reply: RequestDispatcher.Reply, context: ChannelHandlerContext) {
        guard let oldest = self.inFlight.first?.sequence, sequence >= oldest else { return }  // the channel closed meanwhile
        let index = self.inFlight.index(self.inFlight.startIndex, offsetBy: Int(sequence - oldest))
        self.inFlight[index].reply = reply
        while let slot = self.inFlight.first, let ready = slot.reply {
            self.inFlight.removeFirst()
            self.write(ready, requestBytes: slot.requestBytes, context: context)
        }
        // Inside a pump (a refusal completing at once), its caller goes on and flushes.
        if !self.pumping { self.pumpAndFlush(context) }
    }

    /// ``pump(_:)`` outside a read burst, whose read-complete event would otherwise flush the
    /// replies and hand the async reader what was passed on.
    private func pumpAndFlush(_ context: ChannelHandlerContext) {
        self.pump(context)
        context.flush()
        self.completePassingOn(context)
    }

    /// Writes a reply (flushed at the end of the read burst or completion) and releases its request.
    private func write(_ reply: RequestDispatcher.Reply, requestBytes: Int, context: ChannelHandlerContext) {
        self.account.release(requestBytes)
        if reply.closeConnection {
            context.writeAndFlush(self.wrapOutboundOut(reply.framed)).whenComplete { _ in context.close(promise: nil) }
        } else {
            context.write(self.wrapOutboundOut(reply.framed), promise: nil)
        }
    }

    private func passOn(_ request: InboundRequest, context: ChannelHandlerContext) {
        self.passedOnUnanswered += 1
        self.passedOn = true
        context.fireChannelRead(self.wrapInboundOut(request))
    }

    /// Hands what was passed on to the async reader (it takes reads on the read-complete event).
    private func completePassingOn(_ context: ChannelHandlerContext) {
        if self.passedOn {
            self.passedOn = false
            context.fireChannelReadComplete()
        }
    }

    private func takeSequence() -> UInt64 {
        defer { self.nextSequence += 1 }
        return self.nextSequence
    }
}

@available(*, unavailable)
extension FastPathHandler: Sendable {}
