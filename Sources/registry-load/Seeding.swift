import RegistryClient
import RegistryModel

/// Puts the people the workload needs into the gallery: one registry holding `person-i` for every i
/// below the people count, each with its deterministic template.
enum Seeding {
    static let threshold: Float = 0.6

    /// The gallery's algorithm for templates of `dimension` floats: arcface (24: 128 floats, cosine)
    /// or r300 (300: 512 floats, the dot product of unit vectors).
    static func algorithm(dimension: Int) -> Algorithm {
        dimension == 512 ? .r300 : .arcface
    }

    /// Templates per import request: about 0.5 MB at 128 floats, 1 MB at 512, well below the daemon's
    /// 4 MiB frame limit.
    static func chunk(dimension: Int) -> Int {
        dimension > 128 ? 500 : 1000
    }

    static func configuration(_ gallery: String, algorithm: Algorithm) -> GalleryConfiguration {
        GalleryConfiguration(
            name: gallery,
            registries: [
                RegistryConfiguration(
                    algorithm: algorithm.version,
                    thresholds: Thresholds(authentication: threshold, identification: threshold, autoEnrolment: threshold))
            ])
    }

    static func identifier(_ person: Int) -> String { "person-\(person)" }

    /// Reuses the gallery when it already holds exactly these people, else recreates and imports it.
    /// Returns the seconds the import took, or nil when the gallery was reused.
    static func prepare(client: RegistryConnection, gallery: String, people: People) async throws -> Double? {
        let algorithm = Self.algorithm(dimension: people.dimension)
        let configuration = Self.configuration(gallery, algorithm: algorithm)
        // Defining an existing gallery with other non-empty registries fails: it is then recreated.
        let defined = try? await client.defineGallery(configuration)
        if let defined, defined.identifierCount == people.count,
            await Self.holdsSeededPeople(client: client, gallery: gallery, people: people)
        {
            printError("registry-load: reusing gallery '\(gallery)' with \(people.count) people")
            return nil
        }
        if defined == nil || defined?.identifierCount != 0 {
            do {
                let deleted = try await client.deleteGallery(gallery)
                printError("registry-load: deleted gallery '\(gallery)' (\(deleted) templates)")
            } catch let error as RegistryError where error.code == .unknownGallery {
                // Nothing to delete.
            }
            try await client.defineGallery(configuration)
        }
        let clock = ContinuousClock()
        let start = clock.now
        let chunk = Self.chunk(dimension: people.dimension)
        for first in stride(from: 0, to: people.count, by: chunk) {
            let items = (first..<min(people.count, first + chunk)).map { person in
                ImportItem(
                    identifier: Self.identifier(person), template: FaceTemplate(algorithm: algorithm.version, vector: people[person]))
            }
            _ = try await client.importTemplates(gallery: gallery, items)
        }
        let seconds = Report.seconds(start.duration(to: clock.now))
        printError("registry-load: seeded gallery '\(gallery)' with \(people.count) people in \(Report.fixed(seconds, 3)) s")
        return seconds
    }

    /// Whether the first and last person authenticate with their exact templates: the gallery holds
    /// this tool's people (same seed), not some other set of the same size.
    private static func holdsSeededPeople(client: RegistryConnection, gallery: String, people: People) async -> Bool {
        let algorithm = Self.algorithm(dimension: people.dimension).version
        for person in Set([0, people.count - 1]) {
            guard
                let result = try? await client.authenticate(
                    gallery: gallery, identifier: Self.identifier(person),
                    face: Face(FaceTemplate(algorithm: algorithm, vector: people[person])), autoEnrol: false),
                result.authenticated, result.score > 0.999
            else { return false }
        }
        return true
    }
}
