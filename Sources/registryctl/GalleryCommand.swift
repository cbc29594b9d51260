import ArgumentParser

/// `registryctl gallery define`.
struct GalleryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gallery",
        abstract: "Define galleries.",
        subcommands: [GalleryDefineCommand.self])
}
