import NIOCore
import RegistryProtocol
import SwiftProtobuf

/// The frame decoder over an arbitrary byte stream, then each frame as a `registry.v1.Request`.
///
/// Input: byte 0 picks the maximum frame length, byte 1 the size of the chunks the stream arrives in
/// (as reads from a socket would split it), the rest is the stream. Checked: every frame is exactly
/// the body its prefix announced, in stream order; the decoder stops only at a length above the
/// maximum or at an incomplete frame; RequestBounds walks every frame, and one within the bounds is
/// decoded as the dispatcher does: a decoded request re-encodes to bytes that decode and re-encode
/// to the same bytes (bytes, not `==`: NaN floats are unequal to themselves); an authentication read
/// by `AuthenticateDecoding` encodes to the same bytes as SwiftProtobuf's reading of the frame.
enum FrameFuzz {
    static let maximums = [0, 64, 4096, 4 << 20]

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        guard input.count >= 2 else { return }
        let maximum = Self.maximums[Int(input[0] & 3)]
        let chunk = Int(input[1]) + 1
        let stream = Array(input[2...])
        let decoder = FrameDecoder(maximumFrameLength: maximum)
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        var fed = 0
        // Where the next frame's prefix starts in `stream`.
        var expected = 0
        while fed < stream.count {
            let end = min(stream.count, fed + chunk)
            buffer.writeBytes(stream[fed..<end])
            fed = end
            while true {
                let frame: ByteBuffer?
                do {
                    frame = try decoder.nextFrame(&buffer)
                } catch {
                    precondition(error.length == Self.announced(stream, at: expected), "the error names another length")
                    precondition(error.length > maximum && error.maximum == maximum, "a frame within the maximum was refused")
                    return
                }
                guard let frame else { break }
                let length = Self.announced(stream, at: expected)
                precondition(length <= maximum, "a frame above the maximum was passed on")
                precondition(frame.readableBytes == length, "the frame is not the announced length")
                precondition(
                    frame.readableBytesView.elementsEqual(stream[expected + 4..<expected + 4 + length]), "the frame is not the announced body")
                expected += 4 + length
                Self.checkRequest(frame)
            }
            precondition(buffer.readableBytes == fed - expected, "bytes were lost or duplicated")
        }
        // Stopped for want of bytes: the rest is a prefix or an incomplete frame.
        let rest = stream.count - expected
        precondition(rest < 4 || rest < 4 + Self.announced(stream, at: expected), "a whole frame was left undecoded")
    }

    static func announced(_ stream: [UInt8], at offset: Int) -> Int {
        stream[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
    }

    /// Decodes a frame as the dispatcher does and checks that re-encoding is stable.
    static func checkRequest(_ frame: ByteBuffer) {
        // The dispatcher decodes nothing that breaks a bound (RequestBounds), and neither does this:
        // SwiftProtobuf spent minutes on a 4 MiB frame giving get_liveness_profile 104,849 times, each
        // with unknown fields, merged into one message whose unknown bytes it copied at every merge.
        guard case .success = RequestBounds.check(frame) else { return }
        var options = BinaryEncodingOptions()
        options.useDeterministicOrdering = true
        let reference = try? Registry_V1_Request(serializedBytes: frame.readableBytesSpan)
        // The daemon's own reading of authentications gives SwiftProtobuf's message or declines.
        if let (id, authenticate) = AuthenticateDecoding.decode(frame) {
            var fast = Registry_V1_Request()
            fast.id = id
            fast.authenticate = authenticate.message
            guard let reference else { preconditionFailure("an authentication read by hand does not decode") }
            let fastBytes: [UInt8]? = try? fast.serializedBytes(options: options)
            let referenceBytes: [UInt8]? = try? reference.serializedBytes(options: options)
            precondition(fastBytes == referenceBytes, "an authentication read by hand differs from SwiftProtobuf's")
        }
        guard let request = reference else { return }
        guard let first: [UInt8] = try? request.serializedBytes(options: options) else {
            preconditionFailure("a decoded request cannot be encoded")
        }
        guard let again = try? Registry_V1_Request(serializedBytes: first), let second: [UInt8] = try? again.serializedBytes(options: options)
        else {
            preconditionFailure("a re-encoded request does not decode")
        }
        precondition(first == second, "re-encoding a request is not stable")
    }
}
