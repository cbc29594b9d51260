import Logging
import NIOCore
import RegistryModel
import RegistryProtocol

/// What a connection hands its requests to: the ``RequestDispatcher``, or a fake in tests.
protocol ConnectionRequests: Sendable {
    /// Runs one request frame from `peer`; `receiver` gets its reply once, under `sequence`, on
    /// `eventLoop` (before this returns when it needs no waiting). `draining`: refuse it with
    /// `SHUTTING_DOWN`.
    func start(
        _ frame: ByteBuffer, from peer: Peer?, draining: Bool, on eventLoop: (any EventLoop)?, replyTo receiver: any ReplyReceiver,
        sequence: UInt64)
    /// The reply to a frame announcing more than the maximum (it closes the connection).
    func refusal(_ error: FrameTooLargeError) -> RequestDispatcher.Reply
}

/// The one handler of a connection, next to the socket: it cuts the frames, runs the
/// ``ConnectionPipeline`` (reply order, the in-flight limit, back-pressure, half-closure, drain), and
/// keeps the deadlines. Everything about when to dispatch, write, read and close is decided by the
/// pipeline value; this class carries its actions out on the channel and keeps what only a channel
/// has: the clock, the budget shared with other connections, the peer.
///
/// - **Frames** are cut here once (``FrameDecoder/nextFrame(_:)``), keeping a partial frame until its
///   end arrives; there is no decoder handler, and replies come framed from the dispatcher (no
///   encoder). A frame too large is answered after every request before it, and ends the connection.
/// - **Back-pressure.** A read is held back while the pipeline says so (requests waiting, the
///   in-flight limit reached, the channel not writable) or while the daemon's ``BufferBudget`` is
///   exhausted and this connection holds bytes of it: a client that pipelines and never reads
///   its replies stops being read from instead of growing the daemon's memory.
/// - **Frame deadline and rate.** Once a frame's first byte is in, the whole frame must arrive within
///   `frameDeadline` of the daemon waiting for it, and after its first second (``frameGrace``) at
///   `minimumFrameRate` bytes per second on average: a client trickling bytes to hold a connection
///   is closed within a couple of seconds. Time during which reads are held back does not count,
///   and once the input is shut (draining, or the client half-closed) a partial frame is dropped.
/// - **Idle timeout.** A connection with no request in progress (no partial frame, every request
///   answered) that sends nothing for `idleTimeout` is closed; one waiting for the reply to its own
///   long request is not idle.
/// - **Making room.** The connection tells its ``ConnectionAccount`` since when it has had no request
///   in progress, and closes itself when ``ConnectionSlots`` asks, if it still has none and has been
///   idle or inside an unfinished frame for at least the grace asked for.
/// - **The end.** `finished` succeeds once the channel is closed and every request dispatched has
///   finished (a registration queued before the peer left is still carried out): the server waits
///   for it, so no request outlives the server.
final class ConnectionHandler<Requests: ConnectionRequests>: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Limits {
        var maximumInFlight: Int
        var maximumFrameBytes: Int
        var frameDeadline: TimeAmount
        /// Bytes per second a frame in progress must average after ``frameGrace``; 0: no minimum.
        var minimumFrameRate = 0
        var idleTimeout: TimeAmount
    }

    /// How long a frame may take before its rate counts (mod_reqtimeout gives a header its first
    /// second the same way): a frame that is written at once arrives well within it.
    static var frameGrace: TimeAmount { .seconds(1) }

    private var pipeline: ConnectionPipeline
    private let requests: Requests
    private let account: ConnectionAccount
    private let limits: Limits
    private let logger: Logger
    private let decoder: FrameDecoder
    private let finished: EventLoopPromise<Void>
    /// Where the dispatcher hands the replies: made once, not a closure per request.
    private let replies = Replies()
    private var peer: Peer?
    private var context: ChannelHandlerContext?

    /// The start of a frame whose end has not arrived yet.
    private var partial: ByteBuffer?
    /// Whether `process` is running (a reply completed at once reaches it from inside).
    private var processing = false
    /// Inside a burst of reads: replies are flushed at its end, once.
    private var reading = false
    private var unflushed = false

    /// Time the unfinished frame has waited for bytes while the daemon was reading, and since when
    /// it has been waiting in the current read (nil: no read outstanding, or between frames).
    private var frameWaited = TimeAmount.zero
    private var waitingSince: NIODeadline?
    /// Whether any frame has arrived whole on this connection.
    private var completedAFrame = false
    /// Since when nothing is in progress (nil while a request or a frame is).
    private var quietSince: NIODeadline?
    /// Checks the deadlines a few times per period: one timer per connection, not one per request
    /// (scheduling and cancelling a timer per frame costs more than an authentication).
    private var watch: Scheduled<Void>?

    /// - Parameters:
    ///   - peer: the peer when known already (tests); else given by ``admit(peer:)`` before reading starts.
    ///   - finished: succeeded once the channel is closed and every request it dispatched has finished.
    init(
        requests: Requests, account: ConnectionAccount, limits: Limits, logger: Logger, finished: EventLoopPromise<Void>,
        peer: Peer? = nil
    ) {
        self.requests = requests
        self.account = account
        self.limits = limits
        self.logger = logger
        self.finished = finished
        self.peer = peer
        self.decoder = FrameDecoder(maximumFrameLength: limits.maximumFrameBytes)
        self.pipeline = ConnectionPipeline(maximumInFlight: limits.maximumInFlight)
    }

    private var insideFrame: Bool { self.partial != nil }

    // MARK: What the server asks

    /// The peer's credentials, read once by the server before it lets the connection read.
    func admit(peer: Peer?) {
        self.peer = peer
    }

    /// Stops reading: what was read still gets its reply (those not yet started `SHUTTING_DOWN`).
    func drain() {
        guard let context = self.context else { return }
        self.pipeline.drain()
        self.partial = nil
        self.process(context)
    }

    /// Refuses the connection with one reply (the connection limit is reached), then closes it.
    func refuse(with reply: RequestDispatcher.Reply) {
        guard let context = self.context else { return }
        self.stopWatch()
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)  // the write completes on this loop
        context.writeAndFlush(self.wrapOutboundOut(reply.framed)).whenComplete { _ in bound.value.close(promise: nil) }
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.replies.handler = self
        let me = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.account.setMakeRoom { graces in
            me.eventLoop.submit { me.value.closeToMakeRoom(graces) }
        }
        self.account.noteBusy(false)
        if context.channel.isActive { self.startWatch(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.stopWatch()
        self.context = nil
        // Removed without becoming inactive (the pipeline torn down): nothing more will report.
        if !self.pipeline.inactive {
            self.pipeline.channelInactive()
            self.finishIfDone()
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.startWatch(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.stopWatch()
        // Nothing more can be written. The server gives back every byte still charged when the
        // connection ends; registrations still running finish (carried out, their replies lost).
        self.pipeline.channelInactive()
        self.finishIfDone()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.pipeline.inputEnded else { return }
        var bytes = self.unwrapInboundIn(data)
        let continued = self.partial != nil
        if var partial = self.partial {
            self.partial = nil
            partial.writeBuffer(&bytes)
            bytes = partial
        }
        self.reading = true
        var completed = 0
        do {
            while let frame = try self.decoder.nextFrame(&bytes) {
                completed += 1
                // Held until the reply is written.
                let size = frame.readableBytes
                self.account.charge(size)
                if !self.pipeline.frameRead(frame, bytes: size) { self.account.release(size) }
            }
        } catch {
            self.pipeline.frameTooLarge(self.requests.refusal(error))
        }
        if bytes.readableBytes > 0 && !self.pipeline.inputEnded { self.partial = bytes }
        if completed > 0 { self.completedAFrame = true }
        if !self.insideFrame {
            self.frameWaited = .zero
            self.waitingSince = nil
        } else if completed > 0 || !continued {
            // The unfinished frame began in this read: its deadline counts from now.
            self.frameWaited = .zero
            self.waitingSince = context.eventLoop.now
        }
        self.process(context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.reading = false
        if let since = self.waitingSince {
            self.frameWaited = self.frameWaited + (context.eventLoop.now - since)
            self.waitingSince = nil
        }
        self.flushIfNeeded(context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .some(.inputClosed) = event as? ChannelEvent {
            // A partial frame can no longer complete; it is dropped, not waited for.
            self.partial = nil
            self.waitingSince = nil
            self.pipeline.inputClosed()
            self.process(context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.pipeline.writabilityChanged(context.channel.isWritable)
        self.process(context)
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset or a failed read: the peer is gone, or the socket is unusable.
        self.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: Back-pressure

    func read(context: ChannelHandlerContext) {
        let budgetAllows = self.account.mayRead
        if self.pipeline.readRequested(budgetAllows: budgetAllows) {
            if self.insideFrame && self.waitingSince == nil { self.waitingSince = context.eventLoop.now }
            context.read()
            return
        }
        if !budgetAllows {
            // Held for the budget: ask to be woken on this connection's event loop when there is room.
            let wake = NIOLoopBound(self, eventLoop: context.eventLoop)
            let waiting = self.account.budget.waitForRoom(ObjectIdentifier(self)) {
                wake.eventLoop.execute { wake.value.resumeHeldRead() }
            }
            if !waiting { context.eventLoop.assumeIsolated().execute { self.resumeHeldRead() } }
        }
    }

    private func resumeHeldRead() {
        guard self.pipeline.readHeld, let context = self.context else { return }
        self.read(context: context)
    }

    // MARK: The pipeline's actions

    /// Carries out the pipeline's actions until it has none left.
    private func process(_ context: ChannelHandlerContext) {
        guard !self.processing else { return }
        self.processing = true
        while let action = self.pipeline.nextAction() {
            switch action {
            case .dispatch(let sequence, let frame, let draining):
                self.requests.start(frame, from: self.peer, draining: draining, on: context.eventLoop, replyTo: self.replies, sequence: sequence)
            case .write(let reply, let heldBytes):
                self.account.release(heldBytes)
                context.write(self.wrapOutboundOut(reply.framed), promise: nil)
                self.unflushed = true
            case .release(let bytes):
                self.account.release(bytes)
            case .closeInput:
                context.close(mode: .input, promise: nil)
            case .read:
                self.read(context: context)
            case .close:
                // Closed once every reply written before has left: writes complete in order.
                self.unflushed = false
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(self.wrapOutboundOut(ByteBuffer())).whenComplete { _ in bound.value.close(promise: nil) }
            }
        }
        self.processing = false
        if !self.reading { self.flushIfNeeded(context) }
        self.noteProgress(context)
    }

    /// A dispatched request's reply (on the event loop).
    fileprivate func replied(_ sequence: UInt64, _ reply: RequestDispatcher.Reply) {
        let held = self.pipeline.replied(sequence, reply)
        if held > 0 { self.account.charge(held) }
        if let context = self.context { self.process(context) }
        self.finishIfDone()
    }

    private func flushIfNeeded(_ context: ChannelHandlerContext) {
        if self.unflushed {
            self.unflushed = false
            context.flush()
        }
    }

    private func finishIfDone() {
        guard self.pipeline.isFinished else { return }
        // Every reply is in: the receiver no longer keeps the handler (nor the handler itself).
        self.replies.handler = nil
        self.finished.succeed()
    }

    /// The connection's ``ReplyReceiver``. The dispatcher calls it on the connection's event loop,
    /// the only place `handler` is touched; it keeps the handler alive until the last reply is in.
    private final class Replies: ReplyReceiver, @unchecked Sendable {
        var handler: ConnectionHandler?

        func received(_ reply: RequestDispatcher.Reply, for sequence: UInt64) {
            self.handler?.replied(sequence, reply)
        }
    }

    // MARK: Deadlines

    /// Records whether a request or a frame is in progress (times from the event loop's clock,
    /// which tests can advance).
    private func noteProgress(_ context: ChannelHandlerContext) {
        let busy = self.pipeline.requestsInProgress > 0
        if busy || self.insideFrame {
            self.quietSince = nil
        } else if self.quietSince == nil {
            self.quietSince = context.eventLoop.now
        }
        self.account.noteBusy(busy)
    }

    private func startWatch(_ context: ChannelHandlerContext) {
        guard self.watch == nil else { return }
        self.noteProgress(context)
        self.scheduleCheck(context)
    }

    private func stopWatch() {
        self.watch?.cancel()
        self.watch = nil
        self.account.setMakeRoom(nil)
        self.account.budget.cancelWait(ObjectIdentifier(self))
    }

    /// How long the unfinished frame has waited for bytes while the daemon was reading.
    private func frameWait(now: NIODeadline) -> TimeAmount {
        self.frameWaited + (self.waitingSince.map { now - $0 } ?? .zero)
    }

    /// Whether the unfinished frame is behind the minimum rate: after ``frameGrace``, fewer bytes
    /// than the rate times the time waited beyond it.
    private func frameTooSlow(waited: TimeAmount) -> Bool {
        guard self.limits.minimumFrameRate > 0, waited > Self.frameGrace else { return false }
        let owed = Double(self.limits.minimumFrameRate) * Double((waited - Self.frameGrace).nanoseconds) / 1e9
        return Double(self.partial?.readableBytes ?? 0) < owed
    }

    private func scheduleCheck(_ context: ChannelHandlerContext) {
        var longest = min(self.limits.frameDeadline.nanoseconds, self.limits.idleTimeout.nanoseconds) / 4
        // The rate is checked a few times a second, so that a trickler loses its slot soon after it
        // falls behind (one timer per connection either way).
        if self.limits.minimumFrameRate > 0 { longest = min(longest, Self.frameGrace.nanoseconds / 4) }
        let period = TimeAmount.nanoseconds(max(50_000_000, longest))
        self.watch = context.eventLoop.assumeIsolated().scheduleTask(in: period) {
            let now = context.eventLoop.now
            let waited = self.frameWait(now: now)
            if self.insideFrame && waited >= self.limits.frameDeadline {
                self.expire(
                    context, "a frame was not completed within \(self.limits.frameDeadline.nanoseconds / 1_000_000_000) s of its first byte")
            } else if self.insideFrame && self.frameTooSlow(waited: waited) {
                self.expire(
                    context,
                    "a frame arrived slower than \(self.limits.minimumFrameRate) bytes/s (\(self.partial?.readableBytes ?? 0) bytes in \(waited.nanoseconds / 1_000_000) ms)"
                )
            } else if let quiet = self.quietSince, now - quiet >= self.limits.idleTimeout {
                self.expire(context, "idle for \(self.limits.idleTimeout.nanoseconds / 1_000_000_000) s with no request in progress")
            } else if self.watch != nil {
                self.scheduleCheck(context)
            }
        }
    }

    /// Closes the connection to make room for a new one if it has no request in progress, is not
    /// held back by the daemon, and has done nothing useful for long enough: `graces.unproductive`
    /// inside an unfinished frame or never having completed one, `graces.idle` between requests
    /// (see ``ConnectionSlots``). Returns whether it closed.
    private func closeToMakeRoom(_ graces: ConnectionSlots.Graces) -> Bool {
        guard let context = self.context, context.channel.isActive, self.pipeline.requestsInProgress == 0, !self.pipeline.readHeld
        else { return false }
        let now = context.eventLoop.now
        let unproductive = self.insideFrame ? self.frameWait(now: now) : self.quietSince.map { now - $0 } ?? .zero
        let grace = self.insideFrame || !self.completedAFrame ? graces.unproductive : graces.idle
        guard unproductive >= grace else { return false }
        self.expire(
            context,
            self.insideFrame
                ? "closed to make room: inside an unfinished frame for \(unproductive.nanoseconds / 1_000_000) ms"
                : "closed to make room: idle for \(unproductive.nanoseconds / 1_000_000) ms")
        return true
    }

    private func expire(_ context: ChannelHandlerContext, _ reason: String) {
        self.logger.info("closing a connection", metadata: ["reason": "\(reason)"])
        self.stopWatch()
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ConnectionHandler: Sendable {}

extension RequestDispatcher: ConnectionRequests {}
