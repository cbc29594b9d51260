import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl authenticate IDENTIFIER FILE...`: is this face that person?
struct AuthenticateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authenticate",
        abstract: "Authenticate a face (the templates of the files) as an identifier.",
        discussion: """
            Exits 1 when the face is not authenticated, 2 when the identifier is not registered. \
            Unless --no-auto-enrol, an authenticated face is auto-enrolled in the registries that lack \
            the identifier; the report says per registry what happened.

            When the face carries depth frames (a face object, see registryctl --help) the reply \
            shows the liveness verdict, with the identifier's personalised thresholds when it enrolled \
            a liveness profile (registryctl profile enrol). A gallery that requires liveness for \
            authenticate refuses a face that is not live (LIVENESS_FAILED, exit 3).
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: "The identifier the face claims to be.")
    var identifier: String

    @Argument(help: ArgumentHelp("Template or face JSON files; together they form one face.", valueName: "file"), completion: .file())
    var files: [String]

    @Flag(name: .customLong("no-auto-enrol"), help: "Do not auto-enrol the face in other registries.")
    var noAutoEnrol = false

    func validate() throws {
        guard !self.files.isEmpty else { throw ValidationError("Missing expected argument '<file> ...'") }
    }

    struct Result: CommandResult {
        var gallery: String
        var identifier: String
        var authenticated: Bool
        var score: Float
        var templateId: UInt64
        /// The registry that decided.
        var algorithm: UInt32
        var autoEnrolment: [AutoEnrolmentOutcome]
        /// The liveness verdict (when the face carried depth frames).
        var liveness: LivenessVerdict?

        init(gallery: String, identifier: String, authentication: Authentication) {
            self.gallery = gallery
            self.identifier = identifier
            self.authenticated = authentication.authenticated
            self.score = authentication.score
            self.templateId = authentication.templateId
            self.algorithm = authentication.algorithm
            self.autoEnrolment = authentication.autoEnrolment
            self.liveness = authentication.liveness
        }

        var exitStatus: ExitStatus { self.authenticated ? .success : .noMatch }

        func text(_ names: AlgorithmNames) -> String {
            var table = Table()
            table.append(["authenticated", self.authenticated ? "yes" : "no"])
            table.append(["identifier", Format.quoted(self.identifier)])
            table.append(["score", Format.score(self.score)])
            table.append(["template", "\(self.templateId)"])
            table.append(["algorithm", names(self.algorithm)])
            let liveness = self.liveness?.lines ?? []
            return (table.lines() + liveness + AutoEnrolmentOutcome.lines(self.autoEnrolment, names)).joined(separator: "\n")
        }

        static var namesAlgorithms: Bool { true }
    }

    func run() async throws {
        let runner = Runner(self.options)
        let face = try runner.prepare { try TemplateJSON.face(files: self.files) }
        let gallery = self.gallery.name
        try await runner.run { client in
            let authentication = try await client.authenticate(
                gallery: gallery, identifier: self.identifier, face: face, autoEnrol: !self.noAutoEnrol)
            return Result(gallery: gallery, identifier: self.identifier, authentication: authentication)
        }
    }
}
