import RegistryClient
import RegistryModel

/// Puts the people the workload needs into the gallery: one arcface registry holding `person-i` for
/// every i below the people count, each with its deterministic template.
enum Seeding {
    static let algorithm: UInt32 = 24
    static let threshold: Float = 0.6
    /// Templates per import request (about 0.5 MB, well below the daemon's 4 MiB frame limit).
    static let chunk = 1000

    static func configuration(_ gallery: String) -> GalleryConfiguration {
        GalleryConfiguration(
            name: gallery,
            registries: [
                RegistryConfiguration(
                    algorithm: algorithm,
                    thresholds: Thresholds(authentication: threshold, identification: threshold, autoEnrolment: threshold))
            ])
    }

    static func identifier(_ person: Int) -> String { "person-\(person)" }

    /// Reuses the gallery when it already holds exactly these people, else recreates and imports it.
    static func prepare(client: RegistryConnection, gallery: String, people: [[Float]]) async throws {
        let configuration = Self.configuration(gallery)
        // Defining an existing gallery with other non-empty registries fails: it is then recreated.
        let defined = try? await client.defineGallery(configuration)
        if let defined, defined.identifierCount == people.count,
            await Self.holdsSeededPeople(client: client, gallery: gallery, people: people)
        {
            printError("registry-load: reusing gallery '\(gallery)' with \(people.count) people")
            return
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
        for first in stride(from: 0, to: people.count, by: Self.chunk) {
            let items = (first..<min(people.count, first + Self.chunk)).map { person in
                ImportItem(identifier: Self.identifier(person), template: FaceTemplate(algorithm: algorithm, vector: people[person]))
            }
            _ = try await client.importTemplates(gallery: gallery, items)
        }
        printError(
            "registry-load: seeded gallery '\(gallery)' with \(people.count) people in \(Report.fixed(Report.seconds(start.duration(to: clock.now)), 3)) s"
        )
    }

    /// Whether the first and last person authenticate with their exact templates: the gallery holds
    /// this tool's people (same seed), not some other set of the same size.
    private static func holdsSeededPeople(client: RegistryConnection, gallery: String, people: [[Float]]) async -> Bool {
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
