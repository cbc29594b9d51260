import ArgumentParser
import RegistryClient
import RegistryCore

/// `registryctl gallery define NAME --registry SPEC...`.
struct GalleryDefineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "define",
        abstract: "Define a gallery, or redefine its registries, and print the result.",
        discussion: """
            Each --registry is ALGORITHM[:AUTH,IDENT,AUTO]: an algorithm name (arcface) or version \
            (24), optionally with its authentication, identification and auto-enrolment thresholds, \
            each in (0, 1]; without them the algorithm's defaults apply. The order is the priority \
            order (first = preferred). Several specs may follow one --registry, so give the name \
            first. Example:

              registryctl gallery define staff --registry arcface:0.6,0.65,0.7 dlib
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: "The gallery's name: 1-64 ASCII letters, digits, '.', '_' or '-'.")
    var name: String

    @Option(
        name: .customLong("registry"),
        parsing: .upToNextOption,
        help: ArgumentHelp("A registry, in priority order: ALGORITHM[:AUTH,IDENT,AUTO].", valueName: "spec"),
        transform: { try RegistrySpec(parsing: $0) })
    var registries: [RegistrySpec]

    func validate() throws {
        guard !self.registries.isEmpty else { throw ValidationError("at least one --registry is required") }
    }

    struct Result: CommandResult {
        var gallery: GalleryJSON
        private var info: GalleryInfo

        private enum CodingKeys: String, CodingKey { case gallery }

        init(_ info: GalleryInfo) {
            self.info = info
            self.gallery = GalleryJSON(info)
        }

        func text(_ names: AlgorithmNames) -> String {
            GalleryJSON.lines(self.info).joined(separator: "\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in
            let needsNames = self.registries.contains { if case .name = $0.algorithm { true } else { false } }
            let algorithms = needsNames ? try await client.algorithms() : []
            let configuration = GalleryConfiguration(
                name: self.name, registries: try self.registries.map { try $0.configuration(algorithms: algorithms) })
            return Result(try await client.defineGallery(configuration))
        }
    }
}
