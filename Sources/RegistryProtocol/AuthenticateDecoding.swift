import NIOCore
import RegistryModel

/// An authentication request as ``AuthenticateDecoding`` reads it: the fields the daemon uses, in the
/// engine's own types.
public struct WireAuthentication: Sendable, Equatable {
    public var gallery = ""
    public var identifier = ""
    /// nil: the request carried no face.
    public var face: Face?
    /// nil: the request did not say (auto-enrolment then defaults to on).
    public var autoEnrol: Bool?

    public init(gallery: String = "", identifier: String = "", face: Face? = nil, autoEnrol: Bool? = nil) {
        self.gallery = gallery
        self.identifier = identifier
        self.face = face
        self.autoEnrol = autoEnrol
    }

    /// The same request as SwiftProtobuf's message.
    public var message: Registry_V1_AuthenticateRequest {
        var message = Registry_V1_AuthenticateRequest()
        message.gallery = self.gallery
        message.identifier = self.identifier
        if let face = self.face { message.face = Registry_V1_Face(face) }
        if let autoEnrol = self.autoEnrol { message.autoEnrol = autoEnrol }
        return message
    }
}

/// Reads the common shape of an authentication request straight from the wire bytes, without
/// SwiftProtobuf's generic decoder: a request id, and an `authenticate` operation with gallery,
/// identifier, auto_enrol, and a face of templates that each carry an algorithm and a packed vector.
///
/// Authentication is most of the daemon's traffic, and the generic decoder (unspecialised code, a
/// metadata lookup per message field) was about a tenth of the event loop's time per request. The
/// request is read into the engine's types (``WireAuthentication``), not into the protobuf message
/// that would then be converted: a storage object, an array and its copies less per request.
///
/// Anything else — another operation, a field outside that shape, a field given twice, an unpacked or
/// ragged vector, text that is not UTF-8, a malformed varint — returns nil, and the caller decodes the
/// frame with SwiftProtobuf as before. So a request read here is exactly the message SwiftProtobuf
/// would decode (`AuthenticateDecodingTests` compares ``WireAuthentication/message`` with it, on valid
/// and on damaged bytes).
public enum AuthenticateDecoding {
    /// The request id and the authentication, or nil: decode the frame the general way.
    public static func decode(_ frame: ByteBuffer) -> (id: UInt64, request: WireAuthentication)? {
        Self.request(frame, operation: 12, Self.authenticate)
    }

    /// A `Request` of a request id and one operation, field `operation`, read by `read`; nil for any
    /// other shape. (Registrations are read the same way: ``RegisterDecoding``.)
    static func request<Operation>(
        _ frame: ByteBuffer, operation: UInt64, _ read: (UnsafeRawBufferPointer, Range<Int>) -> Operation?
    ) -> (id: UInt64, request: Operation)? {
        frame.withUnsafeReadableBytes { bytes in
            var reader = WireReader(bytes: bytes, range: 0..<bytes.count)
            var id: UInt64?
            var request: Operation?
            while !reader.atEnd {
                guard let (field, wireType) = reader.tag() else { return nil }
                switch (field, wireType) {
                case (1, .varint) where id == nil:
                    guard let value = reader.varint() else { return nil }
                    id = value
                case (operation, .lengthDelimited) where request == nil:
                    guard let range = reader.lengthDelimited(), let decoded = read(bytes, range) else { return nil }
                    request = decoded
                default:
                    return nil
                }
            }
            guard let request else { return nil }
            return (id ?? 0, request)
        }
    }

