import NIOCore
import SwiftProtobuf

/// Splits a byte stream into frames: a 4-byte big-endian length, then that many bytes.
///
/// ```
/// +--------+--------+--------+--------+------------------------+
/// |        length N (u32, big-endian) | N bytes: one protobuf  |
/// +--------+--------+--------+--------+------------------------+
/// ```
///
/// The length is checked against the maximum as soon as the 4 prefix bytes are in, before any of
/// the body is waited for: a client announcing 2 GB gets ``FrameTooLargeError`` at once, not after
/// the daemon buffered it. A zero-length frame is passed on (it is an empty message).
public struct FrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = ByteBuffer

    public let maximumFrameLength: Int

    public init(maximumFrameLength: Int) {
        self.maximumFrameLength = maximumFrameLength
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let frame = try self.nextFrame(&buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(frame))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A truncated frame at the end of the stream is dropped: there is no whole request to answer.
        try self.decode(context: context, buffer: &buffer)
    }

    /// The next whole frame's body, consuming it, or nil when more bytes are needed.
    public func nextFrame(_ buffer: inout ByteBuffer) throws(FrameTooLargeError) -> ByteBuffer? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self) else { return nil }
        guard Int(length) <= self.maximumFrameLength else {
            throw FrameTooLargeError(length: Int(length), maximum: self.maximumFrameLength)
        }
        guard buffer.readableBytes >= 4 + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: 4)
        return buffer.readSlice(length: Int(length))
    }
}

/// A frame's length prefix announced more than the configured maximum.
public struct FrameTooLargeError: Error, Hashable, CustomStringConvertible {
    public let length: Int
    public let maximum: Int

    public var description: String { "frame of \(self.length) bytes exceeds the maximum of \(self.maximum)" }
}

/// Prefixes each outgoing buffer with its 4-byte big-endian length.
public struct FrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = ByteBuffer

    public init() {}

    public func encode(data: ByteBuffer, out: inout ByteBuffer) throws {
        out.writeInteger(UInt32(data.readableBytes), endianness: .big)
        out.writeImmutableBuffer(data)
    }
}

extension ByteBuffer {
    /// Serialises `message` into a buffer (without the length prefix, which ``FrameEncoder`` adds).
    public init(message: some SwiftProtobuf.Message, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws {
        let bytes: [UInt8] = try message.serializedBytes()
        self = allocator.buffer(bytes: bytes)
    }

    /// Serialises `message` as one whole frame, length prefix included, straight into the buffer
    /// that is written: no intermediate array, no copy, no encoder handler (the daemon's replies).
    public init(frameOf message: some SwiftProtobuf.Message) throws {
        let framed: FramedBytes = try message.serializedBytes()
        self = framed.buffer
    }
}

/// A frame being serialised: SwiftProtobuf sizes the message first and asks for that many bytes,
/// which go after a 4-byte slot that then receives the length.
struct FramedBytes: SwiftProtobufContiguousBytes {
    private(set) var buffer: ByteBuffer

    init(repeating byte: UInt8, count: Int) {
        self.buffer = ByteBufferAllocator().buffer(capacity: 4 + count)
        self.buffer.writeInteger(UInt32(truncatingIfNeeded: count), endianness: .big)
        self.buffer.writeRepeatingByte(byte, count: count)
    }

    init<S: Sequence>(_ sequence: S) where S.Element == UInt8 {
        let bytes = Array(sequence)
        self.init(repeating: 0, count: bytes.count)
        self.withUnsafeMutableBytes { $0.copyBytes(from: bytes) }
    }

    var count: Int { self.buffer.readableBytes - 4 }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try self.buffer.withUnsafeReadableBytes { try body(UnsafeRawBufferPointer(rebasing: $0.dropFirst(4))) }
    }

    mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try self.buffer.withUnsafeMutableReadableBytes { try body(UnsafeMutableRawBufferPointer(rebasing: $0.dropFirst(4))) }
    }
}
