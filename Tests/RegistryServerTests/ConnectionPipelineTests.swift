import NIOCore
import SyntheticFaces
import Testing

@testable import RegistryServer

/// ``ConnectionPipeline`` on its own: events in, actions out, no channel, no clock, no engine.
@Suite struct ConnectionPipelineTests {
    typealias Action = ConnectionPipeline.Action

    static func frame(_ byte: UInt8, size: Int = 10) -> ByteBuffer { ByteBuffer(repeating: byte, count: size) }

    static func reply(_ byte: UInt8, closing: Bool = false) -> RequestDispatcher.Reply {
        RequestDispatcher.Reply(framed: ByteBuffer(bytes: [0, 0, 0, 1, byte]), closeConnection: closing)
    }

    /// Every action until there is none.
    static func actions(_ pipeline: inout ConnectionPipeline) -> [Action] {
        var actions: [Action] = []
        while let action = pipeline.nextAction() { actions.append(action) }
        return actions
    }

    static func dispatched(_ actions: [Action]) -> [UInt64] {
        actions.compactMap { if case .dispatch(let sequence, _, _) = $0 { sequence } else { nil } }
    }

    static func written(_ actions: [Action]) -> [RequestDispatcher.Reply] {
        actions.compactMap { if case .write(let reply, _) = $0 { reply } else { nil } }
    }

    @Test func repliesGoOutInRequestOrderWhateverOrderTheyComeIn() {
        var pipeline = ConnectionPipeline(maximumInFlight: 8)
        for byte in UInt8(0)..<3 {
            let taken = pipeline.frameRead(Self.frame(byte), bytes: 10)
            #expect(taken)
        }
        #expect(Self.dispatched(Self.actions(&pipeline)) == [0, 1, 2])
        // The third finishes first, then the first: only the first can be written.
        let waits = pipeline.replied(2, Self.reply(2))
        #expect(waits == 5, "a reply waiting behind others holds its bytes")
        #expect(Self.actions(&pipeline).isEmpty)
        let atOnce = pipeline.replied(0, Self.reply(0))
        #expect(atOnce == 0, "a reply written at once holds nothing")
        #expect(Self.actions(&pipeline) == [.write(Self.reply(0), heldBytes: 10)])
        _ = pipeline.replied(1, Self.reply(1))
        #expect(Self.actions(&pipeline) == [.write(Self.reply(1), heldBytes: 10), .write(Self.reply(2), heldBytes: 15)])
        #expect(pipeline.requestsInProgress == 0)
    }

    @Test func readsAreHeldAtTheInFlightLimitAndResumedWhenAReplyIsWritten() {
        var pipeline = ConnectionPipeline(maximumInFlight: 2)
        let first = pipeline.readRequested(budgetAllows: true)
        #expect(first)
        for byte in UInt8(0)..<3 {
            let taken = pipeline.frameRead(Self.frame(byte), bytes: 10)
            #expect(taken)
        }
        #expect(Self.dispatched(Self.actions(&pipeline)) == [0, 1], "more than the limit were started")
        let whileWaiting = pipeline.readRequested(budgetAllows: true)
        #expect(!whileWaiting, "read with a request waiting")
        #expect(Self.actions(&pipeline).isEmpty)
        // A reply behind the first does not make room: it is not written yet.
        _ = pipeline.replied(1, Self.reply(1))
        #expect(Self.actions(&pipeline).isEmpty)
        _ = pipeline.replied(0, Self.reply(0))
        let actions = Self.actions(&pipeline)
        #expect(Self.written(actions) == [Self.reply(0), Self.reply(1)])
        #expect(Self.dispatched(actions) == [2], "the waiting request was not started")
        // Then one request in flight of two, none waiting: the held read goes ahead, once, last.
        #expect(actions.last == .read && actions.filter { $0 == .read }.count == 1, "the held read was not resumed")
        _ = pipeline.replied(2, Self.reply(2))
        #expect(Self.actions(&pipeline) == [.write(Self.reply(2), heldBytes: 10)], "a read nobody asked for")
        let resumed = pipeline.readRequested(budgetAllows: true)
        #expect(resumed)
    }

