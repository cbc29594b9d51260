import NIOCore

/// One connection's request pipeline as a value: what was read, what runs, which replies are owed
/// and in what order, when to read and when to close. No I/O, no clock, no engine:
/// ``ConnectionHandler`` feeds it what happened (a frame read, a reply ready, the input closed, a
/// drain, writability) and carries out what ``nextAction()`` returns until it returns nil. Tested
/// on its own (`ConnectionPipelineTests`), as SwiftNIO tests its HTTP pipeline handler's state.
///
/// The promise it keeps (PROTOCOL.md): every request read ends in exactly one reply, carried out
/// and answered, or refused and not carried out; replies go out in request order.
/// - **Order.** Requests are dispatched in the order read, each into a slot; replies are written
///   as the oldest slot's reply arrives, whatever order the requests finish in.
/// - **In-flight limit.** At most `maximumInFlight` requests are dispatched and unanswered at once;
///   a frame read beyond that waits, unstarted, and the socket is not read while one waits.
/// - **Back-pressure.** Reads are also held while the channel is not writable (its unwritten
///   replies are over the high-water mark); the handler adds the daemon's buffer budget.
/// - **Half-closure and drain.** When the input ends (the client half-closed, or a drain shut it),
///   what was read is still dispatched and answered, then the connection closes. During a drain
///   every request dispatched from then on is refused (`SHUTTING_DOWN`): read but not started.
/// - **A reply that closes** (an unsupported hello, a frame too large) stops everything after it
///   from being dispatched; it is written, then the connection closes.
/// - **A peer that leaves** takes the owed replies with it; requests already dispatched still
///   finish (a registration queued is carried out), and ``isFinished`` waits for them.
struct ConnectionPipeline {
    typealias Reply = RequestDispatcher.Reply

    /// What the handler must do next.
    enum Action: Equatable {
        /// Start the request (refused with `SHUTTING_DOWN` when `draining`) and report its reply
        /// with ``replied(_:_:)`` under `sequence`.
        case dispatch(sequence: UInt64, frame: ByteBuffer, draining: Bool)
        /// Write the oldest owed reply; `heldBytes` (its request's, and its own while it waited) are
        /// no longer held.
        case write(Reply, heldBytes: Int)
        /// Frames read but never to be dispatched (after a reply that closes) no longer hold their bytes.
        case release(bytes: Int)
        /// Shut the input: no more reading (the drain).
        case closeInput
        /// A read held back may go ahead now (ask again: the budget may still hold it).
        case read
        /// Close once everything written has left (every reply owed is written, or one closed it).
        case close
    }

    /// A request read, in the order read, waiting for room to be dispatched; or a refusal decided
    /// while reading (a frame too large) that takes its place in the order.
    private enum Waiting {
        case frame(ByteBuffer, bytes: Int)
        case answered(Reply)
    }

    /// A dispatched request, until its reply is written.
    private struct Slot {
        let sequence: UInt64
        /// Its frame's bytes, and its reply's while the reply waits for the ones before it.
        var heldBytes: Int
        var reply: Reply?
    }

    /// Where the connection is in its life, in the order it may pass through them (from any, to
    /// `gone`). Each state holds only what matters in it, so that what the connection cannot be —
    /// closing and still reading, stopped yet dispatching, draining while it reads — cannot be
    /// written down either.
    private enum Lifecycle: Equatable {
        /// Frames are read and dispatched.
        case reading
        /// No frame will be read any more (the client half-closed, a drain shut the input, a frame was
        /// too large): what was read is still dispatched and answered, then the connection closes.
        case answering(Drain)
        /// A reply that closes the connection was decided: nothing more is dispatched; the replies
        /// up to it are written, then the connection closes.
        case stopped(Drain)
        /// `.close` was issued: every reply owed was written, or one closed the connection.
        case closing(Drain)
        /// The channel is gone: nothing more is written; requests dispatched still report.
        case gone

        /// The drain; none while reading (a drain ends the input) or once gone (nothing is done).
        var drain: Drain {
            switch self {
            case .answering(let drain), .stopped(let drain), .closing(let drain): drain
            case .reading, .gone: .none
            }
        }

        /// The same state with `drain`; reading, or gone, stay as they are.
        func with(_ drain: Drain) -> Lifecycle {
            switch self {
            case .answering: .answering(drain)
            case .stopped: .stopped(drain)
            case .closing: .closing(drain)
            case .reading, .gone: self
            }
        }
    }

    /// Whether the daemon drains the connection, and whether the input was shut for it: a drain shuts
    /// the input once, whenever it comes, even after the close was issued.
    private enum Drain: Equatable {
        case none
        /// Requests dispatched from now on are refused; the input is to be shut.
        case shutOwed
        /// Requests dispatched from now on are refused; the input was shut.
        case shut
    }

    let maximumInFlight: Int
    private var waiting = CircularBuffer<Waiting>()
    private var slots = CircularBuffer<Slot>()
    private var nextSequence: UInt64 = 0
    private var lifecycle = Lifecycle.reading
    /// Dispatched requests whose reply has not come back, slots dropped or not.
    private(set) var running = 0
    /// Bytes of frames dropped after a stop, to release.
    private var dropped = 0
    // Back-pressure, apart from the lifecycle: the channel's writability and a held read come and go
    // in any state, independently of each other.
    private var writable = true
    /// A read was asked for and held back.
    private(set) var readHeld = false

    init(maximumInFlight: Int) {
        self.maximumInFlight = max(1, maximumInFlight)
    }

    /// Requests read and not yet answered (waiting or running), for the idle timeout and for making room.
    var requestsInProgress: Int { self.waiting.count + self.slots.count }

