import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl register IDENTIFIER FILE...`: registers one face under an identifier.
struct RegisterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Register a face (the templates of the files) under an identifier.",
        discussion: """
            Prints the stored template ids. A similar face registered as someone else \
            (SIMILAR_FACE_REGISTERED) or a face that does not match the identifier's templates \
            (FACE_MISMATCH) is refused with the finding; --force stores it anyway and reports what \
            the checks found.

            A file may hold a face object with capture metadata and depth frames (see registryctl \
            --help): the reply then shows the capture quality assessment and the liveness verdict. A \
            registry with a minimum capture quality refuses a face below it (QUALITY_TOO_LOW), a \
            gallery that requires liveness for register refuses a face that is not live \
            (LIVENESS_FAILED); both exit 3.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: "The identifier to register the face under.")
    var identifier: String

    @Argument(help: ArgumentHelp("Template or face JSON files; together they form one face.", valueName: "file"), completion: .file())
    var files: [String]

    @Flag(help: "Store the face despite a similar face or a mismatch.")
    var force = false

    func validate() throws {
        guard !self.files.isEmpty else { throw ValidationError("Missing expected argument '<file> ...'") }
    }

    struct Result: CommandResult {
        var gallery: String
        var identifier: String
        /// The stored templates, what the checks found (only when --force overrode them), the capture
        /// quality assessment (when the face carried capture metadata) and the liveness verdict (when
        /// it carried depth frames).
        var registration: Registration

        private enum CodingKeys: String, CodingKey { case gallery, identifier, stored, findings, quality, liveness }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.gallery, forKey: .gallery)
            try container.encode(self.identifier, forKey: .identifier)
            try container.encode(self.registration.stored, forKey: .stored)
            try container.encode(self.registration.findings, forKey: .findings)
            try container.encodeIfPresent(self.registration.quality, forKey: .quality)
            try container.encodeIfPresent(self.registration.liveness, forKey: .liveness)
        }

        func text(_ names: AlgorithmNames) -> String {
            var lines = [
                "registered \(Format.quoted(self.identifier)) in gallery \(self.gallery): \(Format.plural(self.registration.stored.count, "template"))"
            ]
            var table = Table()
            for template in self.registration.stored { table.append(["template \(template.id)", names(template.algorithm)]) }
            lines += table.lines(indent: "  ")
            if !self.registration.findings.isEmpty {
                lines.append("stored despite (--force):")
                lines += self.registration.findings.map { "  " + $0.text(names) }
            }
            if let quality = self.registration.quality {
                lines.append("capture quality: \(quality.summary)")
            }
            if let liveness = self.registration.liveness { lines += liveness.lines }
            return lines.joined(separator: "\n")
        }

        static var namesAlgorithms: Bool { true }
    }

    func run() async throws {
        let runner = Runner(self.options)
        let face = try runner.prepare { try TemplateJSON.face(files: self.files) }
        let gallery = self.gallery.name
        try await runner.run { client in
            let registration = try await client.register(gallery: gallery, identifier: self.identifier, face: face, force: self.force)
            return Result(gallery: gallery, identifier: self.identifier, registration: registration)
        }
    }
}
