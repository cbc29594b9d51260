import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl profile reset IDENTIFIER`: deletes an identifier's liveness profile.
struct ProfileResetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "Delete an identifier's liveness profile (its templates stay); liveness then uses the fixed thresholds.",
        discussion: "Exits 2 (PROFILE_NOT_FOUND) when the identifier had no profile.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: "The identifier.")
    var identifier: String

    struct Result: CommandResult {
        var gallery: String
        var identifier: String
        var deleted: Bool

        func text(_ names: AlgorithmNames) -> String {
            "deleted the liveness profile of \(Format.quoted(self.identifier)) in gallery \(self.gallery)"
        }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            guard try await client.deleteLivenessProfile(gallery: gallery, identifier: self.identifier) else {
                throw CommandFailure.profileNotFound(self.identifier, gallery: gallery)
            }
            return Result(gallery: gallery, identifier: self.identifier, deleted: true)
        }
    }
}
