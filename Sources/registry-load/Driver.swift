import NIOCore
import NIOPosix
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

/// The measuring side of a run: every connection a closed loop of one request at a time, all of them
/// on ONE event-loop thread with their request frames encoded before the clock starts — so that the
/// load tool, which shares the machine with the daemon, costs as little CPU as redis-benchmark does
/// and the figures measure the daemon rather than the client.
enum Driver {
    /// A request frame and what a correct answer looks like.
    struct Call: Sendable {
        let frame: ByteBuffer
        let check: @Sendable (Registry_V1_Response.OneOf_Result?) -> String?
    }

    /// Runs `calls[c]` on connection c (in order), or cycles through them until `seconds` have passed.
    static func run(socket: String, calls: [[Call]], seconds: Double?) async throws -> (tally: Tally, elapsed: Duration) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        let done = group.next().makePromise(of: Void.self)
        let clock = ContinuousClock()
        let deadline = seconds.map { clock.now.advanced(by: .nanoseconds(Int64($0 * 1e9))) }
        let state = RunState(connections: calls.count, done: done)
        var channels: [any Channel] = []
        for connectionCalls in calls {
            let handler = LoopHandler(calls: connectionCalls, deadline: deadline, state: state)
            let channel = try await ClientBootstrap(group: group).channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maximumFrameLength: 64 << 20)))
                    try channel.pipeline.syncOperations.addHandler(MessageToByteHandler(FrameEncoder()))
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }.connect(unixDomainSocketPath: socket).get()
            channels.append(channel)
        }
        let cpu = ProcessCPU(serverSocket: socket)
        let start = clock.now
        state.start = start
        for channel in channels {
            channel.pipeline.fireUserInboundEventTriggered(LoopHandler.Start())
        }
        try await done.futureResult.get()
        let elapsed = start.duration(to: clock.now)
        let spent = cpu.end()
        for channel in channels { try? await channel.close() }
        var tally = state.tally
        tally.serverCPUSeconds = spent.server
        tally.clientCPUSeconds = spent.own
        return (tally, elapsed)
    }
}

/// Shared by the connections of one run; touched only on the run's single event loop.
final class RunState: @unchecked Sendable {
    var tally = Tally()
    var start: ContinuousClock.Instant?
    private var remaining: Int
    private let done: EventLoopPromise<Void>

    init(connections: Int, done: EventLoopPromise<Void>) {
        self.remaining = connections
        self.done = done
    }

    func finished(_ tally: Tally) {
        self.tally.merge(tally)
        self.remaining -= 1
        if self.remaining == 0 { self.done.succeed() }
    }
}

/// One connection's closed loop.
final class LoopHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    struct Start {}

    private let calls: [Driver.Call]
    private let deadline: ContinuousClock.Instant?
    private let state: RunState
    private var next = 0
    private var sentAt = ContinuousClock.now
    private var tally = Tally()
    private var over = false

    init(calls: [Driver.Call], deadline: ContinuousClock.Instant?, state: RunState) {
        self.calls = calls
        self.deadline = deadline
        self.state = state
        self.tally.latencies.reserveCapacity(calls.count)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is Start else { return context.fireUserInboundEventTriggered(event) }
        self.send(context)
    }

    private func send(_ context: ChannelHandlerContext) {
        let now = ContinuousClock.now
        let finished = self.deadline.map { now >= $0 } ?? (self.next == self.calls.count)
        guard !finished, !self.calls.isEmpty else { return self.finish() }
        self.sentAt = now
        context.writeAndFlush(Self.wrapOutboundOut(self.calls[self.next % self.calls.count].frame), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        self.tally.latencies.append(Report.milliseconds(self.sentAt.duration(to: .now)))
        let result = try? Registry_V1_Response(serializedBytes: frame.readableBytesSpan).result
        if let problem = self.calls[self.next % self.calls.count].check(result) {
            self.tally.errors += 1
            if self.tally.firstError == nil { self.tally.firstError = problem }
        }
        self.next += 1
        self.send(context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !self.over {
            self.tally.connectionsLost += 1
            self.finish()
        }
        context.fireChannelInactive()
    }

    private func finish() {
        guard !self.over else { return }
        self.over = true
        self.state.finished(self.tally)
    }
}
