import Glibc
import SyntheticFaces

/// The registrations of a run: identifier `r{round}-c{connection}-{sequence}`, each with its own
/// random arcface template. Random 128-d unit vectors have cosine ≈ 0 (σ ≈ 0.09), far below the 0.6
/// threshold, so no registration is refused as a similar face.
struct Registration: Hashable {
    static let algorithm: UInt32 = 24
    static let dimension = 128

    let round: Int
    let connection: Int
    let sequence: Int

    var identifier: String { "r\(self.round)-c\(self.connection)-\(self.sequence)" }

    /// The identifier prefix of one round's registrations. The `-` sorts below every digit, so a
    /// round's identifiers are contiguous in the daemon's byte order (r1-… before r10-…).
    static func prefix(round: Int) -> String { "r\(round)-" }

    init(round: Int, connection: Int, sequence: Int) {
        self.round = round
        self.connection = connection
        self.sequence = sequence
    }

    /// Parses an identifier this tool made.
    init?(identifier: String) {
        guard identifier.hasPrefix("r") else { return nil }
        let parts = identifier.dropFirst().split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].hasPrefix("c"), let round = Int(parts[0]), let connection = Int(parts[1].dropFirst()),
            let sequence = Int(parts[2]), round >= 0, connection >= 0, sequence >= 0
        else { return nil }
        self.init(round: round, connection: connection, sequence: sequence)
        // Reject non-canonical spellings ("r01-…"): they would name another registration's template.
        guard self.identifier == identifier else { return nil }
    }

    /// The template sent for this registration, which is also exactly what the daemon must store.
    func template(seed: UInt64) -> [Float] {
        var random = SeededRandom.derived(seed, UInt64(self.round), UInt64(self.connection), UInt64(self.sequence))
        while true {
            var vector = (0..<Self.dimension).map { _ in Float(random.gaussian()) }
            // The daemon stores arcface vectors L2-normalised (PROTOCOL §4), in double, rounded to
            // float; a vector that normalisation leaves bit for bit unchanged is stored as sent, so
            // the check can demand equal bytes. A normalised vector is almost always such a fixed
            // point after a step or two; the rare one that is not is drawn again.
            for _ in 0..<4 {
                let normalised = Self.normalised(vector)
                if Self.sameBits(normalised, vector) { return vector }
                vector = normalised
            }
        }
    }

    /// What the daemon does to a cosine template (RegistryEngine's FaceTemplate.prepareVector).
    static func normalised(_ values: [Float]) -> [Float] {
        let norm = values.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot()
        if norm == 1 { return values }
        return values.map { Float(Double($0) / norm) }
    }

    static func sameBits(_ a: [Float], _ b: [Float]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern }
    }
}
