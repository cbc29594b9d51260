import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl migration`: how far each registry of a gallery has caught up.
struct MigrationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migration",
        abstract: "Show migration progress: per registry, identifiers held out of the gallery's total.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    struct Result: CommandResult {
        struct Entry: Encodable {
            var algorithm: UInt32
            var identifiersHeld: Int
            var galleryIdentifiers: Int
            /// 0-100, two decimals; absent when the gallery is empty.
            var percent: Double?
        }

        var gallery: String
        var registries: [Entry]

        init(gallery: String, status: [MigrationStatus]) {
            self.gallery = gallery
            self.registries = status.map {
                Entry(
                    algorithm: $0.algorithm, identifiersHeld: $0.identifiersHeld, galleryIdentifiers: $0.galleryIdentifiers,
                    percent: $0.galleryIdentifiers == 0
                        ? nil : (10_000 * Double($0.identifiersHeld) / Double($0.galleryIdentifiers)).rounded() / 100)
            }
        }

        func text(_ names: AlgorithmNames) -> String {
            var table = Table(header: ["ALGORITHM", "HELD", "TOTAL", "PERCENT"])
            for entry in self.registries {
                table.append([
                    names(entry.algorithm), "\(entry.identifiersHeld)", "\(entry.galleryIdentifiers)",
                    entry.percent.map { Format.fixed($0, digits: 1) + "%" } ?? "-",
                ])
            }
            return (["gallery \(self.gallery):"] + table.lines(indent: "  ")).joined(separator: "\n")
        }

        static var namesAlgorithms: Bool { true }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            Result(gallery: gallery, status: try await client.migrationStatus(gallery: gallery))
        }
    }
}
