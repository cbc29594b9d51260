import ArgumentParser
import Glibc
import RegistryModel
import SyntheticFaces

/// The faces of the README's migration walkthrough (examples/migration/), from fixed seeds:
/// - `<name>-landmarks.json`: a frontal capture as a version 1000 template only (enrolled before
///   the gallery had the aligned registry);
/// - `<name>-both.json`: another frontal capture carrying the same landmarks for both algorithms;
/// - `alice-turned.json`: alice with her head turned 18° and nodded 8°, both algorithms.
struct Examples: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Write the migration walkthrough's face files.")

    @Option(help: "Directory to write into (created if missing).")
    var out: String

    static let names = ["alice", "bob", "carol"]

    func run() throws {
        mkdir(self.out, 0o755)
        var random = SeededRandom(seed: 2026)
        let persons = Self.names.map { _ in SyntheticFaces.person(&random) }
        for (name, person) in zip(Self.names, persons) {
            let enrolment = SyntheticFaces.capture(person, .frontal, &random)
            try writeFile("\(self.out)/\(name)-landmarks.json", Array(Self.document([(Algorithm.landmarks.version, enrolment)]).utf8))
            let again = SyntheticFaces.capture(person, .frontal, &random)
            try writeFile("\(self.out)/\(name)-both.json", Array(Self.both(again).utf8))
        }
        let turned = SyntheticFaces.capture(persons[0], .init(yaw: 18, pitch: 8), &random)
        try writeFile("\(self.out)/alice-turned.json", Array(Self.both(turned).utf8))
    }

    static func both(_ landmarks: [Landmark]) -> String {
        document([(Algorithm.landmarks.version, landmarks), (Algorithm.alignedLandmarks.version, landmarks)])
    }

    /// One template object, or an array of them (a face with several templates), one landmark a line.
    static func document(_ templates: [(version: UInt32, landmarks: [Landmark])]) -> String {
        let objects = templates.map { template in
            let points = template.landmarks.map { landmark in
                "    {\"name\": \"\(landmark.name)\", \"x\": \(Self.number(landmark.x)), \"y\": \(Self.number(landmark.y)), \"z\": \(Self.number(landmark.z))}"
            }
            return "{\"version\": \(template.version), \"landmarks\": [\n" + points.joined(separator: ",\n") + "\n]}"
        }
        return (objects.count == 1 ? objects[0] : "[\n" + objects.joined(separator: ",\n") + "\n]") + "\n"
    }

    /// Two decimals: a detector's sub-pixel precision, and a file a person can read.
    static func number(_ value: Float) -> String {
        let scaled = (Double(value) * 100).rounded()
        let sign = scaled < 0 ? "-" : ""
        let magnitude = Int(abs(scaled))
        let fraction = magnitude % 100
        return "\(sign)\(magnitude / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