    private static func authenticate(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> WireAuthentication? {
        Self.personRequest(bytes, range).map { gallery, identifier, face, flag in
            WireAuthentication(gallery: gallery, identifier: identifier, face: face, autoEnrol: flag)
        }
    }

    /// The shape authenticate and register requests share: gallery (1), identifier (2), face (3)
    /// and a bool (4: auto_enrol, force), each at most once; nil for anything else.
    static func personRequest(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>
    ) -> (gallery: String, identifier: String, face: Face?, flag: Bool?)? {
        var reader = WireReader(bytes: bytes, range: range)
        var gallery: String?
        var identifier: String?
        var face: Face?
        var flag: Bool?
        while !reader.atEnd {
            guard let (field, wireType) = reader.tag() else { return nil }
            switch (field, wireType) {
            case (1, .lengthDelimited) where gallery == nil:
                guard let text = reader.string() else { return nil }
                gallery = text
            case (2, .lengthDelimited) where identifier == nil:
                guard let text = reader.string() else { return nil }
                identifier = text
            case (3, .lengthDelimited) where face == nil:
                guard let range = reader.lengthDelimited(), let decoded = Self.face(bytes, range) else { return nil }
                face = decoded
            case (4, .varint) where flag == nil:
                guard let value = reader.varint() else { return nil }
                flag = value != 0
            default:
                return nil
            }
        }
        return (gallery ?? "", identifier ?? "", face, flag)
    }

    static func face(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Face? {
        var reader = WireReader(bytes: bytes, range: range)
        var templates: [FaceTemplate] = []
        while !reader.atEnd {
            guard let (field, wireType) = reader.tag(), field == 1, wireType == .lengthDelimited,
                let range = reader.lengthDelimited(), let template = Self.template(bytes, range)
            else { return nil }
            templates.append(template)
        }
        return Face(templates: templates)
    }

    private static func template(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> FaceTemplate? {
        var reader = WireReader(bytes: bytes, range: range)
        var algorithm: UInt32?
        var vector: [Float]?
        while !reader.atEnd {
            guard let (field, wireType) = reader.tag() else { return nil }
            switch (field, wireType) {
            case (1, .varint) where algorithm == nil:
                // A uint32 sent as a wider varint is truncated by protobuf; leave that to SwiftProtobuf.
                guard let value = reader.varint(), let narrow = UInt32(exactly: value) else { return nil }
                algorithm = narrow
            case (2, .lengthDelimited) where vector == nil:
                guard let range = reader.lengthDelimited(), range.count % 4 == 0 else { return nil }
                vector = [Float](unsafeUninitializedCapacity: range.count / 4) { values, count in
                    for index in 0..<range.count / 4 {
                        let bits = bytes.loadUnaligned(fromByteOffset: range.lowerBound + 4 * index, as: UInt32.self)
                        values[index] = Float(bitPattern: UInt32(littleEndian: bits))
                    }
                    count = range.count / 4
                }
            default:
                return nil
            }
        }
        // A template without landmarks is a vector, possibly empty (as `FaceTemplate(message)` reads it).
        return FaceTemplate(algorithm: algorithm ?? 0, vector: vector ?? [])
    }
}

/// Writes the reply to an authentication whose result has no auto-enrolment outcomes and no liveness
/// verdict (the common reply) as a whole frame, straight into the buffer that is written: the bytes
/// SwiftProtobuf would write for the `Response` (fields in number order, defaults omitted), without
/// building the messages or walking them generically (`AuthenticateDecodingTests` compares them).
public enum AuthenticateEncoding {
    /// The framed reply, or nil when the result has more than the common fields (then encode the
    /// message).
    public static func framedReply(id: UInt64, _ result: Authentication) -> ByteBuffer? {
        guard result.autoEnrolment.isEmpty, result.liveness == nil else { return nil }
        // At most 4 + 11 + 2 + 24 bytes, written into stack memory and copied into the buffer in one
        // call: each write to a ByteBuffer checks its storage's uniqueness and exclusive access, which
        // cost about as much as the encoding itself.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 48) { bytes in
            var count = 4  // the frame's length comes first, written once known
            func put(_ byte: UInt8) {
                bytes[count] = byte
                count += 1
            }
            func putVarint(_ value: UInt64) {
                var value = value
                while value >= 0x80 {
                    put(UInt8(truncatingIfNeeded: value) | 0x80)
                    value >>= 7
                }
                put(UInt8(value))
            }
            // Response: id (1, varint) when not zero, then authenticate (12, length-delimited).
            if id != 0 {
                put(1 << 3)
                putVarint(id)
            }
            put(12 << 3 | 2)
            // The result's fields take at most 2 + 5 + 11 + 6 bytes: its length is one varint byte.
            let lengthAt = count
            put(0)
            // AuthenticateResult: authenticated (1, varint), score (2, fixed32), template_id (3, varint),
            // algorithm (4, varint), each only when not zero (the score: when its bits are not zero).
            if result.authenticated {
                put(1 << 3)
                put(1)
            }
            if result.score.bitPattern != 0 {
                put(2 << 3 | 5)
                for shift in stride(from: 0, to: 32, by: 8) { put(UInt8(truncatingIfNeeded: result.score.bitPattern >> shift)) }
            }
            if result.templateId != 0 {
                put(3 << 3)
                putVarint(result.templateId)
            }
            if result.algorithm != 0 {
                put(4 << 3)
                putVarint(UInt64(result.algorithm))
            }
            bytes[lengthAt] = UInt8(count - lengthAt - 1)
            for index in 0..<4 { bytes[index] = UInt8(truncatingIfNeeded: UInt32(count - 4) >> (24 - 8 * index)) }
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            buffer.writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[0..<count])))
            return buffer
        }
    }
}
