import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl delete identifier ID`: erases a person from a gallery.
struct DeleteIdentifierCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identifier",
        abstract: "Erase an identifier: its templates in every registry of the gallery.",
        discussion: """
            Exits 2 (IDENTIFIER_NOT_REGISTERED) when the gallery has no template of it. The identifier \
            is matched byte for byte: a canonically equivalent spelling is another person and stays.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: "The identifier to erase.")
    var identifier: String

    struct Result: CommandResult {
        var gallery: String
        var identifier: String
        var templatesDeleted: Int

        func text(_ names: AlgorithmNames) -> String {
            "deleted \(Format.quoted(self.identifier)) from gallery \(self.gallery): \(Format.plural(self.templatesDeleted, "template"))"
        }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            let deleted = try await client.deleteIdentifier(gallery: gallery, identifier: self.identifier)
            guard deleted > 0 else {
                throw RegistryError(.identifierNotRegistered, "'\(self.identifier)' is not registered in gallery '\(gallery)'")
            }
            return Result(gallery: gallery, identifier: self.identifier, templatesDeleted: deleted)
        }
    }
}
