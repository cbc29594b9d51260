import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl delete gallery NAME`: removes a gallery and all its templates.
struct DeleteGalleryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gallery",
        abstract: "Delete a gallery with all its templates (the default gallery cannot be deleted).")

    @OptionGroup var options: GlobalOptions

    @Argument(help: "The gallery's name.", completion: GalleryCompletion.kind)
    var name: String

    struct Result: CommandResult {
        var gallery: String
        var templatesDeleted: Int

        func text(_ names: AlgorithmNames) -> String {
            "deleted gallery \(self.gallery): \(Format.plural(self.templatesDeleted, "template"))"
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in
            Result(gallery: self.name, templatesDeleted: try await client.deleteGallery(self.name))
        }
    }
}
