import NIOCore
import NIOEmbedded
import NIOTestUtils
import RegistryProtocol
import SwiftProtobuf
import Testing

// The frame codec as a peer sees it: what the decoder hands on for the bytes a client writes, and what
// the encoder puts on the wire. No sockets: EmbeddedChannel and NIOTestUtils' decoder verifier.

/// A buffer holding `bytes`.
func buffer(_ bytes: [UInt8]) -> ByteBuffer {
    ByteBuffer(bytes: bytes)
}

/// A whole frame: the 4-byte big-endian length of `body`, then `body`.
func frame(_ body: [UInt8]) -> [UInt8] {
    let length = UInt32(body.count)
    return [UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        + body
}

/// A channel that decodes frames of at most `maximum` bytes.
func decodingChannel(maximum: Int = 4 << 20) throws -> EmbeddedChannel {
    let channel = EmbeddedChannel()
    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maximumFrameLength: maximum)))
    return channel
}

/// A channel that frames what it writes.
func encodingChannel() throws -> EmbeddedChannel {
    let channel = EmbeddedChannel()
    try channel.pipeline.syncOperations.addHandler(MessageToByteHandler(FrameEncoder()))
    return channel
}

extension EmbeddedChannel {
    /// The bytes of every frame body read so far.
    func readFrames() throws -> [[UInt8]] {
        var frames: [[UInt8]] = []
        while let body = try self.readInbound(as: ByteBuffer.self) {
            frames.append(Array(body.readableBytesView))
        }
        return frames
    }

    /// Every byte written to the wire so far, concatenated.
    func readWire() throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let chunk = try self.readOutbound(as: ByteBuffer.self) {
            bytes += Array(chunk.readableBytesView)
        }
        return bytes
    }
}

