import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import RegistryModel
import RegistryProtocol
import Testing

@testable import RegistryServer

/// Counts the reads that reach the socket (it sits between the socket and the handler), and shuts
/// the input as a socket does (EmbeddedChannel closes the whole channel for any close).
final class ReadCounter: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    var reads = 0

    func read(context: ChannelHandlerContext) {
        self.reads += 1
        context.read()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .input else { return context.close(mode: mode, promise: promise) }
        promise?.succeed()
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
    }
}

/// A dispatcher that runs nothing: it keeps each request until the test answers it (or answers at
/// once, echoing the frame, when `answersAtOnce`).
final class FakeRequests: ConnectionRequests {
    struct Started {
        let frame: ByteBuffer
        let draining: Bool
        let receiver: any ReplyReceiver
        let sequence: UInt64

        func completion(_ reply: RequestDispatcher.Reply) {
            self.receiver.received(reply, for: self.sequence)
        }
    }

    let answersAtOnce: Bool
    private let started = NIOLockedValueBox<[Started]>([])

    init(answersAtOnce: Bool = false) {
        self.answersAtOnce = answersAtOnce
    }

    var count: Int { self.started.withLockedValue { $0.count } }
    subscript(index: Int) -> Started { self.started.withLockedValue { $0[index] } }

    /// A reply carrying the request's frame back.
    static func echo(_ frame: ByteBuffer) -> RequestDispatcher.Reply {
        var framed = ByteBuffer()
        framed.writeInteger(UInt32(frame.readableBytes))
        framed.writeImmutableBuffer(frame)
        return RequestDispatcher.Reply(framed: framed, closeConnection: false)
    }

    /// Answers the `index`-th request started.
    func answer(_ index: Int) {
        let started = self[index]
        started.completion(Self.echo(started.frame))
    }

    func start(
        _ frame: ByteBuffer, from peer: Peer?, draining: Bool, on eventLoop: (any EventLoop)?, replyTo receiver: any ReplyReceiver,
        sequence: UInt64
    ) {
        let started = Started(frame: frame, draining: draining, receiver: receiver, sequence: sequence)
        self.started.withLockedValue { $0.append(started) }
        if self.answersAtOnce { started.completion(Self.echo(frame)) }
    }

    func refusal(_ error: FrameTooLargeError) -> RequestDispatcher.Reply {
        RequestDispatcher.Reply(framed: ByteBuffer(bytes: [0, 0, 0, 1, 0xEE]), closeConnection: true)
    }
}

/// ``ConnectionHandler`` on an EmbeddedChannel, whose clock the tests advance, with a fake
/// dispatcher and no store.
@Suite struct ConnectionHandlerTests {
    let channel = EmbeddedChannel()
    let counter = ReadCounter()
    let budget: BufferBudget
    let account: ConnectionAccount
    let requests: FakeRequests
    let handler: ConnectionHandler<FakeRequests>
    let finished: EventLoopFuture<Void>

    init(budget limit: Int = 1 << 20, minimumFrameRate: Int = 0, maximumInFlight: Int = 8, answersAtOnce: Bool = false) throws {
        self.budget = BufferBudget(limit: limit)
        self.account = ConnectionAccount(budget: self.budget)
        self.requests = FakeRequests(answersAtOnce: answersAtOnce)
        try self.channel.pipeline.syncOperations.addHandler(self.counter)
        (self.handler, self.finished) = try SocketServer.addConnectionHandler(
            to: self.channel, requests: self.requests, account: self.account,
            limits: .init(
                maximumInFlight: maximumInFlight, maximumFrameBytes: 1 << 16, frameDeadline: .seconds(10), minimumFrameRate: minimumFrameRate,
                idleTimeout: .seconds(300)),
            logger: Logger(label: "test"), peer: Peer(uid: 0, gid: 0, pid: 1, groups: [0]))
        try self.channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/handler-test")).wait()
    }

