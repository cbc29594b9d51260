import NIOCore
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import SyntheticFaces
import TestSupport
import Testing

/// The hand-written reading of registration requests and writing of their common reply must be
/// exactly SwiftProtobuf's, or decline: on every shape they take, on shapes they leave alone, and
/// on damaged bytes.
@Suite struct RegisterCodingTests {
    static func request(_ random: inout SeededGenerator) -> Registry_V1_Request {
        var register = Registry_V1_RegisterRequest()
        if Bool.random(using: &random) { register.gallery = AuthenticateDecodingTests.text(&random) }
        if Bool.random(using: &random) { register.identifier = AuthenticateDecodingTests.text(&random) }
        if Int.random(in: 0..<4, using: &random) > 0 { register.face = AuthenticateDecodingTests.face(&random) }
        if Bool.random(using: &random) { register.force = Bool.random(using: &random) }
        var request = Registry_V1_Request()
        request.id = [0, 1, 300, UInt64.max].randomElement(using: &random)!
        request.register = register
        return request
    }

    /// What the fast reading gives, as a whole request (nil: it declined).
    static func fast(_ bytes: [UInt8]) -> Registry_V1_Request? {
        RegisterDecoding.decode(ByteBuffer(bytes: bytes)).map { id, register in
            var request = Registry_V1_Request()
            request.id = id
            request.register = register.message
            return request
        }
    }

    @Test func everyUsualShapeIsReadAsSwiftProtobufReadsIt() throws {
        var random = SeededGenerator(seed: 17)
        for _ in 0..<2_000 {
            let request = Self.request(&random)
            let bytes: [UInt8] = try request.serializedBytes()
            let fast = try #require(Self.fast(bytes), "declined a usual registration")
            #expect(fast == request)
            #expect(fast.register.hasFace == request.register.hasFace)
        }
        // force sent as a wider varint than 1 is true, as protobuf reads a bool.
        let wide: [UInt8] = [0x52, 0x03, 0x20, 0x80, 0x01]
        #expect(Self.fast(wide)?.register.force == true)
        #expect(try Registry_V1_Request(serializedBytes: wide).register.force == true)
    }

    @Test func otherShapesAreLeftToSwiftProtobuf() throws {
        let others: [Registry_V1_Request] = [
            .with { $0.authenticate = .with { $0.identifier = "a" } },
            .with { $0.register = .with { $0.face.templates = [.with { $0.landmarks = [.with { $0.name = "NOSE_TIP" }] }] } },
            .with { $0.register = .with { $0.face.capture = .with { $0.detectorConfidence = 0.9 } } },
            .with { $0.register = .with { $0.face.depthFrames = [.init()] } },
            Registry_V1_Request(),
        ]
        for request in others {
            #expect(Self.fast(try request.serializedBytes()) == nil)
        }
        // A field given twice: declined, not guessed (protobuf keeps the last).
        let twice: [UInt8] = [0x52, 0x06, 0x12, 0x01, 0x61, 0x12, 0x01, 0x62]
        #expect(Self.fast(twice) == nil)
    }

    @Test func damagedBytesAreReadAsSwiftProtobufReadsThemOrDeclined() throws {
        var random = SeededGenerator(seed: 37)
        var read = 0
        for _ in 0..<20_000 {
            let request: [UInt8] = try Self.request(&random).serializedBytes()
            guard !request.isEmpty else { continue }
            let bytes = AuthenticateDecodingTests.damaged(request, &random)
            guard let fast = Self.fast(bytes) else { continue }
            read += 1
            let reference = try? Registry_V1_Request(serializedBytes: bytes)
            #expect(fast == reference, "bytes \(bytes)")
        }
        #expect(read > 1_000)
    }

    /// The hand-written common reply is byte for byte SwiftProtobuf's encoding of the same response:
    /// ids and times of every varint length (negative times too), qualities present, absent and
    /// zero, identifiers of every length, several stored templates.
    @Test func theCommonReplyIsWrittenAsSwiftProtobufWritesIt() throws {
        var random = SeededGenerator(seed: 41)
        let floats: [Float?] = [nil, 0, -0.0, 0.5, 1, .nan]
        let sources: [TemplateSource] = [.registered, .autoEnrolled, .imported, .forced]
        for _ in 0..<5_000 {
            let stored = (0..<Int.random(in: 0...3, using: &random)).map { _ in
                StoredTemplate(
                    id: [0, 1, 127, 128, 300, UInt64(UInt32.max), UInt64.max].randomElement(using: &random)!,
                    identifier: [
                        "", "a", "person-17", "zoë", "人脸", String(repeating: "x", count: 127), String(repeating: "y", count: 256),
                    ].randomElement(using: &random)!,
                    algorithm: [0, 1, 24, 300, UInt32.max].randomElement(using: &random)!,
                    registeredAt: [0, 1, -1, 1_796_000_000_000_000, Int64.min, Int64.max].randomElement(using: &random)!,
                    source: sources.randomElement(using: &random)!, quality: floats.randomElement(using: &random)!, template: nil,
                    landmarkQuality: floats.randomElement(using: &random)!)
            }
            let result = Registration(stored: stored, findings: [], quality: nil, liveness: nil)
            let id = [0, 1, 127, 128, 1 << 35, UInt64.max].randomElement(using: &random)!
            var response = Registry_V1_Response()
            response.id = id
            response.register = Registry_V1_RegisterResult(result)
            let expected = try ByteBuffer(frameOf: response)
            let written = try #require(RegisterEncoding.framedReply(id: id, result))
            #expect(Array(written.readableBytesView) == Array(expected.readableBytesView), "\(result) id \(id)")
        }
        // More than the common fields: left to SwiftProtobuf.
        let one = StoredTemplate(
            id: 7, identifier: "a", algorithm: 24, registeredAt: 1, source: .registered, quality: nil, template: nil)
        let finding = RegistrationFinding(algorithm: 24, kind: .similarFace(identifier: "b", score: 0.7))
        #expect(RegisterEncoding.framedReply(id: 1, Registration(stored: [one], findings: [finding], quality: nil, liveness: nil)) == nil)
        var withData = one
        withData.template = FaceTemplate(algorithm: 24, vector: [1])
        #expect(RegisterEncoding.framedReply(id: 1, Registration(stored: [withData], findings: [], quality: nil, liveness: nil)) == nil)
    }
}