    /// No frame will be read any more (input closed, drain, a frame too large, a reply that closes,
    /// the channel gone).
    var inputEnded: Bool { self.lifecycle != .reading }

    /// The channel is gone: nothing more is written.
    var inactive: Bool { self.lifecycle == .gone }

    /// The channel is gone and every request dispatched has finished: the connection is over.
    var isFinished: Bool { self.inactive && self.running == 0 }

    /// Whether frames read are dispatched: not after a reply that closes, nor once the close is issued.
    private var dispatching: Bool {
        switch self.lifecycle {
        case .reading, .answering: true
        case .stopped, .closing, .gone: false
        }
    }

    // MARK: Events

    /// A whole frame was read, of `bytes` bytes held against the budget. False: it is dropped,
    /// unstarted (the input ended before it: a reply that closes came first); its bytes are not held.
    mutating func frameRead(_ frame: ByteBuffer, bytes: Int) -> Bool {
        guard self.lifecycle == .reading else { return false }
        self.waiting.append(.frame(frame, bytes: bytes))
        return true
    }

    /// A frame announced more than the maximum: `refusal` is its reply, after every request read
    /// before it; nothing after it is read.
    mutating func frameTooLarge(_ refusal: Reply) {
        guard self.lifecycle == .reading else { return }
        self.lifecycle = .answering(.none)
        self.waiting.append(.answered(refusal))
    }

    /// The reply to the request dispatched as `sequence`. Returns the bytes it holds from now until
    /// it is written: its own size when it waits for replies before it, else 0 (written at once).
    mutating func replied(_ sequence: UInt64, _ reply: Reply) -> Int {
        self.running -= 1
        guard let oldest = self.slots.first?.sequence, sequence >= oldest else { return 0 }  // the channel closed meanwhile
        let offset = Int(sequence - oldest)
        let index = self.slots.index(self.slots.startIndex, offsetBy: offset)
        self.slots[index].reply = reply
        // Decided at once while dispatching (a refused hello): nothing after it may start.
        if reply.closeConnection { self.stop() }
        guard offset > 0 else { return 0 }
        self.slots[index].heldBytes += reply.framed.readableBytes
        return reply.framed.readableBytes
    }

    /// The input ended: the client half-closed. What was read is still answered.
    mutating func inputClosed() {
        if self.lifecycle == .reading { self.lifecycle = .answering(.none) }
    }

    /// The daemon stops: no more reading; what was read and not started is refused.
    mutating func drain() {
        if self.lifecycle == .reading { self.lifecycle = .answering(.none) }
        if self.lifecycle.drain == .none { self.lifecycle = self.lifecycle.with(.shutOwed) }
    }

    mutating func writabilityChanged(_ writable: Bool) {
        self.writable = writable
    }

    /// The socket may be read now (the handler's `read`): false holds the read back until
    /// ``nextAction()`` says `.read`. `budgetAllows`: the daemon's buffer budget lets it read.
    mutating func readRequested(budgetAllows: Bool) -> Bool {
        if self.mustHoldReads || !budgetAllows {
            self.readHeld = true
            return false
        }
        self.readHeld = false
        return true
    }

    /// The channel is gone. Replies owed are dropped; requests running still report their reply.
    mutating func channelInactive() {
        self.lifecycle = .gone
        self.waiting.removeAll()
        self.slots.removeAll()
        self.dropped = 0
    }

    // MARK: Actions

    private var mustHoldReads: Bool {
        !self.writable || !self.waiting.isEmpty || self.slots.count >= self.maximumInFlight
    }

    /// The next thing to do, or nil when nothing is left until the next event.
    mutating func nextAction() -> Action? {
        guard self.lifecycle != .gone else { return nil }
        if let head = self.slots.first, let reply = head.reply {
            self.slots.removeFirst()
            return .write(reply, heldBytes: head.heldBytes)
        }
        if self.dropped > 0 {
            defer { self.dropped = 0 }
            return .release(bytes: self.dropped)
        }
        while self.dispatching, self.slots.count < self.maximumInFlight, let next = self.waiting.popFirst() {
            switch next {
            case .frame(let frame, let bytes):
                let sequence = self.nextSequence
                self.nextSequence += 1
                self.slots.append(Slot(sequence: sequence, heldBytes: bytes, reply: nil))
                self.running += 1
                return .dispatch(sequence: sequence, frame: frame, draining: self.lifecycle.drain != .none)
            case .answered(let reply):
                self.slots.append(Slot(sequence: self.nextSequence, heldBytes: 0, reply: reply))
                self.nextSequence += 1
                if reply.closeConnection { self.stop() }
                return self.nextAction()
            }
        }
        if self.lifecycle.drain == .shutOwed {
            self.lifecycle = self.lifecycle.with(.shut)
            return .closeInput
        }
        if self.slots.isEmpty && self.waiting.isEmpty {
            switch self.lifecycle {
            case .answering(let drain), .stopped(let drain):
                self.lifecycle = .closing(drain)
                return .close
            case .reading, .closing, .gone: break
            }
        }
        if self.readHeld && !self.mustHoldReads && self.lifecycle == .reading {
            self.readHeld = false
            return .read
        }
        return nil
    }

    /// Nothing after the request whose reply closes the connection is dispatched.
    private mutating func stop() {
        switch self.lifecycle {
        case .reading: self.lifecycle = .stopped(.none)
        case .answering(let drain): self.lifecycle = .stopped(drain)
        // Stopped already; and a connection closing or gone has no reply left to stop at.
        case .stopped, .closing, .gone: break
        }
        while let next = self.waiting.popFirst() {
            if case .frame(_, let bytes) = next { self.dropped += bytes }
        }
    }
}