    func send(_ bytes: [UInt8]) throws {
        try self.channel.writeInbound(ByteBuffer(bytes: bytes))
    }

    /// A frame of `body`.
    static func frame(_ body: [UInt8]) -> [UInt8] {
        [0, 0, 0, UInt8(body.count)] + body
    }

    /// The replies written so far, as the bodies of their frames (the empty write before a close skipped).
    func replies() throws -> [[UInt8]] {
        var replies: [[UInt8]] = []
        while var buffer = try self.channel.readOutbound(as: ByteBuffer.self) {
            guard buffer.readableBytes > 0 else { continue }
            let length = buffer.readInteger(as: UInt32.self)
            let body = buffer.readBytes(length: Int(length ?? 0))
            replies.append(try #require(body))
        }
        return replies
    }

    // MARK: Order, limit, reads

    @Test func repliesAreWrittenInRequestOrderAndReadsResumeExactlyWhenThereIsRoom() throws {
        let handler = try ConnectionHandlerTests(maximumInFlight: 2)
        handler.channel.read()
        #expect(handler.counter.reads == 1)
        try handler.send(Self.frame([1]) + Self.frame([2]) + Self.frame([3]))
        #expect(handler.requests.count == 2, "more requests started than may be in flight")
        handler.channel.read()
        #expect(handler.counter.reads == 1, "read with a request waiting")
        handler.requests.answer(1)
        #expect(try handler.replies().isEmpty, "a reply was written before the one before it")
        handler.requests.answer(0)
        #expect(try handler.replies() == [[1], [2]])
        #expect(handler.requests.count == 3, "the waiting request was not started when room came")
        // One request in flight of two, none waiting: the held read goes ahead, once.
        #expect(handler.counter.reads == 2, "the held read was not resumed")
        handler.requests.answer(2)
        #expect(try handler.replies() == [[3]])
        #expect(handler.counter.reads == 2, "a read nobody asked for")
        #expect(handler.account.bytesHeld == 0, "bytes still charged after every reply")
    }

    @Test func readsWaitWhileRepliesAreUnwritten() throws {
        let before = self.counter.reads
        self.channel.isWritable = false
        self.channel.pipeline.fireChannelWritabilityChanged()
        self.channel.read()
        #expect(self.counter.reads == before, "read from a client whose replies pile up")
        self.channel.isWritable = true
        self.channel.pipeline.fireChannelWritabilityChanged()
        #expect(self.counter.reads == before + 1, "the held read was not resumed")
    }

    @Test func readsWaitWhileTheBudgetIsUsedUpAndThisConnectionHoldsSomeOfIt() throws {
        let handler = try ConnectionHandlerTests(budget: 1000)
        let other = ConnectionAccount(budget: handler.budget)
        let before = handler.counter.reads
        // Nothing held by this connection: it may read even with the budget used up by another.
        other.charge(5000)
        handler.channel.read()
        #expect(handler.counter.reads == before + 1)
        try handler.send(Self.frame([1, 2, 3]))  // a request in progress holds its bytes
        handler.channel.read()
        #expect(handler.counter.reads == before + 1, "read while the budget is used up")
        other.release(5000)
        handler.channel.embeddedEventLoop.run()  // the wake-up is scheduled on the connection's loop
        #expect(handler.counter.reads == before + 2, "the held read was not resumed when bytes were released")
        handler.requests.answer(0)
        #expect(handler.account.bytesHeld == 0)
    }

    @Test func framesCutAnywhereAreDispatchedWholeAndAnOversizedOneEndsTheConnectionAfterTheRest() throws {
        let handler = try ConnectionHandlerTests(answersAtOnce: true)
        var wire: [UInt8] = []
        for i in UInt8(1)...5 { wire += Self.frame([UInt8](repeating: i, count: Int(i) * 7)) }
        wire += [0x7F, 0, 0, 0] + Self.frame([42])  // 2 GB announced, then a request that must not run
        var offset = 0
        var length = 1
        while offset < wire.count {
            let end = min(wire.count, offset + length)
            try handler.send(Array(wire[offset..<end]))
            offset = end
            length = length * 3 % 11 + 1
        }
        #expect(handler.requests.count == 5)
        let replies = try handler.replies()
        #expect(replies.dropLast() == (UInt8(1)...5).map { [UInt8](repeating: $0, count: Int($0) * 7) })
        #expect(replies.last == [0xEE], "the oversized frame was not refused last")
        #expect(!handler.channel.isActive, "the connection stayed open after a frame too large")
    }

    @Test func aDrainRefusesWhatIsReadButNotStartedAndClosesOnceRunningRequestsAreAnswered() throws {
        let handler = try ConnectionHandlerTests(maximumInFlight: 1)
        try handler.send(Self.frame([1]) + Self.frame([2]))
        #expect(handler.requests.count == 1)
        handler.handler.drain()
        handler.requests.answer(0)
        #expect(handler.requests.count == 2)
        #expect(!handler.requests[0].draining && handler.requests[1].draining, "the request read before the drain was not refused")
        #expect(handler.channel.isActive, "closed with a reply owed")
        handler.requests.answer(1)
        #expect(try handler.replies() == [[1], [2]])
        #expect(!handler.channel.isActive)
        #expect(throws: Never.self) { try handler.finished.wait() }
    }

    @Test func theConnectionIsOverOnlyWhenItsRequestsAreEvenAfterThePeerLeft() throws {
        let handler = try ConnectionHandlerTests()
        try handler.send(Self.frame([1]))
        let over = NIOLockedValueBox(false)
        handler.finished.whenSuccess { over.withLockedValue { $0 = true } }
        _ = try? handler.channel.close().wait()
        handler.channel.embeddedEventLoop.run()
        #expect(!over.withLockedValue { $0 }, "over with a request still running")
        handler.requests.answer(0)
        #expect(over.withLockedValue { $0 })
    }

    // MARK: Deadlines

    @Test func aFrameThatDoesNotArriveWithinItsDeadlineClosesTheConnection() throws {
        try self.send([0, 0, 0, 10, 1, 2])
        self.channel.read()  // the daemon waits for the rest
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        try self.send([3])
        self.channel.read()
        #expect(self.channel.isActive, "closed before the frame's deadline")
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!self.channel.isActive, "a trickling client kept its connection past the frame deadline")
    }

