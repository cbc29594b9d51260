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
/// - **Frame deadline.** Once a frame's first byte is in, the whole frame must arrive within
///   `frameDeadline` of the daemon waiting for it; a client trickling bytes to hold a connection is
///   closed. Time during which the daemon holds its reads back (back-pressure) does not count, and
///   once the input is shut (draining, or the client half-closed) a partial frame is dropped.
/// - **Idle timeout.** A connection with no request in progress (no partial frame, every request
///   answered) that sends nothing for `idleTimeout` is closed; one waiting for the reply to its own
///   long request is not idle.
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
    private let idleTimeout: TimeAmount
    private let logger: Logger

    /// Length-prefix bytes of the current frame seen so far (0...3), and their value.
    private var prefixBytes = 0
    private var prefix: UInt32 = 0
    /// Body bytes of the current frame still to come.
    private var bodyRemaining = 0
    /// Frames complete whose reply has not been written yet.
    private var inProgress = 0
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

    init(account: ConnectionAccount, frameDeadline: TimeAmount, idleTimeout: TimeAmount, logger: Logger) {
        self.account = account
        self.frameDeadline = frameDeadline
        self.idleTimeout = idleTimeout
        self.logger = logger
    }

    private var insideFrame: Bool { self.prefixBytes > 0 || self.bodyRemaining > 0 }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
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
        var (prefix, prefixBytes, bodyRemaining, inProgress) = (self.prefix, self.prefixBytes, self.bodyRemaining, self.inProgress)
        buffer.withUnsafeReadableBytes { bytes in
            var index = 0
            while index < bytes.count {
                if bodyRemaining > 0 {
                    let take = min(bodyRemaining, bytes.count - index)
                    bodyRemaining -= take
                    index += take
                    if bodyRemaining == 0 { inProgress += 1 }
                    continue
                }
                if prefixBytes == 0 { frameStarted = true }
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
        (self.prefix, self.prefixBytes, self.bodyRemaining, self.inProgress) = (prefix, prefixBytes, bodyRemaining, inProgress)
        if !self.insideFrame {
            self.frameWaited = .zero
            self.waitingSince = nil
        } else if frameStarted {
            // The unfinished frame began in this read: its deadline counts from now.
            self.frameWaited = .zero
            self.waitingSince = context.eventLoop.now
        }
        self.noteQuiet(context)
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

    private func scheduleCheck(_ context: ChannelHandlerContext) {
        let period = TimeAmount.nanoseconds(max(50_000_000, min(self.frameDeadline.nanoseconds, self.idleTimeout.nanoseconds) / 4))
        self.watch = context.eventLoop.assumeIsolated().scheduleTask(in: period) {
            let now = context.eventLoop.now
            let waited = self.frameWaited + (self.waitingSince.map { now - $0 } ?? .zero)
            if self.insideFrame && !self.inputClosed && waited >= self.frameDeadline {
                self.expire(context, "a frame was not completed within \(self.frameDeadline.nanoseconds / 1_000_000_000) s of its first byte")
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
        self.account.budget.cancelWait(ObjectIdentifier(self))
    }

    private func expire(_ context: ChannelHandlerContext, _ reason: String) {
        self.logger.info("closing a connection", metadata: ["reason": "\(reason)"])
        self.stop()
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}