@Suite("FrameDecoder")
struct FrameDecoderTests {
    @Test("passes the NIO decoder verifier (drip-fed, batched, one frame per buffer), zero-length frames included")
    func verifier() throws {
        let bodies: [[UInt8]] = [
            [0x08, 0x01],
            [],
            Array("a somewhat longer body that spans many drip-fed reads".utf8),
            [0x00],
            [],
            (0..<300).map { UInt8(truncatingIfNeeded: $0) },
        ]
        let pairs = bodies.map { body in (buffer(frame(body)), [buffer(body)]) }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) {
            FrameDecoder(maximumFrameLength: 1024)
        }
    }

    @Test("two frames in one buffer are two reads, in order")
    func twoFramesInOneBuffer() throws {
        let channel = try decodingChannel()
        try channel.writeInbound(buffer(frame([1, 2, 3]) + frame([4, 5])))
        #expect(try channel.readFrames() == [[1, 2, 3], [4, 5]])
        #expect(try channel.finish().isClean)
    }

    @Test("a frame split byte by byte is one read, once its last byte is in")
    func byteByByte() throws {
        let channel = try decodingChannel()
        let bytes = frame(Array("hello".utf8))
        for byte in bytes.dropLast() {
            try channel.writeInbound(buffer([byte]))
            #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        }
        try channel.writeInbound(buffer([bytes.last!]))
        #expect(try channel.readFrames() == [Array("hello".utf8)])
        #expect(try channel.finish().isClean)
    }

    @Test("a zero-length frame is an empty message, passed on at once")
    func zeroLength() throws {
        let channel = try decodingChannel()
        try channel.writeInbound(buffer([0, 0, 0, 0]))
        #expect(try channel.readFrames() == [[]])
        #expect(try channel.finish().isClean)
    }

    @Test("a length above the maximum throws FrameTooLargeError on the 4 prefix bytes alone, without the body")
    func tooLargeOnPrefix() throws {
        let channel = try decodingChannel(maximum: 1024)
        // 1025 = 0x401: the prefix arrives byte by byte; nothing happens until the fourth.
        for byte: UInt8 in [0x00, 0x00, 0x04] {
            try channel.writeInbound(buffer([byte]))
        }
        let error = #expect(throws: FrameTooLargeError.self) {
            try channel.writeInbound(buffer([0x01]))
        }
        #expect(error?.length == 1025)
        #expect(error?.maximum == 1024)
        #expect(error?.description == "frame of 1025 bytes exceeds the maximum of 1024")
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        // The body that follows is never handed on: the decoder stays failed.
        #expect(throws: (any Error).self) {
            try channel.writeInbound(buffer([UInt8](repeating: 0x11, count: 1025)))
        }
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(try channel.finish().isClean)
    }

    @Test("a 4 GiB announcement is refused at once with its full length")
    func hugeAnnouncement() throws {
        let channel = try decodingChannel()
        let error = #expect(throws: FrameTooLargeError.self) {
            try channel.writeInbound(buffer([0xff, 0xff, 0xff, 0xff]))
        }
        #expect(error?.length == 4_294_967_295)
        #expect(error?.maximum == 4 << 20)
        #expect(try channel.finish().isClean)
    }

    @Test("with the default maximum, 00 40 00 00 is the largest prefix accepted (PROTOCOL.md §2)")
    func defaultMaximumBoundary() throws {
        let accepting = try decodingChannel()
        try accepting.writeInbound(buffer([0x00, 0x40, 0x00, 0x00]))  // waits for the 4 MiB body
        #expect(try accepting.readInbound(as: ByteBuffer.self) == nil)
        #expect(try accepting.finish().isClean)

        let refusing = try decodingChannel()
        let error = #expect(throws: FrameTooLargeError.self) {
            try refusing.writeInbound(buffer([0x00, 0x40, 0x00, 0x01]))
        }
        #expect(error?.length == 4_194_305)
        #expect(error?.maximum == 4_194_304)
        #expect(try refusing.finish().isClean)
    }

    @Test("frames before an oversized prefix in the same buffer are still delivered")
    func framesBeforeTheOversizedOne() throws {
        let channel = try decodingChannel(maximum: 8)
        let error = #expect(throws: FrameTooLargeError.self) {
            try channel.writeInbound(buffer(frame([7, 7]) + [0x00, 0x00, 0x00, 0x09]))
        }
        #expect(error?.length == 9)
        #expect(try channel.readFrames() == [[7, 7]])
        #expect(try channel.finish().isClean)
    }

    @Test("a frame of exactly the maximum length is accepted")
    func exactlyTheMaximum() throws {
        let channel = try decodingChannel(maximum: 64)
        let body = (0..<64).map { UInt8($0) }
        try channel.writeInbound(buffer(frame(body)))
        #expect(try channel.readFrames() == [body])
        #expect(try channel.finish().isClean)
    }

    @Test("the real 4 MiB default maximum is accepted whole")
    func defaultMaximumWhole() throws {
        let channel = try decodingChannel()
        let body = [UInt8](repeating: 0xab, count: 4 << 20)
        try channel.writeInbound(buffer(frame(body)))
        let frames = try channel.readFrames()
        #expect(frames.count == 1)
        #expect(frames.first?.count == 4 << 20)
        #expect(try channel.finish().isClean)
    }

    @Test("a truncated frame at EOF produces nothing and no error")
    func truncatedAtEOF() throws {
        let channel = try decodingChannel()
        try channel.writeInbound(buffer(frame([1, 2]) + [0x00, 0x00, 0x00, 0x05, 0xaa, 0xbb]))
        #expect(try channel.readFrames() == [[1, 2]])
        // finish() closes the channel: decodeLast sees the 6 dangling bytes and drops them.
        #expect(try channel.finish().isClean)
    }

    @Test("a lone partial prefix at EOF produces nothing")
    func partialPrefixAtEOF() throws {
        let channel = try decodingChannel()
        try channel.writeInbound(buffer([0x00, 0x00]))
        #expect(try channel.finish().isClean)
    }

    @Test("nextFrame consumes exactly one frame and leaves the rest")
    func nextFrame() throws {
        let decoder = FrameDecoder(maximumFrameLength: 16)
        var input = buffer(frame([9, 8, 7]) + [0x00, 0x00])
        let first = try decoder.nextFrame(&input)
        #expect(first.map { Array($0.readableBytesView) } == [9, 8, 7])
        #expect(try decoder.nextFrame(&input) == nil)
        #expect(Array(input.readableBytesView) == [0x00, 0x00])
    }
}

