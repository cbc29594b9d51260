import Glibc

/// SplitMix64: a small, fast, seeded generator, so the seeded people are the same on every run.
struct SplitMix64: RandomNumberGenerator, Sendable {
    var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    mutating func uniform() -> Double {
        Double(self.next() >> 11) * 0x1.0p-53
    }

    /// A standard normal value (Box-Muller).
    mutating func gaussian() -> Double {
        let u1 = max(self.uniform(), 0x1.0p-60)
        let u2 = self.uniform()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

enum Vectors {
    /// Arcface templates: 128 floats.
    static let dimension = 128
    /// Per-value standard deviation of a probe's noise: a noise vector of norm ≈ 0.34, so a probe scores
    /// ≈ 0.95 against its person (threshold 0.6) and ≈ 0 against everyone else.
    static let probeNoise = 0.03

    /// A random direction: normal values, L2-normalised. Two such vectors have cosine ≈ 0 (σ ≈ 0.09).
    static func unit(_ random: inout SplitMix64) -> [Float] {
        normalised((0..<dimension).map { _ in random.gaussian() })
    }

    /// Person `index`'s template: the same on every run (a generator seeded by the index alone).
    static func person(_ index: Int) -> [Float] {
        var random = SplitMix64(seed: 0x5EED_0000_0000_0000 ^ UInt64(index))
        return unit(&random)
    }

    /// A new capture of `template`: small normal noise added, renormalised.
    static func probe(of template: [Float], _ random: inout SplitMix64) -> [Float] {
        normalised(template.map { Double($0) + probeNoise * random.gaussian() })
    }

    private static func normalised(_ values: [Double]) -> [Float] {
        let norm = values.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return values.map { Float($0 / norm) }
    }
}
