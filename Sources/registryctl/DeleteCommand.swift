import ArgumentParser

/// `registryctl delete identifier|template|gallery`.
struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete an identifier (in every registry), a template, or a gallery.",
        subcommands: [DeleteIdentifierCommand.self, DeleteTemplateCommand.self, DeleteGalleryCommand.self])
}