@Suite("FrameEncoder")
struct FrameEncoderTests {
    @Test("writes the 4-byte big-endian length, then the bytes")
    func lengthThenBytes() throws {
        let channel = try encodingChannel()
        try channel.writeOutbound(buffer([0xde, 0xad, 0xbe, 0xef, 0x01]))
        #expect(try channel.readWire() == [0x00, 0x00, 0x00, 0x05, 0xde, 0xad, 0xbe, 0xef, 0x01])
        #expect(try channel.finish().isClean)
    }

    @Test("the length is big-endian for bodies longer than 255 bytes")
    func bigEndian() throws {
        let channel = try encodingChannel()
        let body = [UInt8](repeating: 0x5a, count: 0x01_0203)
        try channel.writeOutbound(buffer(body))
        let wire = try channel.readWire()
        #expect(Array(wire.prefix(4)) == [0x00, 0x01, 0x02, 0x03])
        #expect(wire.count == 4 + body.count)
        #expect(Array(wire.dropFirst(4)) == body)
    }

    @Test("an empty message is the prefix 00 00 00 00 alone")
    func empty() throws {
        let channel = try encodingChannel()
        try channel.writeOutbound(ByteBuffer())
        #expect(try channel.readWire() == [0x00, 0x00, 0x00, 0x00])
    }

    @Test("a message framed whole is byte for byte what the encoder writes, the empty message included")
    func framedWhole() throws {
        let messages: [Registry_V1_Request] = [
            Registry_V1_Request(),
            .with {
                $0.id = 300
                $0.listGalleries = .init()
            },
            .with {
                $0.id = 9
                $0.authenticate = .with {
                    $0.identifier = "zoë"
                    $0.face = .with { $0.templates = [.with { $0.vector = (0..<512).map { Float($0) / 512 } }] }
                }
            },
        ]
        for message in messages {
            let channel = try encodingChannel()
            try channel.writeOutbound(ByteBuffer(message: message))
            let framed = try ByteBuffer(frameOf: message)
            #expect(Array(framed.readableBytesView) == (try channel.readWire()))
        }
    }

    @Test("a Request survives encode then decode, also when the wire is cut into odd pieces")
    func roundTrip() throws {
        let requests: [Registry_V1_Request] = [
            .with {
                $0.id = 7
                $0.register = .with {
                    $0.gallery = "lobby"
                    $0.identifier = "zoë"
                    $0.face = .with {
                        $0.templates = [
                            .with {
                                $0.algorithm = 24
                                $0.vector = (0..<128).map { Float($0) / 128 - 0.5 }
                            },
                            .with {
                                $0.algorithm = 1000
                                $0.landmarks = [
                                    .with {
                                        $0.name = "NOSE_TIP"
                                        $0.x = 1.5
                                        $0.y = -2
                                        $0.z = 0.25
                                    }
                                ]
                            },
                        ]
                    }
                    $0.force = true
                }
            },
            .with {
                $0.id = 8
                $0.identify = .with {
                    $0.safe = false
                    $0.limit = 3
                }
            },
            Registry_V1_Request(),  // the empty request: a zero-length frame
            .with {
                $0.id = UInt64.max
                $0.listGalleries = .init()
            },
        ]
        let encoder = try encodingChannel()
        for request in requests {
            try encoder.writeOutbound(ByteBuffer(message: request))
        }
        let wire = try encoder.readWire()
        #expect(try encoder.finish().isClean)

        let decoder = try decodingChannel()
        var offset = 0
        var pieceLength = 1
        while offset < wire.count {
            let end = min(wire.count, offset + pieceLength)
            try decoder.writeInbound(buffer(Array(wire[offset..<end])))
            offset = end
            pieceLength = pieceLength * 3 % 257 + 1
        }
        let decoded = try decoder.readFrames().map { try Registry_V1_Request(serializedBytes: $0) }
        #expect(decoded == requests)
        #expect(decoded[2].operation == nil)
        #expect(try decoder.finish().isClean)
    }
}