    @Test func readsAreHeldWhileTheChannelIsNotWritableOrTheBudgetSaysNo() {
        var pipeline = ConnectionPipeline(maximumInFlight: 4)
        pipeline.writabilityChanged(false)
        let unwritable = pipeline.readRequested(budgetAllows: true)
        #expect(!unwritable)
        #expect(Self.actions(&pipeline).isEmpty)
        pipeline.writabilityChanged(true)
        #expect(Self.actions(&pipeline) == [.read])
        let overBudget = pipeline.readRequested(budgetAllows: false)
        #expect(!overBudget, "read past the budget")
        #expect(pipeline.readHeld)
    }

    @Test func aHalfClosedClientGetsEveryReplyThenTheConnectionCloses() {
        var pipeline = ConnectionPipeline(maximumInFlight: 4)
        for byte in UInt8(0)..<2 { _ = pipeline.frameRead(Self.frame(byte), bytes: 10) }
        _ = Self.actions(&pipeline)
        pipeline.inputClosed()
        #expect(Self.actions(&pipeline).isEmpty, "closed with replies owed")
        _ = pipeline.replied(0, Self.reply(0))
        #expect(Self.actions(&pipeline) == [.write(Self.reply(0), heldBytes: 10)])
        _ = pipeline.replied(1, Self.reply(1))
        #expect(Self.actions(&pipeline) == [.write(Self.reply(1), heldBytes: 10), .close])
        #expect(Self.actions(&pipeline).isEmpty, "closed twice")
    }

