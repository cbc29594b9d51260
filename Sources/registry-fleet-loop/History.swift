import Foundation
import RegistryModel
import Synchronization
import SyntheticFaces

/// One request of the loop's load, as sent and as answered: what the checker reads.
struct Event: Codable, Sendable {
    enum Kind: String, Codable, Sendable {
        case register, deleteIdentifier, identify, defineGallery, deleteGallery
    }

    /// How a request ended, as its client saw it.
    enum Outcome: Codable, Sendable, Equatable {
        /// Carried out (a deletion of nothing is one too: `deleteIdentifier` answered 0).
        case ok
        /// Refused with this code: not carried out (except `INTERNAL`, which is ``unknown``).
        case refused(String)
        /// No answer, or an answer that does not say whether it was carried out: the connection
        /// closed (the node was killed), the loop's deadline passed (the node was paused), or
        /// `INTERNAL` (the fleet's database did not confirm the commit; applied here too late).
        case unknown(String)
    }

    var id: Int
    var node: Int
    var kind: Kind
    var gallery: String
    var identifier: String
    /// The face sent (register, identify): the seed of ``LoopFace``.
    var face: UInt64
    /// Seconds since the loop started, when the request was sent and when it ended.
    var start: Double
    var end: Double
    var outcome: Outcome
    /// What identify found: the identifiers of its matches.
    var matches: [String]?
    /// Registrations of one face on several nodes at once share a group.
    var group: Int?

    /// Whether it may have been carried out: acknowledged, or its outcome unknown.
    var mayHaveHappened: Bool {
        if case .refused = self.outcome { return false }
        return true
    }

    var acknowledged: Bool { self.outcome == .ok }
}

/// Every request of the run, in the order they ended, kept in memory and written as JSON lines to
/// `history.jsonl` in the run's directory (no template data: faces are named by their seeds).
final class History: Sendable {
    let started = ContinuousClock.now
    private let events = Mutex<[Event]>([])
    private let nextId = Atomic<Int>(0)

    var now: Double {
        let elapsed = ContinuousClock.now - self.started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    func newId() -> Int { self.nextId.wrappingAdd(1, ordering: .relaxed).oldValue }

    func record(_ event: Event) { self.events.withLock { $0.append(event) } }

    var all: [Event] { self.events.withLock { $0 } }

    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var text = ""
        for event in self.all {
            text += String(decoding: try encoder.encode(event), as: UTF8.self) + "\n"
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// The loop's faces: 16 of 128 values at ±0.25, at places and with signs chosen by a seed. Their
/// length is exactly 1, so the daemon stores them as sent (L2 normalisation divides by 1.0): the
/// checker knows every stored payload's bytes from the seed alone, and searches data directories for
/// erased ones. Two seeds' faces share about 2 places, a cosine near 0; the same seed's score 1.
enum LoopFace {
    static let algorithm: UInt32 = 24

    static func values(_ seed: UInt64) -> [Float] {
        var generator = SeededRandom(seed: seed)
        var values = [Float](repeating: 0, count: 128)
        var places = Array(0..<128)
        for index in 0..<16 {
            let pick = index + Int(generator.next() % UInt64(128 - index))
            places.swapAt(index, pick)
            values[places[index]] = generator.next() & 1 == 0 ? 0.25 : -0.25
        }
        return values
    }

    static func face(_ seed: UInt64) -> Face {
        Face(FaceTemplate(algorithm: Self.algorithm, vector: Self.values(seed)))
    }

    /// The payload as stored: the 128 values, little-endian float32.
    static func payload(_ seed: UInt64) -> [UInt8] {
        Self.values(seed).withUnsafeBytes { Array($0) }
    }
}
