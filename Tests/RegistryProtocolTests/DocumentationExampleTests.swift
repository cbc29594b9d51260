import Crypto
import NIOCore
import NIOEmbedded
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Testing

// PROTOCOL.md gives exact bytes for its example session, for people writing clients in other
// languages. These tests produce those bytes with the daemon's own encoder (ByteBuffer(message:) +
// FrameEncoder) and read the documented replies with its decoder, so the document stays honest.

/// Bytes from a string of hexadecimal pairs separated by spaces or new lines, as PROTOCOL.md shows them.
func hexBytes(_ text: String) -> [UInt8] {
    text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { UInt8($0, radix: 16)! }
}

/// The frame `message` becomes on the wire.
func wireFrame(_ message: some SwiftProtobuf.Message) throws -> [UInt8] {
    let channel = try encodingChannel()
    try channel.writeOutbound(ByteBuffer(message: message))
    let wire = try channel.readWire()
    _ = try channel.finish()
    return wire
}

/// The one message the frame decoder reads from `bytes`.
func decodeFrame<M: SwiftProtobuf.Message>(_ bytes: [UInt8], as type: M.Type) throws -> M? {
    let channel = try decodingChannel()
    try channel.writeInbound(buffer(bytes))
    let frames = try channel.readFrames()
    _ = try channel.finish()
    guard frames.count == 1 else { return nil }
    return try M(serializedBytes: frames[0])
}

/// Alice's arcface template of PROTOCOL.md §6: magnitude 0.1875 for i < 4, 0.125 for i < 36, else
/// 0.0625; negative when i mod 3 = 1.
let aliceVector: [Float] = (0..<128).map { i in
    let magnitude: Float = i < 4 ? 0.1875 : i < 36 ? 0.125 : 0.0625
    return i % 3 == 1 ? -magnitude : magnitude
}

/// The later capture of alice: values 4–7 with their signs flipped.
let laterAliceVector: [Float] = aliceVector.enumerated().map { (4..<8).contains($0.offset) ? -$0.element : $0.element }

@Suite("PROTOCOL.md worked example")
struct DocumentationExampleTests {
    @Test("1. the Hello request is 00 00 00 0f 08 01 12 0b 08 01 1a 07 65 78 61 6d 70 6c 65")
    func helloRequest() throws {
        let request = Registry_V1_Request.with {
            $0.id = 1
            $0.hello = .with {
                $0.protocolMajor = 1
                $0.protocolMinor = 0
                $0.clientName = "example"
            }
        }
        #expect(try wireFrame(request) == hexBytes("00 00 00 0f 08 01 12 0b 08 01 1a 07 65 78 61 6d 70 6c 65"))
    }

    @Test("1. the documented Hello reply decodes as protocol 1, server_version 0.1.0")
    func helloReply() throws {
        let bytes = hexBytes("00 00 00 0d 08 01 1a 09 08 01 1a 05 30 2e 31 2e 30")
        let response = try #require(try decodeFrame(bytes, as: Registry_V1_Response.self))
        #expect(response.id == 1)
        guard case .hello(let hello) = response.result else {
            Issue.record("expected a hello result")
            return
        }
        #expect(hello.protocolMajor == 1 && hello.protocolMinor == 0 && hello.serverVersion == "0.1.0")
        // And the same reply encodes back to those bytes.
        #expect(try wireFrame(response) == bytes)
    }

    @Test("2. alice's template has norm 1, and the register frame is 539 bytes")
    func registerAlice() throws {
        #expect(aliceVector.reduce(0) { $0 + $1 * $1 } == 1)
        #expect(zip(aliceVector, laterAliceVector).reduce(0) { $0 + $1.0 * $1.1 } == 0.875)
        let request = Registry_V1_Request.with {
            $0.id = 2
            $0.register = .with {
                $0.identifier = "alice"
                $0.face = Registry_V1_Face(Face(FaceTemplate(algorithm: 24, vector: aliceVector)))
            }
        }
        #expect(try wireFrame(request).count == 539)
    }

    @Test("4. the identify frame: 532 bytes, the documented head and tail, and the documented SHA-256")
    func identifyRequest() throws {
        // safe and auto_enrol are left absent, as in the example (the defaults, true).
        let request = Registry_V1_Request.with {
            $0.id = 4
            $0.identify = .with { $0.face = Registry_V1_Face(Face(FaceTemplate(algorithm: 24, vector: laterAliceVector))) }
        }
        let frame = try wireFrame(request)
        #expect(frame.count == 532)
        #expect(
            Array(frame.prefix(36))
                == hexBytes(
                    """
                    00 00 02 10 08 04 5a 8b 04 12 88 04 0a 85 04 08 18 12 80 04
                    00 00 40 3e 00 00 40 be 00 00 40 3e 00 00 40 3e
                    """))
        #expect(Array(frame[36..<40]) == hexBytes("00 00 00 3e"))
        #expect(Array(frame.suffix(8)) == hexBytes("00 00 80 3d 00 00 80 bd"))
        #expect(
            SHA256.hash(data: frame).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
                == "c0d79f2e4172534f539b954e74a9ac3df830ddaf00583c5582a6a346e9579407")
    }

    @Test("4. the documented identify reply reads as alice, 0.875, template 1, three NO_TEMPLATE outcomes")
    func identifyReply() throws {
        let bytes = hexBytes(
            """
            00 00 00 2a 08 04 5a 26 08 18 12 0e 0a 05 61 6c 69 63 65 15 00 00 60 3f 18 01 1a 05 08 ac 02 10 03
            1a 04 08 10 10 03 1a 05 08 e8 07 10 03
            """)
        let response = try #require(try decodeFrame(bytes, as: Registry_V1_Response.self))
        #expect(response.id == 4)
        guard case .identify(let result) = response.result else {
            Issue.record("expected an identify result")
            return
        }
        let expected = Identification(
            algorithm: 24, matches: [IdentifyMatch(identifier: "alice", score: 0.875, templateId: 1)],
            autoEnrolment: [300, 16, 1000].map { AutoEnrolmentOutcome(algorithm: $0, result: .noTemplate) })
        #expect(Identification(result) == expected)
        // The daemon's encoding of that identification is exactly the documented frame.
        let encoded = Registry_V1_Response.with {
            $0.id = 4
            $0.identify = Registry_V1_IdentifyResult(expected)
        }
        #expect(try wireFrame(encoded) == bytes)
    }

    @Test("7. the pipelined list_galleries frame is 00 00 00 05 08 02 a2 01 00 (an empty oneof case is still encoded)")
    func listGalleriesRequest() throws {
        let request = Registry_V1_Request.with {
            $0.id = 2
            $0.listGalleries = Registry_V1_ListGalleriesRequest()
        }
        #expect(try wireFrame(request) == hexBytes("00 00 00 05 08 02 a2 01 00"))
    }
}
