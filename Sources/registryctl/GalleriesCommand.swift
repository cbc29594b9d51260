import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl galleries`: each gallery with its registries in priority order.
struct GalleriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "galleries",
        abstract: "List the galleries, each with its registries in priority order.",
        discussion: """
            Per gallery: whether liveness is required for authenticate, identify and register, and \
            the k of its liveness profiles. Per registry: the algorithm, its thresholds \
            (authentication, identification, auto-enrolment), the minimum capture quality for \
            registration and for auto-enrolment ("-": no gate), and its template and identifier \
            counts.
            """)

    @OptionGroup var options: GlobalOptions

    struct Result: CommandResult {
        var galleries: [GalleryInfo]

        init(_ galleries: [GalleryInfo]) {
            self.galleries = galleries
        }

        func text(_ names: AlgorithmNames) -> String {
            self.galleries.map { $0.lines.joined(separator: "\n") }.joined(separator: "\n\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in Result(try await client.galleries()) }
    }
}
