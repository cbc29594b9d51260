import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl encrypt --key-file PATH`: encrypt the templates at rest, or rotate their key.
struct EncryptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt every template at rest with a key, or re-encrypt them with a new key (rotation).",
        discussion: """
            The daemon reads the key file itself (32 bytes, or 64 hexadecimal characters), so the path is \
            one the daemon can read: a regular file (not a symbolic link) owned by root or the daemon's \
            user and readable by its owner alone (mode 0600 or 0400); any other file is refused with the \
            same message, the reason being in the daemon's log. All templates are rewritten in one transaction. From then on the \
            daemon must be started with that key (--key-file, keyFile in the configuration, or the \
            store-key systemd credential). LMDB does not wipe freed pages: until they are reused, old \
            bytes may remain in the store file; a backup (a compacting copy) holds none. Needs the admin right.
            """)

    @OptionGroup var options: GlobalOptions

    @Option(help: ArgumentHelp("The key file, as a path the daemon can read.", valueName: "path"), completion: .file())
    var keyFile: String

    struct Result: CommandResult {
        var templates: Int

        func text(_ names: AlgorithmNames) -> String {
            "encrypted \(Format.plural(self.templates, "template")) with the new key; start registryd with it from now on"
        }
    }

    func run() async throws {
        // A relative path means nothing to the daemon (it has its own working directory).
        let path = FileIO.absolute(self.keyFile)
        try await Runner(self.options).run { client in
            Result(templates: try await client.setEncryptionKey(keyFile: path))
        }
    }
}
