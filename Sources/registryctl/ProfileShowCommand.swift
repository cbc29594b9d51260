import ArgumentParser
import RegistryClient
import RegistryModel

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

    /// The printed result.
    static func result(gallery: String, identifier: String, profile: LivenessProfile) -> ProfileResult {
        ProfileResult(
            gallery: gallery, identifier: identifier, profile: profile,
            heading: "liveness profile of \(Format.quoted(identifier)) in gallery \(gallery)")
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            guard let profile = try await client.livenessProfile(gallery: gallery, identifier: self.identifier) else {
                throw CommandFailure.profileNotFound(self.identifier, gallery: gallery)
            }
            return Self.result(gallery: gallery, identifier: self.identifier, profile: profile)
        }
    }
}
