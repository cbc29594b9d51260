import ArgumentParser
import Glibc
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl backup DIRECTORY`: a compacting hot copy of the store, written by the daemon.
/// `registryctl backup --into DIR --keep N`: the same into a new timestamped directory of DIR, then
/// the older ones beyond N removed (``BackupRetention``), as the backup timer runs it.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write a compacted hot copy of the store into a new directory.",
        discussion: """
            The daemon writes the copy, so the directory must be one it can create and write. A \
            relative path is made absolute against the current directory first.

            With --into DIR instead of a directory, the copy is named by its UTC start time \
            (DIR/20261126T234000Z); with --keep N too, the backups in DIR beyond the newest N are \
            then removed, their files overwritten with zeros first (a backup holds the templates \
            of people erased since it was taken). Only directories with such a name and a \
            manifest.json are counted or removed, and nothing is removed when the copy failed. \
            This is what registryd-backup.timer runs.
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: "The new directory for the copy.", completion: .directory)
    var directory: String?

    @Option(help: ArgumentHelp("Write the copy into a new directory of this one, named by the time.", valueName: "dir"), completion: .directory)
    var into: String?

    @Option(help: ArgumentHelp("With --into: keep this many backups in it, removing older ones.", valueName: "count"))
    var keep: Int?

    func validate() throws {
        guard (self.directory == nil) != (self.into == nil) else {
            throw ValidationError("Give either a directory or --into, not both.")
        }
        if let keep = self.keep {
            guard self.into != nil else { throw ValidationError("--keep needs --into.") }
            guard keep >= 1 else { throw ValidationError("--keep must be at least 1: the copy just made is kept.") }
        }
    }

    struct Result: CommandResult {
        var directory: String
        var bytes: Int
        /// With --keep: the older backups removed, and why any that should have gone is still there.
        var removed: [String]?
        var retentionProblems: [String]?

        func text(_ names: AlgorithmNames) -> String {
            var text = "backed up to \(self.directory): \(Format.bytes(UInt64(max(0, self.bytes))))"
            if let removed = self.removed, !removed.isEmpty {
                text +=
                    "\nremoved \(removed.count) older backup\(removed.count == 1 ? "" : "s"): "
                    + removed.joined(separator: ", ")
            }
            return text
        }

        var exitStatus: ExitStatus { (self.retentionProblems ?? []).isEmpty ? .success : .refused }

        var notice: String? {
            guard let problems = self.retentionProblems, !problems.isEmpty else { return nil }
            return "registryctl: the backup was written, but older backups could not all be removed:\n  "
                + problems.joined(separator: "\n  ")
        }
    }

    func run() async throws {
        let parent = self.into.map(FileIO.absolute)
        let directory = parent.map { $0 + "/" + BackupRetention.name(at: time(nil)) } ?? FileIO.absolute(self.directory ?? "")
        try await Runner(self.options).run { client in
            var result = Result(directory: directory, bytes: try await client.backup(to: directory))
            if let parent, let keep = self.keep {
                let outcome = BackupRetention.prune(directory: parent, keep: keep)
                result.removed = outcome.removed
                result.retentionProblems = outcome.problems
            }
            return result
        }
    }
}