    @Test func wholeFramesResetTheFrameDeadline() throws {
        for i in 0..<5 {
            try self.send([0, 0, 0, 2, 1])
            self.channel.read()
            self.channel.embeddedEventLoop.advanceTime(by: .seconds(6))
            try self.send([2])
            self.channel.read()
            self.requests.answer(i)
        }
        #expect(self.channel.isActive)
    }

    @Test func timeWithReadsHeldBackDoesNotCountAgainstTheClient() throws {
        try self.send([0, 0, 0, 10, 1])
        self.channel.isWritable = false
        self.channel.pipeline.fireChannelWritabilityChanged()
        self.channel.read()  // held: the client's replies are not being read
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(self.channel.isActive)
    }

    @Test func theIdleTimeoutSparesAConnectionWaitingForItsOwnReply() throws {
        try self.send(Self.frame([42]))  // a whole request, in progress
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(400))
        #expect(self.channel.isActive, "closed while its request was in progress")
        self.requests.answer(0)
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(299))
        #expect(self.channel.isActive)
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!self.channel.isActive, "an idle connection was kept open")
    }
}

/// The minimum rate of a frame in progress (after its first second), and closing to make room.
@Suite struct ConnectionHandlerRateTests {
    @Test func aClientTricklingAByteASecondLosesItsSlotWithinTwoSeconds() throws {
        let handler = try ConnectionHandlerTests(minimumFrameRate: 1024)
        let loop = handler.channel.embeddedEventLoop
        try handler.send([0, 0, 0, 100])
        handler.channel.read()
        var elapsed = TimeAmount.zero
        while handler.channel.isActive && elapsed < .seconds(10) {
            loop.advanceTime(by: .milliseconds(250))
            elapsed = elapsed + .milliseconds(250)
            if elapsed.nanoseconds % 1_000_000_000 == 0 && handler.channel.isActive {
                try handler.send([1])
                handler.channel.read()
            }
        }
        #expect(!handler.channel.isActive)
        #expect(elapsed <= .seconds(2), "a trickler kept its slot for \(elapsed.nanoseconds / 1_000_000) ms")
    }

