import ArgumentParser
import Glibc
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl backup [DIR]`: the daemon writes a compacting hot copy of the store into a new
/// directory it names, in its backup root or in DIR when its configuration allows that one.
/// `--keep N`: then the older backups beside it beyond N removed (``BackupRetention``), as the backup
/// timer runs it.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Have the daemon write a compacted hot copy of the store into a new directory.",
        discussion: """
            The daemon writes the copy, as itself, so it decides where: into a new directory named \
            by the copy's UTC start time (20261126T234000Z; with -2, -3, ... after it when that \
            name is taken), made in its backup root (backup.directory in its configuration; by \
            default the data directory's path with -backups appended, /var/lib/registryd-backups \
            under systemd). Without a directory the copy goes into the root; with one (or --into), \
            which is made absolute against the current directory, into that directory, which must \
            be the root or one of backup.allowedDirectories exactly: any other is refused \
            (PERMISSION_DENIED) and nothing is written. The directory written is printed.

            With --keep N, the backups beside the new one beyond the newest N are then removed, \
            their files overwritten with zeros first (a backup holds the templates of people erased \
            since it was taken). Only directories with a backup's name and a manifest.json are \
            counted or removed; one named for a time later than now (more than a minute ahead) is \
            never counted nor removed, so a directory named for the future cannot make the copy \
            just made count as old. Nothing is removed when the copy failed. This is what \
            registryd-backup.timer runs.
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: "A directory the daemon may write backups into (default: its backup root).", completion: .directory)
    var directory: String?

    @Option(help: ArgumentHelp("The same as the directory argument.", valueName: "dir"), completion: .directory)
    var into: String?

    @Option(help: ArgumentHelp("Keep this many backups beside the new one, removing older ones.", valueName: "count"))
    var keep: Int?

    func validate() throws {
        guard self.directory == nil || self.into == nil else {
            throw ValidationError("Give either a directory or --into, not both.")
        }
        if let keep = self.keep {
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
        // A path as the daemon sees it: absolute, since it runs in another directory. None: the root.
        let requested = (self.directory ?? self.into).map(FileIO.absolute) ?? ""
        try await Runner(self.options).run { client in
            let (directory, bytes) = try await client.backup(into: requested)
            var result = Result(directory: directory, bytes: bytes)
            if let keep = self.keep {
                let outcome = BackupRetention.prune(directory: BackupRetention.parent(of: directory), keep: keep)
                result.removed = outcome.removed
                result.retentionProblems = outcome.problems
            }
            return result
        }
    }
}
