import NIOCore
import RegistryModel

/// A registration request as ``RegisterDecoding`` reads it: the fields the daemon uses, in the
/// engine's own types.
public struct WireRegistration: Sendable, Equatable {
    public var gallery = ""
    public var identifier = ""
    /// nil: the request carried no face.
    public var face: Face?
    public var force = false

    public init(gallery: String = "", identifier: String = "", face: Face? = nil, force: Bool = false) {
        self.gallery = gallery
        self.identifier = identifier
        self.face = face
        self.force = force
    }

    /// The same request as SwiftProtobuf's message.
    public var message: Registry_V1_RegisterRequest {
        var message = Registry_V1_RegisterRequest()
        message.gallery = self.gallery
        message.identifier = self.identifier
        if let face = self.face { message.face = Registry_V1_Face(face) }
        message.force = self.force
        return message
    }
}

/// Reads the common shape of a registration request straight from the wire bytes, as
/// ``AuthenticateDecoding`` reads authentications (the same rules: a request id and a `register`
/// operation with gallery, identifier, force, and a face of templates that each carry an algorithm
/// and a packed vector; anything else, or a field given twice, returns nil and the frame is decoded
/// with SwiftProtobuf). The generic decoder was a twentieth of the daemon's CPU per registration;
/// `RegisterCodingTests` compares ``WireRegistration/message`` with SwiftProtobuf's reading.
public enum RegisterDecoding {
    /// The request id and the registration, or nil: decode the frame the general way.
    public static func decode(_ frame: ByteBuffer) -> (id: UInt64, request: WireRegistration)? {
        AuthenticateDecoding.request(frame, operation: 10, Self.register)
    }

    private static func register(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> WireRegistration? {
        AuthenticateDecoding.personRequest(bytes, range).map { gallery, identifier, face, flag in
            WireRegistration(gallery: gallery, identifier: identifier, face: face, force: flag ?? false)
        }
    }
}

/// Writes the reply to a registration that has no findings, no quality assessment, no liveness
/// verdict and no template data (the common reply) as a whole frame: the bytes SwiftProtobuf would
/// write for the `Response` (fields in number order, defaults omitted, optional fields when set),
/// without building the messages (`RegisterCodingTests` compares them).
public enum RegisterEncoding {
    /// The framed reply, or nil when the result has more than the common fields (then encode the
    /// message).
    public static func framedReply(id: UInt64, _ result: Registration) -> ByteBuffer? {
        guard result.findings.isEmpty, result.quality == nil, result.liveness == nil, result.stored.allSatisfy({ $0.template == nil })
        else { return nil }
        let templates = result.stored.map(Self.storedSize)
        let body = zip(templates, result.stored).reduce(0) { $0 + 1 + Self.varintSize(UInt64($1.0)) + $1.0 }
        let response = (id != 0 ? 1 + Self.varintSize(id) : 0) + 1 + Self.varintSize(UInt64(body)) + body
        var buffer = ByteBufferAllocator().buffer(capacity: 4 + response)
        // Into stack memory first, then one copy into the buffer: each write to a ByteBuffer checks
        // its storage's uniqueness and exclusive access.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4 + response) { bytes in
            var count = 0
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
            func putFloat(_ field: UInt8, _ value: Float) {
                put(field << 3 | 5)
                for shift in stride(from: 0, to: 32, by: 8) { put(UInt8(truncatingIfNeeded: value.bitPattern >> shift)) }
            }
            for shift in stride(from: 24, through: 0, by: -8) { put(UInt8(truncatingIfNeeded: UInt32(response) >> shift)) }
            // Response: id (1) when not zero, register (10).
            if id != 0 {
                put(1 << 3)
                putVarint(id)
            }
            put(10 << 3 | 2)
            putVarint(UInt64(body))
            // RegisterResult: stored (1), each a StoredTemplate.
            for (stored, size) in zip(result.stored, templates) {
                put(1 << 3 | 2)
                putVarint(UInt64(size))
                if stored.id != 0 {
                    put(1 << 3)
                    putVarint(stored.id)
                }
                if !stored.identifier.isEmpty {
                    put(2 << 3 | 2)
                    putVarint(UInt64(stored.identifier.utf8.count))
                    for byte in stored.identifier.utf8 { put(byte) }
                }
                if stored.algorithm != 0 {
                    put(3 << 3)
                    putVarint(UInt64(stored.algorithm))
                }
                if stored.registeredAt != 0 {
                    put(4 << 3)
                    putVarint(UInt64(bitPattern: stored.registeredAt))  // int64: two's complement, 10 bytes when negative
                }
                let source = Self.source(stored)
                if source != 0 {
                    put(5 << 3)
                    putVarint(source)
                }
                if let quality = stored.quality { putFloat(6, quality) }
                if let landmarkQuality = stored.landmarkQuality { putFloat(8, landmarkQuality) }
            }
            precondition(count == 4 + response, "a register reply's size was miscounted")
            buffer.writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[0..<count])))
        }
        return buffer
    }

    static func varintSize(_ value: UInt64) -> Int {
        var value = value
        var size = 1
        while value >= 0x80 {
            value >>= 7
            size += 1
        }
        return size
    }

    /// The wire value of a template's source.
    static func source(_ stored: StoredTemplate) -> UInt64 { UInt64(Registry_V1_TemplateSource(stored.source).rawValue) }

    /// The encoded size of one StoredTemplate without template data.
    static func storedSize(_ stored: StoredTemplate) -> Int {
        var size = 0
        if stored.id != 0 { size += 1 + Self.varintSize(stored.id) }
        let identifier = stored.identifier.utf8.count
        if identifier > 0 { size += 1 + Self.varintSize(UInt64(identifier)) + identifier }
        if stored.algorithm != 0 { size += 1 + Self.varintSize(UInt64(stored.algorithm)) }
        if stored.registeredAt != 0 { size += 1 + Self.varintSize(UInt64(bitPattern: stored.registeredAt)) }
        if Self.source(stored) != 0 { size += 1 + Self.varintSize(Self.source(stored)) }
        if stored.quality != nil { size += 5 }
        if stored.landmarkQuality != nil { size += 5 }
        return size
    }
}