    @Test func aLargeFrameArrivingSteadilyAboveTheRateIsKept() throws {
        let handler = try ConnectionHandlerTests(minimumFrameRate: 1024)
        let loop = handler.channel.embeddedEventLoop
        try handler.send([0, 0, 0x3F, 0])  // 16,128 bytes to come, at 2 KiB/s: 8 s, within the 10 s deadline
        handler.channel.read()
        for _ in 0..<8 {
            loop.advanceTime(by: .milliseconds(500))
            try handler.send([UInt8](repeating: 7, count: 1000))
            handler.channel.read()
            loop.advanceTime(by: .milliseconds(500))
            try handler.send([UInt8](repeating: 7, count: 1000))
            handler.channel.read()
        }
        #expect(handler.channel.isActive, "a frame arriving at twice the minimum rate was cut")
    }

    @Test func timeWithReadsHeldBackDoesNotCountAgainstTheRate() throws {
        let handler = try ConnectionHandlerTests(minimumFrameRate: 1024)
        try handler.send([0, 0, 0, 100, 1])
        handler.channel.isWritable = false
        handler.channel.pipeline.fireChannelWritabilityChanged()
        handler.channel.read()  // held: the client's replies are not being read
        handler.channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(handler.channel.isActive)
    }

    /// What the connection answers when asked to make room (run on its embedded loop).
    private func answer(_ handler: ConnectionHandlerTests) -> Bool? {
        let answer = handler.account.askToMakeRoom(ConnectionSlots.Graces())
        handler.channel.embeddedEventLoop.run()
        return try? answer?.wait()
    }

    @Test func anIdleConnectionClosesToMakeRoomAndABusyOneDoesNot() throws {
        let idle = try ConnectionHandlerTests()
        idle.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(self.answer(idle) == true)
        #expect(!idle.channel.isActive)
        #expect(idle.account.askToMakeRoom(ConnectionSlots.Graces()) == nil, "a closed connection is not asked again")

        let busy = try ConnectionHandlerTests()
        try busy.send(ConnectionHandlerTests.frame([42]))  // a whole request, not yet answered
        busy.channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(self.answer(busy) == false, "a connection with a request in progress was closed")
        #expect(busy.channel.isActive)

        // Served, then idle: an app's pooled connection between its uses is kept for the idle grace
        // (10 s), then may be closed when the daemon is full (one kept alive by a hello every 299 s
        // would otherwise hold its slot for good).
        let pooled = try ConnectionHandlerTests(answersAtOnce: true)
        try pooled.send(ConnectionHandlerTests.frame([42]))
        pooled.channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(self.answer(pooled) == false, "a pooled connection idle between requests for less than the idle grace was closed")
        #expect(pooled.channel.isActive)
        pooled.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(self.answer(pooled) == true, "a connection idle between requests past the idle grace was not closed")

        let fresh = try ConnectionHandlerTests()
        #expect(self.answer(fresh) == false, "a connection idle for less than the grace was closed")

        let trickler = try ConnectionHandlerTests()
        try trickler.send([0, 0, 0, 100, 1])
        trickler.channel.read()
        trickler.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(self.answer(trickler) == true, "a connection inside an unfinished frame for a second was kept")
    }
}
