import RegistryModel

extension LivenessProfile {
    /// The first byte of ``encoded()``.
    static let formatVersion: UInt8 = 1

    /// The stored form, format version 1 (little-endian):
    /// u8 version (1), f32 k, u32 frame count, then eight ranges as f32 lower, f32 upper: mean, stdDev,
    /// range, edgeStdDev, centerStdDev, gradientMean, gradientStdDev, realisticDepth. 73 bytes.
    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 73)
        writer.append(Self.formatVersion)
        writer.append(self.k)
        writer.append(UInt32(clamping: self.frameCount))
        for range in self.ranges {
            writer.append(range.lowerBound)
            writer.append(range.upperBound)
        }
        return writer.bytes
    }

    /// Decodes ``encoded()``; refuses another version, a short or long buffer, and values a profile
    /// cannot hold (see ``LivenessProfileDecodingError/invalidValue(field:)``).
    public init(decoding buffer: UnsafeRawBufferPointer) throws(LivenessProfileDecodingError) {
        guard !buffer.isEmpty else { throw .empty }
        var reader = ByteReader(buffer)
        do {
            let version = try reader.read(UInt8.self)
            guard version == Self.formatVersion else { throw LivenessProfileDecodingError.unsupportedVersion(version) }
            let k = try reader.read(Float.self)
            guard k.isFinite && k > 0 else { throw LivenessProfileDecodingError.invalidValue(field: "k") }
            let frameCount = Int(try reader.read(UInt32.self))
            var ranges: [ClosedRange<Float>] = []
            for field in Self.rangeNames {
                let lower = try reader.read(Float.self)
                let upper = try reader.read(Float.self)
                guard lower.isFinite, upper.isFinite, lower >= 0, lower <= upper else {
                    throw LivenessProfileDecodingError.invalidValue(field: field)
                }
                ranges.append(lower...upper)
            }
            guard DepthLiveness.Fixed.realisticDepth.contains(ranges[7].lowerBound),
                DepthLiveness.Fixed.realisticDepth.contains(ranges[7].upperBound)
            else { throw LivenessProfileDecodingError.invalidValue(field: "realisticDepth") }
            guard reader.remaining == 0 else { throw LivenessProfileDecodingError.trailingBytes(reader.remaining) }
            self.init(
                mean: ranges[0], stdDev: ranges[1], range: ranges[2], edgeStdDev: ranges[3], centerStdDev: ranges[4],
                gradientMean: ranges[5], gradientStdDev: ranges[6], realisticDepth: ranges[7], k: k,
                frameCount: frameCount)
        } catch let error as LivenessProfileDecodingError {
            throw error
        } catch {
            throw .truncated
        }
    }

    static let rangeNames = [
        "mean", "stdDev", "range", "edgeStdDev", "centerStdDev", "gradientMean", "gradientStdDev", "realisticDepth",
    ]

    var ranges: [ClosedRange<Float>] {
        [
            self.mean, self.stdDev, self.range, self.edgeStdDev, self.centerStdDev, self.gradientMean,
            self.gradientStdDev, self.realisticDepth,
        ]
    }
}

/// Why ``LivenessProfile/init(decoding:)`` refused a buffer.
public enum LivenessProfileDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    case empty
    case unsupportedVersion(UInt8)
    case truncated
    /// A field is not finite, a range's lower bound exceeds its upper bound or is negative, k ≤ 0, or the
    /// realistic depth range is outside 0.2...3.0.
    case invalidValue(field: String)
    case trailingBytes(Int)

    public var description: String {
        switch self {
        case .empty: "liveness profile: empty record"
        case .unsupportedVersion(let version): "liveness profile: unsupported format version \(version)"
        case .truncated: "liveness profile: record ends early"
        case .invalidValue(let field): "liveness profile: invalid \(field)"
        case .trailingBytes(let count): "liveness profile: \(count) unexpected bytes after the record"
        }
    }
}
