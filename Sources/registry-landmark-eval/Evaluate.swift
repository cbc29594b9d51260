import ArgumentParser
import Glibc
import RegistryClient
import RegistryModel
import SyntheticFaces

/// Enrols synthetic people frontally in one gallery per algorithm, then, per condition, captures
/// every person once and identifies the capture in each gallery with every identifier returned:
/// the person's own score is a genuine pair, every other identifier's an impostor pair.
struct Evaluate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Genuine and impostor scores per capture condition, through a running registryd.")

    @Option(help: "The daemon's socket.")
    var socket: String
    @Option(help: "Synthetic people (each capture is compared with all of them).")
    var people = 500
    @Option(help: "Seed of the people and captures (the same seed, the same figures).")
    var seed: UInt64 = 1
    @Option(help: "Per-coordinate shape variation between people, mm.")
    var shapeSigma = 3.0
    @Option(parsing: .upToNextOption, help: "Algorithm versions to evaluate.")
    var algorithms: [UInt32] = [Algorithm.landmarks.version, Algorithm.alignedLandmarks.version]
    @Option(help: "Also write the figures as JSON to this file.")
    var json: String?

    func validate() throws {
        guard self.people >= 2 else { throw ValidationError("--people must be at least 2") }
    }

    func run() async throws {
        let client = try await RegistryConnection.connect(socketPath: self.socket)
        let known = try await client.algorithms()
        var evaluated: [Algorithm] = []
        for version in self.algorithms {
            guard let algorithm = known.first(where: { $0.version == version }), case .landmarks = algorithm.kind else {
                throw ValidationError("the daemon has no landmark algorithm \(version)")
            }
            evaluated.append(algorithm)
        }

        var random = SeededRandom(seed: self.seed)
        let persons = (0..<self.people).map { _ in SyntheticFaces.person(&random, shapeSigma: self.shapeSigma) }
        let identifiers = (0..<self.people).map { "person-\($0)" }
        // Every identifier's score is wanted, so identification admits (almost) everything.
        let everything = Thresholds(authentication: 1e-6, identification: 1e-6, autoEnrolment: 1)
        for algorithm in evaluated {
            let gallery = Self.gallery(algorithm)
            _ = try await client.defineGallery(
                GalleryConfiguration(name: gallery, registries: [RegistryConfiguration(algorithm: algorithm.version, thresholds: everything)]))
            // Import, not register: a similar-face refusal would keep look-alikes out of the gallery.
            for first in stride(from: 0, to: self.people, by: 500) {
                let items = (first..<min(self.people, first + 500)).map { index in
                    var capture = SeededRandom(seed: Self.mix(self.seed, 0xE, UInt64(index)))
                    return ImportItem(
                        identifier: identifiers[index],
                        template: FaceTemplate(algorithm: algorithm.version, landmarks: SyntheticFaces.capture(persons[index], .frontal, &capture)))
                }
                _ = try await client.importTemplates(gallery: gallery, items)
            }
        }

        var rows: [(condition: Condition, rates: [ErrorRates])] = []
        for (number, condition) in Condition.all.enumerated() {
            let captures = (0..<self.people).map { index in
                var pose = condition.pose
                if index % 2 == 1 { pose.yaw = -pose.yaw }
                var capture = SeededRandom(seed: Self.mix(self.seed, UInt64(number + 1), UInt64(index)))
                return SyntheticFaces.capture(persons[index], pose, &capture)
            }
            var rates: [ErrorRates] = []
            for algorithm in evaluated {
                rates.append(try await Self.scores(client, gallery: Self.gallery(algorithm), algorithm: algorithm, captures, identifiers))
            }
            rows.append((condition, rates))
            progress("\(condition.name): done")
        }
        await client.close()

        print(Report.markdown(rows: rows, algorithms: evaluated, people: self.people, seed: self.seed, shapeSigma: self.shapeSigma))
        if let path = self.json {
            try writeFile(path, Array(Report.json(rows: rows, algorithms: evaluated)))
        }
    }

    static func gallery(_ algorithm: Algorithm) -> String { "landmark-eval-\(algorithm.version)" }

    /// Identifies every capture (64 requests in flight on the one connection) and splits the scores.
    static func scores(
        _ client: RegistryConnection, gallery: String, algorithm: Algorithm, _ captures: [[Landmark]], _ identifiers: [String]
    ) async throws -> ErrorRates {
        let results = try await withThrowingTaskGroup(of: (Int, [String: Float]).self) { group in
            var results = [[String: Float]](repeating: [:], count: captures.count)
            var next = 0
            func submit() {
                let index = next
                next += 1
                group.addTask {
                    let face = Face(FaceTemplate(algorithm: algorithm.version, landmarks: captures[index]))
                    let found = try await client.identify(gallery: gallery, face: face, autoEnrol: false, limit: nil)
                    return (index, Dictionary(found.matches.map { ($0.identifier, $0.score) }, uniquingKeysWith: max))
                }
            }
            while next < min(64, captures.count) { submit() }
            while let (index, scores) = try await group.next() {
                results[index] = scores
                if next < captures.count { submit() }
            }
            return results
        }
        var genuine: [Float] = []
        var impostor: [Float] = []
        impostor.reserveCapacity(captures.count * (identifiers.count - 1))
        for (index, scores) in results.enumerated() {
            for (other, identifier) in identifiers.enumerated() {
                // An identifier below the (tiny) identification threshold scored 0 in effect.
                let score = scores[identifier] ?? 0
                if other == index { genuine.append(score) } else { impostor.append(score) }
            }
        }
        return ErrorRates(genuine: genuine, impostor: impostor)
    }

    /// A seed per (run, condition, person), so that each capture is the same whatever else changes.
    static func mix(_ a: UInt64, _ b: UInt64, _ c: UInt64) -> UInt64 {
        var random = SeededRandom(seed: a ^ (b &* 0x9E37_79B9_7F4A_7C15) ^ (c &* 0xC2B2_AE3D_27D4_EB4F))
        return random.next()
    }
}

/// A progress line on standard error (the table goes to standard output).
func progress(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
