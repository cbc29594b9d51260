import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import RegistryServer

/// Counts the reads that reach the socket (it sits between the socket and the guard).
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    var reads = 0

    func read(context: ChannelHandlerContext) {
        self.reads += 1
        context.read()
    }
}

/// ConnectionGuard on an EmbeddedChannel, whose clock the tests advance.
@Suite struct ConnectionGuardTests {
    let channel = EmbeddedChannel()
    let counter = ReadCounter()
    let budget: BufferBudget
    let account: ConnectionAccount

    init(budget limit: Int = 1 << 20, minimumFrameRate: Int = 0) throws {
        self.budget = BufferBudget(limit: limit)
        self.account = ConnectionAccount(budget: self.budget)
        try self.channel.pipeline.syncOperations.addHandler(self.counter)
        try self.channel.pipeline.syncOperations.addHandler(
            ConnectionGuard(
                account: self.account, frameDeadline: .seconds(10), minimumFrameRate: minimumFrameRate, idleTimeout: .seconds(300),
                logger: Logger(label: "test")))
        try self.channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/guard-test")).wait()
    }

    func send(_ bytes: [UInt8]) throws {
        try self.channel.writeInbound(ByteBuffer(bytes: bytes))
    }

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
        for _ in 0..<5 {
            try self.send([0, 0, 0, 2, 1])
            self.channel.read()
            self.channel.embeddedEventLoop.advanceTime(by: .seconds(6))
            try self.send([2])
            self.channel.read()
            try self.channel.writeOutbound(ByteBuffer(bytes: [0]))  // its reply
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
        try self.send([0, 0, 0, 1, 42])  // a whole request, in progress
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(400))
        #expect(self.channel.isActive, "closed while its request was in progress")
        try self.channel.writeOutbound(ByteBuffer(bytes: [0, 0, 0, 0]))  // the reply
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(299))
        #expect(self.channel.isActive)
        self.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!self.channel.isActive, "an idle connection was kept open")
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
        let guarded = try ConnectionGuardTests(budget: 1000)
        let other = ConnectionAccount(budget: guarded.budget)
        let before = guarded.counter.reads
        // Nothing held by this connection: it may read even with the budget used up by another.
        other.charge(5000)
        guarded.channel.read()
        #expect(guarded.counter.reads == before + 1)
        guarded.account.charge(10)
        guarded.channel.read()
        #expect(guarded.counter.reads == before + 1, "read while the budget is used up")
        other.release(5000)
        guarded.channel.embeddedEventLoop.run()  // the wake-up is scheduled on the connection's loop
        #expect(guarded.counter.reads == before + 2, "the held read was not resumed when bytes were released")
        guarded.account.releaseAll()
        #expect(guarded.budget.bytesInUse == 0)
    }
}

/// The minimum rate of a frame in progress (after its first second), and closing to make room.
@Suite struct ConnectionGuardRateTests {
    @Test func aClientTricklingAByteASecondLosesItsSlotWithinTwoSeconds() throws {
        let guarded = try ConnectionGuardTests(minimumFrameRate: 1024)
        let loop = guarded.channel.embeddedEventLoop
        try guarded.send([0, 0, 0, 100])
        guarded.channel.read()
        var elapsed = TimeAmount.zero
        while guarded.channel.isActive && elapsed < .seconds(10) {
            loop.advanceTime(by: .milliseconds(250))
            elapsed = elapsed + .milliseconds(250)
            if elapsed.nanoseconds % 1_000_000_000 == 0 && guarded.channel.isActive {
                try guarded.send([1])
                guarded.channel.read()
            }
        }
        #expect(!guarded.channel.isActive)
        #expect(elapsed <= .seconds(2), "a trickler kept its slot for \(elapsed.nanoseconds / 1_000_000) ms")
    }

    @Test func aLargeFrameArrivingSteadilyAboveTheRateIsKept() throws {
        let guarded = try ConnectionGuardTests(minimumFrameRate: 1024)
        let loop = guarded.channel.embeddedEventLoop
        try guarded.send([0, 0, 0x40, 0])  // 16 KiB to come, at 2 KiB/s: 8 s, within the 10 s deadline
        guarded.channel.read()
        for _ in 0..<8 {
            loop.advanceTime(by: .milliseconds(500))
            try guarded.send([UInt8](repeating: 7, count: 1024))
            guarded.channel.read()
            loop.advanceTime(by: .milliseconds(500))
            try guarded.send([UInt8](repeating: 7, count: 1024))
            guarded.channel.read()
        }
        #expect(guarded.channel.isActive, "a frame arriving at twice the minimum rate was cut")
    }

    @Test func timeWithReadsHeldBackDoesNotCountAgainstTheRate() throws {
        let guarded = try ConnectionGuardTests(minimumFrameRate: 1024)
        try guarded.send([0, 0, 0, 100, 1])
        guarded.channel.isWritable = false
        guarded.channel.pipeline.fireChannelWritabilityChanged()
        guarded.channel.read()  // held: the client's replies are not being read
        guarded.channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(guarded.channel.isActive)
    }

    /// What the connection answers when asked to make room (run on its embedded loop).
    private func answer(_ guarded: ConnectionGuardTests) -> Bool? {
        var answer: Bool?
        guarded.account.askToMakeRoom(ConnectionSlots.Graces())?.whenSuccess { answer = $0 }
        guarded.channel.embeddedEventLoop.run()
        return answer
    }

    @Test func anIdleConnectionClosesToMakeRoomAndABusyOneDoesNot() throws {
        let idle = try ConnectionGuardTests()
        idle.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(self.answer(idle) == true)
        #expect(!idle.channel.isActive)
        #expect(idle.account.askToMakeRoom(ConnectionSlots.Graces()) == nil, "a closed connection is not asked again")

        let busy = try ConnectionGuardTests()
        try busy.send([0, 0, 0, 1, 42])  // a whole request, not yet answered
        busy.channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(self.answer(busy) == false, "a connection with a request in progress was closed")
        #expect(busy.channel.isActive)

        // Served, then idle: an app's pooled connection is left to the idle timeout.
        let pooled = try ConnectionGuardTests()
        try pooled.send([0, 0, 0, 1, 42])
        try pooled.channel.writeOutbound(ByteBuffer(bytes: [0, 0, 0, 0]))  // its reply
        pooled.channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(self.answer(pooled) == false, "a pooled connection idle between requests was closed")

        let fresh = try ConnectionGuardTests()
        #expect(self.answer(fresh) == false, "a connection idle for less than the grace was closed")

        let trickler = try ConnectionGuardTests()
        try trickler.send([0, 0, 0, 100, 1])
        trickler.channel.read()
        trickler.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(self.answer(trickler) == true, "a connection inside an unfinished frame for a second was kept")
    }
}
