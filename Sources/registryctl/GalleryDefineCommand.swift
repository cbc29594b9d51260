import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl gallery define NAME --registry SPEC...`.
struct GalleryDefineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "define",
        abstract: "Define a gallery, or redefine its registries, and print the result.",
        discussion: """
            Each --registry is ALGORITHM[:AUTH,IDENT,AUTO][@MINQ[/MINAUTOQ]]: an algorithm name \
            (arcface) or version (24), optionally with its authentication, identification and \
            auto-enrolment thresholds, each in (0, 1] (without them the algorithm's defaults apply), \
            and optionally with capture quality gates: the quality score in [0, 1] a face must reach \
            to be registered (MINQ) and to be auto-enrolled (MINAUTOQ) in the registry; a face without \
            capture metadata is then refused (QUALITY_TOO_LOW). The order is the priority order \
            (first = preferred). Several specs may follow one --registry, so give the name first.

            --liveness names the operations that require a live face (depth frames that pass the \
            liveness checks, else LIVENESS_FAILED): authenticate, identify and/or register, \
            comma-separated, or none (the default); add strict to require the non-planar and micro-movement \
            checks too. --liveness-k is the k of the liveness profiles \
            enrolled in the gallery (thresholds mean ± k·std, default 2.0). A redefinition replaces \
            the registries, the policy and k. Examples:

              registryctl gallery define staff --registry arcface:0.6,0.65,0.7 dlib
              registryctl gallery define door --registry arcface@0.6 \\
                  --liveness authenticate
              registryctl gallery define gate --registry arcface:0.6,0.6,0.6@0.6/0.7 \\
                  --liveness authenticate,register --liveness-k 2.5
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: "The gallery's name: 1-64 ASCII letters, digits, '.', '_' or '-'.", completion: GalleryCompletion.kind)
    var name: String

    @Option(
        name: .customLong("registry"),
        parsing: .upToNextOption,
        help: ArgumentHelp("A registry, in priority order: ALGORITHM[:AUTH,IDENT,AUTO][@MINQ[/MINAUTOQ]].", valueName: "spec"),
        transform: { try RegistrySpec(parsing: $0) })
    var registries: [RegistrySpec]

    @Option(
        help: ArgumentHelp(
            "The operations that require a live face: authenticate,identify,register (any of them) or none (the default).",
            valueName: "operations"),
        transform: { try LivenessPolicySpec.parse($0) })
    var liveness: LivenessPolicy?

    @Option(
        name: .customLong("liveness-k"),
        help: ArgumentHelp("k of the gallery's liveness profiles: thresholds mean ± k·std", valueName: "k"))
    var livenessK: Float = GalleryConfiguration.defaultLivenessK

    func validate() throws {
        guard !self.registries.isEmpty else { throw ValidationError("at least one --registry is required") }
        guard self.livenessK.isFinite, self.livenessK > 0 else { throw ValidationError("--liveness-k must be a number > 0") }
    }

    struct Result: CommandResult {
        var gallery: GalleryInfo

        init(_ gallery: GalleryInfo) {
            self.gallery = gallery
        }

        func text(_ names: AlgorithmNames) -> String {
            self.gallery.lines.joined(separator: "\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in
            let needsNames = self.registries.contains { if case .name = $0.algorithm { true } else { false } }
            let algorithms = needsNames ? try await client.algorithms() : []
            let configuration = GalleryConfiguration(
                name: self.name, registries: try self.registries.map { try $0.configuration(algorithms: algorithms) },
                liveness: self.liveness ?? .none, livenessK: self.livenessK)
            return Result(try await client.defineGallery(configuration))
        }
    }
}
