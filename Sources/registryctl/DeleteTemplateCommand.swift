import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl delete template TEMPLATE_ID`: removes one template.
struct DeleteTemplateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "template",
        abstract: "Delete one template by id.",
        discussion: "Exits 2 (TEMPLATE_NOT_FOUND) when the gallery has no template with that id.")

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: ArgumentHelp("The template id (see show).", valueName: "template-id"))
    var templateId: UInt64

    struct Result: CommandResult {
        var gallery: String
        var templateId: UInt64
        var deleted: Bool

        func text(_ names: AlgorithmNames) -> String {
            "deleted template \(self.templateId) from gallery \(self.gallery)"
        }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            guard try await client.deleteTemplate(gallery: gallery, id: self.templateId) else {
                throw CommandFailure.templateNotFound(self.templateId, gallery: gallery)
            }
            return Result(gallery: gallery, templateId: self.templateId, deleted: true)
        }
    }
}
