import Logging
import NIOCore

/// The first handler of every connection (next to the socket): it decides when the daemon reads
/// from the client and when a client has held its slot long enough.
///
/// - **Back-pressure.** A read is held back while the connection's unwritten replies exceed its
///   write-buffer high-water mark (`maximumUnwrittenReplyBytes`) or while the daemon's
///   ``BufferBudget`` is exhausted and this connection holds bytes of it. Replies answered on the
///   event loop (``FastPathHandler``) are bounded this way too: a client that pipelines and never
///   reads stops being read from instead of growing the daemon's memory.
/// - **Frame deadline and rate.** Once a frame's first byte is in, the whole frame must arrive within
///   `frameDeadline` of the daemon waiting for it, and after its first second (``frameGrace``) at
///   `minimumFrameRate` bytes per second on average: a client trickling bytes to hold a connection
///   is closed within a couple of seconds. Time during which the daemon holds its reads back
///   (back-pressure) does not count, and once the input is shut (draining, or the client
///   half-closed) a partial frame is dropped.
/// - **Idle timeout.** A connection with no request in progress (no partial frame, every request
///   answered) that sends nothing for `idleTimeout` is closed; one waiting for the reply to its own
///   long request is not idle.
/// - **Making room.** The connection tells its ``ConnectionAccount`` since when it has had no request
///   in progress, and closes itself when ``ConnectionSlots`` asks, if it still has none and has been
///   idle or inside an unfinished frame for at least the grace asked for.
///
/// It follows frame boundaries from the length prefixes itself (without decoding) and counts
/// requests in progress as frames completed minus replies written (one write per reply here).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let account: ConnectionAccount
    private let frameDeadline: TimeAmount
    /// Bytes per second a frame in progress must average after ``frameGrace``; 0: no minimum.
    private let minimumFrameRate: Int
    /// How long a frame may take before its rate counts (mod_reqtimeout gives a header its first
    /// second the same way): a frame that is written at once arrives well within it.
    static let frameGrace = TimeAmount.seconds(1)
    private let idleTimeout: TimeAmount
    private let logger: Logger

    /// Length-prefix bytes of the current frame seen so far (0...3), and their value.
    private var prefixBytes = 0
    private var prefix: UInt32 = 0
    /// Body bytes of the current frame still to come.
    private var bodyRemaining = 0
    /// Bytes of the unfinished frame received so far (prefix included).
    private var frameBytes = 0
    /// Frames complete whose reply has not been written yet.
    private var inProgress = 0
    /// Whether any frame has arrived whole on this connection.
    private var completedAFrame = false
    /// Time the unfinished frame has waited for bytes while the daemon was reading, and since when
    /// it has been waiting in the current read (nil: no read outstanding, or between frames). Time
    /// the daemon itself did not read (back-pressure) does not count against the client.
    private var frameWaited = TimeAmount.zero
    private var waitingSince: NIODeadline?
    /// The input is shut (the daemon draining, or the client half-closed): no frame can complete.
    private var inputClosed = false
    /// Since when nothing is in progress (nil while a request or a frame is).
    private var quietSince: NIODeadline?
    /// Checks both deadlines a few times per period: one timer per connection, not one per request
    /// (scheduling and cancelling a timer per frame costs more than the authentication itself).
    private var watch: Scheduled<Void>?
    /// A read was asked for and held back.
    private var readHeld = false
    private var context: ChannelHandlerContext?

    init(account: ConnectionAccount, frameDeadline: TimeAmount, minimumFrameRate: Int = 0, idleTimeout: TimeAmount, logger: Logger) {
        self.account = account
        self.frameDeadline = frameDeadline
        self.minimumFrameRate = minimumFrameRate
        self.idleTimeout = idleTimeout
        self.logger = logger
    }

    private var insideFrame: Bool { self.prefixBytes > 0 || self.bodyRemaining > 0 }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let me = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.account.setMakeRoom { graces in
            me.eventLoop.submit { me.value.closeToMakeRoom(graces) }
        }
        self.account.noteBusy(false)
        if context.channel.isActive { self.startWatch(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.stop()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.startWatch(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.stop()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        var frameStarted = false
        // Walked on local copies of the state, written back once: the handler's stored properties,
        // touched inside the closure, would each cost a dynamic exclusivity check per byte.
        var (prefix, prefixBytes, bodyRemaining, inProgress, frameBytes) = (
            self.prefix, self.prefixBytes, self.bodyRemaining, self.inProgress, self.frameBytes
        )
        buffer.withUnsafeReadableBytes { bytes in
            var index = 0
            while index < bytes.count {
                if bodyRemaining > 0 {
                    let take = min(bodyRemaining, bytes.count - index)
                    bodyRemaining -= take
                    frameBytes += take
                    index += take
                    if bodyRemaining == 0 { inProgress += 1 }
                    continue
                }
                if prefixBytes == 0 {
                    frameStarted = true
                    frameBytes = 0
                }
                frameBytes += 1
                prefix = prefix << 8 | UInt32(bytes[index])
                prefixBytes += 1
                index += 1
                if prefixBytes == 4 {
                    bodyRemaining = Int(prefix)
                    prefixBytes = 0
                    prefix = 0
                    if bodyRemaining == 0 { inProgress += 1 }  // an empty frame is whole at once
                }
            }
        }
        (self.prefix, self.prefixBytes, self.bodyRemaining, self.inProgress, self.frameBytes) = (
            prefix, prefixBytes, bodyRemaining, inProgress, frameBytes
        )
        if !self.insideFrame {
            self.frameWaited = .zero
            self.waitingSince = nil
        } else if frameStarted {
            // The unfinished frame began in this read: its deadline counts from now.
            self.frameWaited = .zero
            self.waitingSince = context.eventLoop.now
        }
        self.noteQuiet(context)
        if self.inProgress > 0 { self.completedAFrame = true }
        self.account.noteBusy(self.inProgress > 0)
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if let since = self.waitingSince {
            self.frameWaited = self.frameWaited + (context.eventLoop.now - since)
            self.waitingSince = nil
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .some(.inputClosed) = event as? ChannelEvent {
            // A partial frame can no longer complete; it is dropped, not waited for.
            self.inputClosed = true
            self.prefixBytes = 0
            self.bodyRemaining = 0
            self.waitingSince = nil
            self.noteQuiet(context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if self.inProgress > 0 { self.inProgress -= 1 }
        self.noteQuiet(context)
        if self.inProgress == 0 { self.account.noteBusy(false) }
        context.write(data, promise: promise)
    }

    // MARK: Back-pressure

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable && self.account.mayRead {
            self.readHeld = false
            if self.insideFrame && self.waitingSince == nil { self.waitingSince = context.eventLoop.now }
            context.read()
            return
        }
        self.readHeld = true
        if context.channel.isWritable {
            // Held for the budget: ask to be woken on this connection's event loop when there is room.
            let wake = NIOLoopBound(self, eventLoop: context.eventLoop)
            let waiting = self.account.budget.waitForRoom(ObjectIdentifier(self)) {
                wake.eventLoop.execute { wake.value.resumeHeldRead() }
            }
            if !waiting { self.resumeHeldRead() }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.resumeHeldRead() }
        context.fireChannelWritabilityChanged()
    }

    private func resumeHeldRead() {
        guard self.readHeld, let context = self.context else { return }
        self.read(context: context)
    }

    // MARK: Deadlines

    /// (Times come from the event loop's clock, which tests can advance.)
    private func noteQuiet(_ context: ChannelHandlerContext) {
        if self.inProgress == 0 && !self.insideFrame {
            if self.quietSince == nil { self.quietSince = context.eventLoop.now }
        } else {
            self.quietSince = nil
        }
    }

    private func startWatch(_ context: ChannelHandlerContext) {
        guard self.watch == nil else { return }
        self.noteQuiet(context)
        self.scheduleCheck(context)
    }

    /// How long the unfinished frame has waited for bytes while the daemon was reading.
    private func frameWait(now: NIODeadline) -> TimeAmount {
        self.frameWaited + (self.waitingSince.map { now - $0 } ?? .zero)
    }

    /// Whether the unfinished frame is behind the minimum rate: after ``frameGrace``, fewer bytes
    /// than the rate times the time waited beyond it.
    private func frameTooSlow(waited: TimeAmount) -> Bool {
        guard self.minimumFrameRate > 0, waited > Self.frameGrace else { return false }
        let owed = Double(self.minimumFrameRate) * Double((waited - Self.frameGrace).nanoseconds) / 1e9
        return Double(self.frameBytes) < owed
    }

    private func scheduleCheck(_ context: ChannelHandlerContext) {
        var longest = min(self.frameDeadline.nanoseconds, self.idleTimeout.nanoseconds) / 4
        // The rate is checked a few times a second, so that a trickler loses its slot soon after it
        // falls behind (one timer per connection either way).
        if self.minimumFrameRate > 0 { longest = min(longest, Self.frameGrace.nanoseconds / 4) }
        let period = TimeAmount.nanoseconds(max(50_000_000, longest))
        self.watch = context.eventLoop.assumeIsolated().scheduleTask(in: period) {
            let now = context.eventLoop.now
            let waited = self.frameWait(now: now)
            if self.insideFrame && !self.inputClosed && waited >= self.frameDeadline {
                self.expire(context, "a frame was not completed within \(self.frameDeadline.nanoseconds / 1_000_000_000) s of its first byte")
            } else if self.insideFrame && !self.inputClosed && self.frameTooSlow(waited: waited) {
                self.expire(
                    context,
                    "a frame arrived slower than \(self.minimumFrameRate) bytes/s (\(self.frameBytes) bytes in \(waited.nanoseconds / 1_000_000) ms)")
            } else if let quiet = self.quietSince, now - quiet >= self.idleTimeout {
                self.expire(context, "idle for \(self.idleTimeout.nanoseconds / 1_000_000_000) s with no request in progress")
            } else if self.watch != nil {
                self.scheduleCheck(context)
            }
        }
    }

    private func stop() {
        self.watch?.cancel()
        self.watch = nil
        self.account.setMakeRoom(nil)
        self.account.budget.cancelWait(ObjectIdentifier(self))
    }

    /// Closes the connection to make room for a new one if it has no request in progress, is not
    /// held back by the daemon, and has done nothing useful for `graces.unproductive`: inside an
    /// unfinished frame, or never having completed one (see ``ConnectionSlots``; one idle between
    /// requests is left to the idle timeout). Returns whether it closed.
    private func closeToMakeRoom(_ graces: ConnectionSlots.Graces) -> Bool {
        guard let context = self.context, context.channel.isActive, self.inProgress == 0, !self.readHeld else { return false }
        let now = context.eventLoop.now
        let unproductive = self.insideFrame ? self.frameWait(now: now) : self.quietSince.map { now - $0 } ?? .zero
        guard self.insideFrame || !self.completedAFrame, unproductive >= graces.unproductive else { return false }
        self.expire(
            context,
            self.insideFrame
                ? "closed to make room: inside an unfinished frame for \(unproductive.nanoseconds / 1_000_000) ms"
                : "closed to make room: idle for \(unproductive.nanoseconds / 1_000_000) ms")
        return true
    }

    private func expire(_ context: ChannelHandlerContext, _ reason: String) {
        self.logger.info("closing a connection", metadata: ["reason": "\(reason)"])
        self.stop()
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}
