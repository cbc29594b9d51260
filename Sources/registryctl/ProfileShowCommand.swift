import ArgumentParser
import RegistryClient
import RegistryCore

/// `registryctl profile show IDENTIFIER`: an identifier's liveness profile.
struct ProfileShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show an identifier's liveness profile: the range per statistic, realistic depth, k, frames.",
        discussion: "Ranges are in metres. Exits 2 (PROFILE_NOT_FOUND) when the identifier has no profile.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: "The identifier.")
    var identifier: String

    struct Result: CommandResult {
        var gallery: String
        var identifier: String
        var profile: LivenessProfileJSON
        private var value: LivenessProfile

        private enum CodingKeys: String, CodingKey { case gallery, identifier, profile }

        init(gallery: String, identifier: String, profile: LivenessProfile) {
            self.gallery = gallery
            self.identifier = identifier
            self.value = profile
            self.profile = LivenessProfileJSON(profile)
        }

        func text(_ names: AlgorithmNames) -> String {
            LivenessProfileJSON.lines(
                self.value, heading: "liveness profile of \(Format.quoted(self.identifier)) in gallery \(self.gallery)"
            ).joined(separator: "\n")
        }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            guard let profile = try await client.livenessProfile(gallery: gallery, identifier: self.identifier) else {
                throw CommandFailure.profileNotFound(self.identifier, gallery: gallery)
            }
            return Result(gallery: gallery, identifier: self.identifier, profile: profile)
        }
    }
}
