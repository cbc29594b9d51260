import Glibc
import Logging
import NIOCore
import NIOEmbedded
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

@testable import RegistryServer

/// A connection's ``ConnectionHandler`` over an in-memory channel, the real dispatcher and a real
/// store: order, limits and endings end to end, without a socket; with one request in flight at a
/// time and with several.
@Suite struct ConnectionTests {
    let fixture: ServerFixture
    var engine: Engine { self.fixture.engine }
    var dispatcher: RequestDispatcher { self.fixture.dispatcher }
    var root: Peer { self.fixture.root }

    init() throws {
        self.fixture = try ServerFixture("registryd-connection")
    }

    func cleanUp() {
        self.fixture.close()
    }

    /// A channel with the connection's handler over the real dispatcher, and the future that
    /// says the connection is over (closed, and every request it started finished).
    func serve(maximumInFlight: Int) async throws -> (NIOAsyncTestingChannel, EventLoopFuture<Void>) {
        let channel = NIOAsyncTestingChannel()
        let account = ConnectionAccount(budget: BufferBudget(limit: 1 << 30))
        let finished = try await channel.testingEventLoop.executeInContext {
            try SocketServer.addConnectionHandler(
                to: channel, requests: self.dispatcher, account: account,
                limits: .init(maximumInFlight: maximumInFlight, maximumFrameBytes: 1 << 20, frameDeadline: .seconds(10), idleTimeout: .seconds(300)),
                logger: Logger(label: "test"), peer: self.root
            ).1
        }
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/connection-test"))
        return (channel, finished)
    }

    static func frame(_ id: UInt64, _ operation: Registry_V1_Request.OneOf_Operation) throws -> ByteBuffer {
        var request = Registry_V1_Request()
        request.id = id
        request.operation = operation
        return try ByteBuffer(frameOf: request)
    }

    static func registration(_ id: UInt64, _ identifier: String, axis: Int) throws -> ByteBuffer {
        var vector = [Float](repeating: 0, count: 128)
        vector[axis] = 1
        return try Self.frame(
            id,
            .register(
                .with {
                    $0.identifier = identifier
                    $0.face.templates = [
                        .with {
                            $0.algorithm = 24
                            $0.vector = vector
                        }
                    ]
                }))
    }

