import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl profile enrol IDENTIFIER FILE`: enrols (or re-enrols) a liveness profile.
struct ProfileEnrolCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enrol",
        abstract: "Enrol an identifier's liveness profile from depth frames captured over the enrolment poses.",
        discussion: """
            FILE is JSON: {"center": [frames], "left": [...], "right": [...], "up": [...], "down": \
            [...], "closer": [...], "further": [...]}, each frame {"depths": [100 numbers or null, \
            row-major, metres], "timestampMillis": N, "faceBox": {...}} as in face files. The daemon \
            needs 5 frames per pose, each passing the fixed mandatory checks, and closer frames \
            nearer than further ones; otherwise it refuses (MALFORMED_REQUEST, exit 3) naming the \
            pose and frame. The identifier must be registered in the gallery (exit 2 otherwise). \
            Re-enrolling replaces the profile. Prints the profile.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: "The identifier (registered in the gallery).")
    var identifier: String

    @Argument(help: ArgumentHelp("The enrolment frames per pose (JSON).", valueName: "file"), completion: .file())
    var file: String

    @Option(help: ArgumentHelp("k of the thresholds mean ± k·std (default: the gallery's).", valueName: "k"))
    var k: Float?

    func validate() throws {
        if let k = self.k, !(k.isFinite && k > 0) { throw ValidationError("--k must be a number > 0") }
    }

    /// The printed result.
    static func result(gallery: String, identifier: String, profile: LivenessProfile) -> ProfileResult {
        ProfileResult(
            gallery: gallery, identifier: identifier, profile: profile,
            heading: "enrolled the liveness profile of \(Format.quoted(identifier)) in gallery \(gallery)")
    }

    func run() async throws {
        let runner = Runner(self.options)
        let frames = try runner.prepare { try TemplateJSON.enrolmentFrames(in: self.file) }
        let gallery = self.gallery.name
        try await runner.run { client in
            let profile = try await client.enrolLivenessProfile(
                gallery: gallery, identifier: self.identifier, frames: frames, k: self.k)
            return Self.result(gallery: gallery, identifier: self.identifier, profile: profile)
        }
    }
}
