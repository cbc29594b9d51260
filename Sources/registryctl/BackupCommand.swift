import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl backup DIRECTORY`: a compacting hot copy of the store, written by the daemon.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write a compacted hot copy of the store into a new directory.",
        discussion: """
            The daemon writes the copy, so the directory must be one it can create and write. A \
            relative path is made absolute against the current directory first.
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: "The new directory for the copy.")
    var directory: String

    struct Result: CommandResult {
        var directory: String
        var bytes: Int

        func text(_ names: AlgorithmNames) -> String {
            "backed up to \(self.directory): \(Format.bytes(UInt64(max(0, self.bytes))))"
        }
    }

    func run() async throws {
        let directory = FileIO.absolute(self.directory)
        try await Runner(self.options).run { client in
            Result(directory: directory, bytes: try await client.backup(to: directory))
        }
    }
}