    @Test func aDrainRefusesWhatWasReadButNotStartedAndAnswersWhatRuns() {
        var pipeline = ConnectionPipeline(maximumInFlight: 1)
        for byte in UInt8(0)..<3 { _ = pipeline.frameRead(Self.frame(byte), bytes: 10) }
        #expect(Self.actions(&pipeline) == [.dispatch(sequence: 0, frame: Self.frame(0), draining: false)])
        pipeline.drain()
        #expect(Self.actions(&pipeline) == [.closeInput])
        _ = pipeline.replied(0, Self.reply(0))
        #expect(
            Self.actions(&pipeline) == [
                .write(Self.reply(0), heldBytes: 10), .dispatch(sequence: 1, frame: Self.frame(1), draining: true),
            ])
        #expect(pipeline.inputEnded, "the drained connection would read on")
    }

    @Test func aReplyThatClosesStopsEverythingAfterIt() {
        var pipeline = ConnectionPipeline(maximumInFlight: 8)
        for byte in UInt8(0)..<4 { _ = pipeline.frameRead(Self.frame(byte), bytes: 10) }
        // The first dispatch is answered at once with a closing reply (a refused hello), as the
        // dispatcher does inside the call.
        let dispatch = pipeline.nextAction()
        #expect(dispatch == .dispatch(sequence: 0, frame: Self.frame(0), draining: false))
        _ = pipeline.replied(0, Self.reply(0, closing: true))
        #expect(Self.actions(&pipeline) == [.write(Self.reply(0, closing: true), heldBytes: 10), .release(bytes: 30), .close])
        let after = pipeline.frameRead(Self.frame(5), bytes: 10)
        #expect(!after, "a frame after a closing reply was taken")
    }

    @Test func aFrameTooLargeIsRefusedAfterTheRequestsBeforeIt() {
        var pipeline = ConnectionPipeline(maximumInFlight: 8)
        for byte in UInt8(0)..<2 { _ = pipeline.frameRead(Self.frame(byte), bytes: 10) }
        pipeline.frameTooLarge(Self.reply(9, closing: true))
        #expect(Self.dispatched(Self.actions(&pipeline)) == [0, 1])
        _ = pipeline.replied(1, Self.reply(1))
        _ = pipeline.replied(0, Self.reply(0))
        #expect(
            Self.actions(&pipeline) == [
                .write(Self.reply(0), heldBytes: 10), .write(Self.reply(1), heldBytes: 15),
                .write(Self.reply(9, closing: true), heldBytes: 0), .close,
            ])
    }

    @Test func aPeerThatLeavesDropsTheRepliesButTheConnectionEndsOnlyWhenItsRequestsHave() {
        var pipeline = ConnectionPipeline(maximumInFlight: 8)
        for byte in UInt8(0)..<2 { _ = pipeline.frameRead(Self.frame(byte), bytes: 10) }
        _ = Self.actions(&pipeline)
        pipeline.channelInactive()
        #expect(!pipeline.isFinished, "finished with a request still running")
        _ = pipeline.replied(1, Self.reply(1))
        #expect(!pipeline.isFinished)
        _ = pipeline.replied(0, Self.reply(0))
        #expect(pipeline.isFinished)
        #expect(Self.actions(&pipeline).isEmpty, "wrote to a closed channel")
    }

    /// Random interleavings of every event, checked against what the pipeline promises: each
    /// request read is dispatched once and answered once, in order; never more than the limit in
    /// flight; a read goes ahead only when nothing holds it; the connection closes exactly once,
    /// after the last reply.
    @Test(arguments: 0..<200) func randomInterleavingsKeepThePromise(seed: UInt64) {
        var random = SeededRandom(seed: 0xC0FF_EE00 &+ seed)
        let limit = Int.random(in: 1...4, using: &random)
        var pipeline = ConnectionPipeline(maximumInFlight: limit)
        var read: UInt64 = 0
        var running: [UInt64] = []
        var written: [UInt64] = []
        var closes = 0
        var ended = false
        var writable = true
        func run() {
            while let action = pipeline.nextAction() {
                switch action {
                case .dispatch(let sequence, let frame, _):
                    #expect(frame.getInteger(at: 0, as: UInt64.self) == sequence, "dispatched out of order")
                    running.append(sequence)
                case .write(let reply, _):
                    let sequence = reply.framed.getInteger(at: 4, as: UInt64.self)!
                    #expect(sequence == UInt64(written.count), "reply \(sequence) written in place of \(written.count)")
                    written.append(sequence)
                case .close: closes += 1
                case .read, .release, .closeInput: break
                }
            }
        }
        for _ in 0..<300 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4 where !ended:
                var frame = ByteBuffer()
                frame.writeInteger(read)
                if pipeline.frameRead(frame, bytes: 8) { read += 1 }
            case 4..<7 where !running.isEmpty:
                let sequence = running.remove(at: Int.random(in: 0..<running.count, using: &random))
                var framed = ByteBuffer(bytes: [0, 0, 0, 8])
                framed.writeInteger(sequence)
                _ = pipeline.replied(sequence, RequestDispatcher.Reply(framed: framed, closeConnection: false))
            case 7:
                writable.toggle()
                pipeline.writabilityChanged(writable)
            case 8:
                if pipeline.readRequested(budgetAllows: true) {
                    #expect(writable, "read while not writable")
                    #expect(pipeline.requestsInProgress < limit, "read at the in-flight limit")
                }
            case 9 where Int.random(in: 0..<20, using: &random) == 0:
                ended = true
                pipeline.inputClosed()
            default: break
            }
            run()
            #expect(running.count <= limit, "more than \(limit) in flight")
        }
        // The client stops; every request finishes.
        pipeline.inputClosed()
        run()
        while !running.isEmpty {
            let sequence = running.removeFirst()
            var framed = ByteBuffer(bytes: [0, 0, 0, 8])
            framed.writeInteger(sequence)
            _ = pipeline.replied(sequence, RequestDispatcher.Reply(framed: framed, closeConnection: false))
            run()
        }
        #expect(written.count == Int(read), "\(read) read, \(written.count) answered")
        #expect(closes == 1)
        #expect(pipeline.requestsInProgress == 0)
    }
}
