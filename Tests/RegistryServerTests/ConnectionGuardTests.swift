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

    init(budget limit: Int = 1 << 20) throws {
        self.budget = BufferBudget(limit: limit)
        self.account = ConnectionAccount(budget: self.budget)
        try self.channel.pipeline.syncOperations.addHandler(self.counter)
        try self.channel.pipeline.syncOperations.addHandler(
            ConnectionGuard(
                account: self.account, frameDeadline: .seconds(10), idleTimeout: .seconds(300), logger: Logger(label: "test")))
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
