import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl identify FILE...`: who is this face?
struct IdentifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identify",
        abstract: "Identify a face (the templates of the files): the matching identifiers, best first.",
        discussion: """
            Exits 1 when nobody matches. Unless --no-auto-enrol, the top match is auto-enrolled in the \
            registries that lack it; the report says per registry what happened.

            When the face carries depth frames (a face object, see registryctl --help) the reply \
            shows the liveness verdict (fixed thresholds). A gallery that requires liveness for \
            identify refuses a face that is not live (LIVENESS_FAILED, exit 3).
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: ArgumentHelp("Template or face JSON files; together they form one face.", valueName: "file"), completion: .file())
    var files: [String]

    @Flag(help: "Try the registries in priority order and take the first with results, even one that does not hold every identifier.")
    var unsafe = false

    @Flag(name: .customLong("no-auto-enrol"), help: "Do not auto-enrol the top match in other registries.")
    var noAutoEnrol = false

    @Option(help: "At most this many matches (default: all).")
    var limit: Int?

    func validate() throws {
        guard !self.files.isEmpty else { throw ValidationError("Missing expected argument '<file> ...'") }
        if let limit = self.limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    struct Result: CommandResult {
        struct Match: Encodable {
            var identifier: String
            var score: Float
            var templateId: UInt64
            var algorithm: UInt32
        }

        var gallery: String
        /// The registry that produced the matches (absent when none could be searched).
        var algorithm: UInt32?
        var matches: [Match]
        var autoEnrolment: [AutoEnrolmentOutcome]
        /// The liveness verdict (when the face carried depth frames).
        var liveness: LivenessVerdict?

        private enum CodingKeys: String, CodingKey { case gallery, algorithm, matches, autoEnrolment, liveness }

        init(gallery: String, identification: Identification) {
            self.gallery = gallery
            self.algorithm = identification.algorithm
            self.matches = identification.matches.map {
                Match(identifier: $0.identifier, score: $0.score, templateId: $0.templateId, algorithm: identification.algorithm ?? 0)
            }
            self.autoEnrolment = identification.autoEnrolment
            self.liveness = identification.liveness
        }

        var exitStatus: ExitStatus { self.matches.isEmpty ? .noMatch : .success }

        func text(_ names: AlgorithmNames) -> String {
            let liveness = self.liveness?.lines ?? []
            guard !self.matches.isEmpty else { return (["no match in gallery \(self.gallery)"] + liveness).joined(separator: "\n") }
            var lines = ["\(Format.plural(self.matches.count, "match", "matches")) in gallery \(self.gallery):"]
            var table = Table(header: ["IDENTIFIER", "SCORE", "TEMPLATE", "ALGORITHM"])
            for match in self.matches {
                table.append([match.identifier, Format.score(match.score), "\(match.templateId)", names(match.algorithm)])
            }
            lines += table.lines(indent: "  ")
            lines += liveness
            lines += AutoEnrolmentOutcome.lines(self.autoEnrolment, names)
            return lines.joined(separator: "\n")
        }

        static var namesAlgorithms: Bool { true }
    }

    func run() async throws {
        let runner = Runner(self.options)
        let face = try runner.prepare { try TemplateJSON.face(files: self.files) }
        let gallery = self.gallery.name
        try await runner.run { client in
            let identification = try await client.identify(
                gallery: gallery, face: face, safe: !self.unsafe, autoEnrol: !self.noAutoEnrol, limit: self.limit)
            return Result(gallery: gallery, identification: identification)
        }
    }
}