    /// The next reply written, decoded (the empty write that precedes a close skipped).
    static func reply(_ channel: NIOAsyncTestingChannel) async throws -> Registry_V1_Response {
        var buffer = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
        while buffer.readableBytes == 0 { buffer = try await channel.waitForOutboundWrite(as: ByteBuffer.self) }
        let length = buffer.readInteger(as: UInt32.self)
        let body = buffer.readBytes(length: Int(try #require(length)))
        return try Registry_V1_Response(serializedBytes: try #require(body))
    }

    @Test(arguments: [1, 8]) func aRefusedHelloStopsEveryLaterRequestFromRunning(maximumInFlight: Int) async throws {
        defer { self.cleanUp() }
        let (channel, finished) = try await self.serve(maximumInFlight: maximumInFlight)
        var bytes = try Self.registration(1, "before", axis: 0)
        bytes.writeImmutableBuffer(try Self.frame(2, .hello(.with { $0.protocolMajor = 2 })))
        for i in 0..<5 { bytes.writeImmutableBuffer(try Self.registration(UInt64(3 + i), "after-\(i)", axis: 1 + i)) }
        try await channel.writeInbound(bytes)
        let first = try await Self.reply(channel)
        #expect(first.id == 1)
        guard case .register = first.result else {
            Issue.record("the first registration was not answered")
            return
        }
        let second = try await Self.reply(channel)
        guard case .error(let error) = second.result else {
            Issue.record("the hello was not refused")
            return
        }
        #expect(second.id == 2 && error.code == .unsupportedVersion)
        try await finished.get()  // the connection ends after the refusal
        #expect(try await self.engine.identifiers().identifiers == ["before"])
    }

    /// Registrations started on the event loop, more of them than may run at once, with requests of
    /// every other way between them: answered at once (an authentication), refused before reaching
    /// the writer (an unknown gallery), run as a task (listing galleries).
    @Test(arguments: [1, 8]) func everyKindOfRequestInOnePipelineIsAnsweredInOrder(maximumInFlight: Int) async throws {
        defer { self.cleanUp() }
        let (channel, finished) = try await self.serve(maximumInFlight: maximumInFlight)
        try await channel.writeInbound(try Self.registration(1, "alice", axis: 0))
        #expect(try await Self.reply(channel).id == 1)
        var vector = [Float](repeating: 0, count: 128)
        vector[0] = 1
        let face = Registry_V1_Face.with {
            $0.templates = [
                .with {
                    $0.algorithm = 24
                    $0.vector = vector
                }
            ]
        }
        var bytes = ByteBuffer()
        var expected: [(UInt64, String)] = []
        func add(_ kind: String, _ frame: (UInt64) throws -> ByteBuffer) throws {
            let id = UInt64(expected.count + 2)
            bytes.writeImmutableBuffer(try frame(id))
            expected.append((id, kind))
        }
        for i in 1...10 { try add("register") { try Self.registration($0, "p\(i)", axis: i) } }
        try add("authenticate") {
            try Self.frame(
                $0,
                .authenticate(
                    .with {
                        $0.identifier = "alice"
                        $0.face = face
                    }))
        }
        try add("list") { try Self.frame($0, .listGalleries(.init())) }
        try add("UNKNOWN_GALLERY") {
            try Self.frame(
                $0,
                .register(
                    .with {
                        $0.gallery = "nope"
                        $0.identifier = "x"
                        $0.face = face
                    }))
        }
        for i in 11...14 { try add("register") { try Self.registration($0, "p\(i)", axis: i) } }
        try await channel.writeInbound(bytes)
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        for (id, kind) in expected {
            let reply = try await Self.reply(channel)
            #expect(reply.id == id)
            switch reply.result {
            case .register: #expect(kind == "register")
            case .authenticate(let result): #expect(kind == "authenticate" && result.authenticated)
            case .listGalleries: #expect(kind == "list")
            case .error(let error): #expect(kind == RegistryError.Code(error.code).rawValue, "request \(id): \(error.message)")
            default: Issue.record("request \(id): unexpected reply \(reply)")
            }
        }
        try await finished.get()
        #expect(try await self.engine.identifiers().identifiers.count == 15)
    }

    @Test(arguments: [1, 8]) func aClientThatStopsSendingGetsEveryReplyInOrder(maximumInFlight: Int) async throws {
        defer { self.cleanUp() }
        let (channel, finished) = try await self.serve(maximumInFlight: maximumInFlight)
        var bytes = ByteBuffer()
        for i in 0..<20 { bytes.writeImmutableBuffer(try Self.registration(UInt64(i + 1), "p\(i)", axis: i)) }
        try await channel.writeInbound(bytes)
        // The client half-closes: its input ends, the replies still go out.
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        for i in 0..<20 {
            let reply = try await Self.reply(channel)
            #expect(reply.id == UInt64(i + 1))
            guard case .register = reply.result else {
                Issue.record("request \(i + 1) was refused")
                continue
            }
        }
        try await finished.get()
        #expect(try await self.engine.identifiers().identifiers.count == 20)
    }

    @Test(arguments: [1, 8]) func framesCutIntoOddPiecesAreAnsweredInOrderAndAnOversizedOneEndsTheConnection(maximumInFlight: Int)
        async throws
    {
        defer { self.cleanUp() }
        let (channel, finished) = try await self.serve(maximumInFlight: maximumInFlight)
        var wire = ByteBuffer()
        for i in 0..<6 { wire.writeImmutableBuffer(try Self.registration(UInt64(i + 1), "q\(i)", axis: i)) }
        wire.writeImmutableBuffer(try Self.frame(7, .listGalleries(.init())))
        // Then a length prefix over the 1 MiB maximum, and a request after it that must not run.
        wire.writeInteger(UInt32(2 << 20))
        wire.writeImmutableBuffer(try Self.registration(8, "never", axis: 7))
        // Pieces of 1, 4, 13, … bytes: prefixes and bodies split at every kind of place.
        var length = 1
        while wire.readableBytes > 0 {
            try await channel.writeInbound(wire.readSlice(length: min(length, wire.readableBytes))!)
            length = length * 3 % 97 + 1
        }
        for id in 1...7 {
            let reply = try await Self.reply(channel)
            #expect(reply.id == UInt64(id))
            if case .error(let error) = reply.result { Issue.record("request \(id) was refused: \(error.code)") }
        }
        let last = try await Self.reply(channel)
        guard case .error(let error) = last.result else {
            Issue.record("the oversized frame was not refused")
            return
        }
        #expect(error.code == .frameTooLarge)
        try await finished.get()
        #expect(try await self.engine.identifiers().identifiers.count == 6)
    }
}
