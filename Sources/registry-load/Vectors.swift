import Glibc
import SyntheticFaces

enum Vectors {
    /// Per-value standard deviation of a probe's noise at 128 floats (scaled by √(128 / dimension) at
    /// other lengths): a noise vector of norm ≈ 0.34, so a probe scores ≈ 0.95 against its person
    /// (threshold 0.6) and ≈ 0 against everyone else.
    static let probeNoise = 0.03

    /// A random direction of `dimension` floats: normal values, L2-normalised. Two such vectors have
    /// cosine ≈ 0 (σ ≈ 1/√dimension: 0.09 at 128 floats, 0.044 at 512).
    static func unit(_ random: inout SeededRandom, dimension: Int) -> [Float] {
        normalised((0..<dimension).map { _ in random.gaussian() })
    }

    /// Person `index`'s template: the same on every run (a generator seeded by the index alone).
    static func person(_ index: Int, dimension: Int) -> [Float] {
        var random = SeededRandom(seed: 0x5EED_0000_0000_0000 ^ UInt64(index))
        return unit(&random, dimension: dimension)
    }

    /// A new capture of `template`: small normal noise added, renormalised.
    static func probe(of template: [Float], _ random: inout SeededRandom) -> [Float] {
        let sigma = probeNoise * (128 / Double(template.count)).squareRoot()
        return normalised(template.map { Double($0) + sigma * random.gaussian() })
    }

    private static func normalised(_ values: [Double]) -> [Float] {
        let norm = values.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return values.map { Float($0 / norm) }
    }

    /// Writes `count` vectors, `vector(0)` first, to `path` as raw little-endian float32 (replacing
    /// the file): what tools/bench's FAISS anchor reads.
    static func write(_ count: Int, to path: String, _ vector: (Int) -> [Float]) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileError(path: path, operation: "open", code: errno) }
        defer { close(fd) }
        var buffer: [UInt32] = []
        buffer.reserveCapacity(1 << 18)
        func flush() throws {
            try buffer.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0, errno == EINTR { continue }
                    guard written > 0 else { throw FileError(path: path, operation: "write", code: errno) }
                    offset += written
                }
            }
            buffer.removeAll(keepingCapacity: true)
        }
        for index in 0..<count {
            buffer.append(contentsOf: vector(index).lazy.map { $0.bitPattern.littleEndian })
            if buffer.count >= 1 << 18 { try flush() }
        }
        try flush()
    }
}

/// The seeded people's templates, made on demand from their index (a million people of 512 floats
/// would take 2 GB held at once).
struct People: Sendable {
    let count: Int
    /// Floats per template: 128 (arcface) or 512 (r300).
    let dimension: Int

    subscript(person: Int) -> [Float] { Vectors.person(person, dimension: self.dimension) }
}

/// A file that could not be written.
struct FileError: Error, CustomStringConvertible {
    let path: String
    let operation: String
    let code: Int32

    var description: String { "cannot \(self.operation) \(self.path): \(String(cString: strerror(self.code)))" }
}
