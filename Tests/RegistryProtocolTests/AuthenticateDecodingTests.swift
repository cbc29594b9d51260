import NIOCore
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import SyntheticFaces
import TestSupport
import Testing

/// The hand-written reading of authentication requests must give exactly SwiftProtobuf's message,
/// or nothing (then the daemon decodes with SwiftProtobuf): on every shape it takes, on shapes it
/// leaves alone, and on damaged bytes.
@Suite struct AuthenticateDecodingTests {
    static func text(_ random: inout SeededGenerator) -> String {
        let pieces = ["", "door", "lobby-2", "zoë", "人脸", "a b", String(repeating: "x", count: 40), "\u{1F600}"]
        return (0..<Int.random(in: 0...2, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
    }

    static func request(_ random: inout SeededGenerator) -> Registry_V1_Request {
        var authenticate = Registry_V1_AuthenticateRequest()
        if Bool.random(using: &random) { authenticate.gallery = Self.text(&random) }
        if Bool.random(using: &random) { authenticate.identifier = Self.text(&random) }
        if Int.random(in: 0..<4, using: &random) > 0 { authenticate.face = Self.face(&random) }
        if Bool.random(using: &random) { authenticate.autoEnrol = Bool.random(using: &random) }
        var request = Registry_V1_Request()
        request.id = [0, 1, 300, UInt64.max].randomElement(using: &random)!
        request.authenticate = authenticate
        return request
    }

    /// A face of the shape the hand readers take: 0 to 3 vector templates of any algorithm and length.
    static func face(_ random: inout SeededGenerator) -> Registry_V1_Face {
        .with { face in
            face.templates = (0..<Int.random(in: 0...3, using: &random)).map { _ in
                .with {
                    $0.algorithm = [0, 16, 24, 300, 1000, UInt32.max].randomElement(using: &random)!
                    $0.vector = (0..<[0, 1, 128, 512].randomElement(using: &random)!).map { _ in Float.random(in: -1...1, using: &random) }
                }
            }
        }
    }

    /// `bytes` with 1 to 3 changes: a byte replaced, the rest cut off, a byte inserted, a high bit flipped.
    static func damaged(_ bytes: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            guard !bytes.isEmpty else { break }
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<4, using: &random) {
            case 0: bytes[at] = UInt8.random(in: 0...255, using: &random)
            case 1: bytes.removeSubrange(at...)
            case 2: bytes.insert(UInt8.random(in: 0...255, using: &random), at: at)
            default: bytes[at] ^= 0x80
            }
        }
        return bytes
    }

    /// What the fast reading gives, as a whole request (nil: it declined).
    static func fast(_ bytes: [UInt8]) -> Registry_V1_Request? {
        AuthenticateDecoding.decode(ByteBuffer(bytes: bytes)).map { id, authenticate in
            var request = Registry_V1_Request()
            request.id = id
            request.authenticate = authenticate.message
            return request
        }
    }

    @Test func everyUsualShapeIsReadAsSwiftProtobufReadsIt() throws {
        var random = SeededGenerator(seed: 13)
        for _ in 0..<2_000 {
            let request = Self.request(&random)
            let bytes: [UInt8] = try request.serializedBytes()
            let fast = try #require(Self.fast(bytes), "declined a usual authentication")
            #expect(fast == request)
            #expect(fast.authenticate.hasFace == request.authenticate.hasFace)
            #expect(fast.authenticate.hasAutoEnrol == request.authenticate.hasAutoEnrol)
        }
    }

    @Test func otherShapesAreLeftToSwiftProtobuf() throws {
        let others: [Registry_V1_Request] = [
            .with { $0.listGalleries = .init() },
            .with { $0.identify = .with { $0.face.templates = [.with { $0.vector = [1, 0] }] } },
            .with { $0.authenticate = .with { $0.face.templates = [.with { $0.landmarks = [.with { $0.name = "NOSE_TIP" }] }] } },
            .with { $0.authenticate = .with { $0.face.capture = .with { $0.detectorConfidence = 0.9 } } },
            .with { $0.authenticate = .with { $0.face.depthFrames = [.init()] } },
            Registry_V1_Request(),
        ]
        for request in others {
            #expect(Self.fast(try request.serializedBytes()) == nil)
        }
        // A field given twice (protobuf merges or keeps the last), an unpacked vector, a ragged one:
        // declined, not guessed.
        let twice: [UInt8] = [0x62, 0x03, 0x12, 0x01, 0x61, 0x62, 0x03, 0x12, 0x01, 0x62]
        #expect(Self.fast(twice) == nil)
        let unpacked: [UInt8] = [0x62, 0x09, 0x1A, 0x07, 0x0A, 0x05, 0x15, 0x00, 0x00, 0x80, 0x3F]
        #expect(Self.fast(unpacked) == nil)
        let ragged: [UInt8] = [0x62, 0x07, 0x1A, 0x05, 0x0A, 0x03, 0x12, 0x01, 0x00]
        #expect(Self.fast(ragged) == nil)
    }

    @Test func damagedBytesAreReadAsSwiftProtobufReadsThemOrDeclined() throws {
        var random = SeededGenerator(seed: 29)
        var read = 0
        for _ in 0..<20_000 {
            let request: [UInt8] = try Self.request(&random).serializedBytes()
            guard !request.isEmpty else { continue }
            let bytes = Self.damaged(request, &random)
            guard let fast = Self.fast(bytes) else { continue }
            read += 1
            let reference = try? Registry_V1_Request(serializedBytes: bytes)
            #expect(fast == reference, "bytes \(bytes)")
        }
        // Many damaged frames still have the usual shape (a changed float, a changed id): the
        // comparison above must have run on them.
        #expect(read > 1_000)
    }

    /// The hand-written common reply is byte for byte SwiftProtobuf's encoding of the same response:
    /// zero and negative-zero scores, NaN, large ids, every field absent or present.
    @Test func theCommonReplyIsWrittenAsSwiftProtobufWritesIt() throws {
        var random = SeededGenerator(seed: 31)
        let scores: [Float] = [0, -0.0, 1, -1, 0.61234, .nan, .infinity, .leastNonzeroMagnitude]
        for _ in 0..<5_000 {
            let result = Authentication(
                authenticated: Bool.random(using: &random),
                score: Bool.random(using: &random) ? scores.randomElement(using: &random)! : Float.random(in: -1...1, using: &random),
                templateId: [0, 1, 127, 128, 300, UInt64(UInt32.max), UInt64.max].randomElement(using: &random)!,
                algorithm: [0, 1, 24, 300, UInt32.max].randomElement(using: &random)!, autoEnrolment: [], liveness: nil)
            let id = [0, 1, 127, 128, 1 << 35, UInt64.max].randomElement(using: &random)!
            var response = Registry_V1_Response()
            response.id = id
            response.authenticate = Registry_V1_AuthenticateResult(result)
            let expected = try ByteBuffer(frameOf: response)
            let written = try #require(AuthenticateEncoding.framedReply(id: id, result))
            #expect(Array(written.readableBytesView) == Array(expected.readableBytesView), "\(result) id \(id)")
        }
        // More than the common fields: left to SwiftProtobuf.
        var enrolled = Authentication(authenticated: true, score: 0.9, templateId: 7, algorithm: 24, autoEnrolment: [], liveness: nil)
        enrolled.autoEnrolment = [AutoEnrolmentOutcome(algorithm: 300, result: .noTemplate)]
        #expect(AuthenticateEncoding.framedReply(id: 1, enrolled) == nil)
    }
}
