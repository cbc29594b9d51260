import Glibc
import SyntheticFaces

enum Vectors {
    /// Arcface templates: 128 floats.
    static let dimension = 128
    /// Per-value standard deviation of a probe's noise: a noise vector of norm ≈ 0.34, so a probe scores
    /// ≈ 0.95 against its person (threshold 0.6) and ≈ 0 against everyone else.
    static let probeNoise = 0.03

    /// A random direction: normal values, L2-normalised. Two such vectors have cosine ≈ 0 (σ ≈ 0.09).
    static func unit(_ random: inout SeededRandom) -> [Float] {
        normalised((0..<dimension).map { _ in random.gaussian() })
    }

    /// Person `index`'s template: the same on every run (a generator seeded by the index alone).
    static func person(_ index: Int) -> [Float] {
        var random = SeededRandom(seed: 0x5EED_0000_0000_0000 ^ UInt64(index))
        return unit(&random)
    }

    /// A new capture of `template`: small normal noise added, renormalised.
    static func probe(of template: [Float], _ random: inout SeededRandom) -> [Float] {
        normalised(template.map { Double($0) + probeNoise * random.gaussian() })
    }

    private static func normalised(_ values: [Double]) -> [Float] {
        let norm = values.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return values.map { Float($0 / norm) }
    }
}
