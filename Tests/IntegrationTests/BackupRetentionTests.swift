import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// `registryctl backup --keep N`, what registryd-backup.timer runs: a copy the daemon names by its
/// start time, then the older backups beyond N wiped and removed, and nothing else in the directory
/// touched (a name from the future neither).
@Suite struct BackupRetentionTests {
    func registryctl(_ arguments: [String], _ daemon: Daemon) throws -> (status: Int32, output: String) {
        let binary = try #require(siblingExecutable("registryctl"))
        return try run([binary] + arguments + ["--socket", daemon.socketPath], log: daemon.directory + "/registryctl.out")
    }

    struct Document: Decodable {
        var directory: String
        var removed: [String]?
        var retentionProblems: [String]?
    }

    /// The entries of `directory`, sorted.
    func entries(_ directory: String) -> [String] { (directoryEntries(directory) ?? []).sorted() }

    @Test func theOldestBackupsAreWipedAndRemovedAndNothingElse() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(1))))
        // The daemon's backup root (none configured: the data directory's path with -backups).
        let parent = daemon.dataPath + "-backups"
        // Three earlier backups, as the timer would have made them on earlier days: one real copy
        // by the daemon, given those days' names, in a random order so that the removal must go by
        // name, not by the order they were made.
        let first = try await client.backup().directory
        #expect(first.hasPrefix(parent + "/"), "\(first)")
        await client.close()
        let days = ["20240105T030000Z", "20240103T030000Z", "20240104T030000Z"].shuffled()
        #expect(rename(first, parent + "/" + days[0]) == 0)
        for day in days.dropFirst() { #expect(system("cp -a '\(parent)/\(days[0])' '\(parent)/\(day)'") == 0) }
        // What is not a finished backup of this scheme stays whatever its age: a copy that failed
        // half-way (no manifest), a backup an operator named, a file. And one named for the future,
        // as anyone who may write the directory could plant: counted, it would be the newest, and
        // the copy about to be made would be removed at once as too old.
        #expect(mkdir(parent + "/20200101T000000Z", 0o700) == 0)
        #expect(system("cp -r '\(parent)/20240103T030000Z' '\(parent)/before-upgrade' && echo x > '\(parent)/notes.txt'") == 0)
        #expect(system("cp -r '\(parent)/20240103T030000Z' '\(parent)/29991231T000000Z'") == 0)
        // A second name for the oldest backup's data file: it sees whether the removal wiped the
        // blocks or only unlinked the name.
        let witness = daemon.directory + "/witness"
        #expect(link(parent + "/20240103T030000Z/data.mdb", witness) == 0)
        let size = try #require(readFileBytes(witness)).count
        #expect(size > 0)

        let (status, output) = try self.registryctl(["backup", "--keep", "2", "--json"], daemon)
        #expect(status == 0, "\(output)")
        let document = try JSONDecoder().decode(Document.self, from: Data(output.utf8))
        let made = String(document.directory.dropFirst(parent.count + 1))
        #expect(document.directory.hasPrefix(parent + "/") && BackupName.parse(made) != nil, "\(document.directory)")
        #expect(document.removed == ["20240103T030000Z", "20240104T030000Z"])
        #expect(document.retentionProblems == [])
        let kept = ["20200101T000000Z", "20240105T030000Z", made, "29991231T000000Z", "before-upgrade", "notes.txt"].sorted()
        #expect(self.entries(parent) == kept)
        #expect(readFileText(parent + "/" + made + "/manifest.json").contains("data.mdb"))
        let wiped = try #require(readFileBytes(witness))
        #expect(wiped.count == size && wiped.allSatisfy { $0 == 0 }, "the removed backup's data file was unlinked without being wiped")

        // --into names the directory (the root here): a second copy, with the first kept.
        let into = try self.registryctl(["backup", "--into", parent + "/", "--keep", "2", "--json"], daemon)
        #expect(into.status == 0, "\(into.output)")
        let second = try JSONDecoder().decode(Document.self, from: Data(into.output.utf8))
        let madeAgain = String(second.directory.dropFirst(parent.count + 1))
        #expect(second.directory.hasPrefix(parent + "/") && BackupName.parse(madeAgain) != nil && madeAgain != made, "\(second.directory)")
        #expect(second.removed == ["20240105T030000Z"])
        #expect(self.entries(parent).contains(made) && self.entries(parent).contains("29991231T000000Z"))

        // A directory the daemon's configuration does not name is refused, and nothing is made there.
        let elsewhere = daemon.directory + "/elsewhere"
        let refused = try self.registryctl(["backup", elsewhere], daemon)
        #expect(refused.status == 3 && refused.output.contains("PERMISSION_DENIED") && refused.output.contains(parent), "\(refused.output)")
        #expect(access(elsewhere, F_OK) != 0)

        // The copy just made is always kept, and a stopped daemon removes nothing.
        #expect(try self.registryctl(["backup", "--keep", "0"], daemon).status == 64)
        #expect(try self.registryctl(["backup", "--into", parent, parent], daemon).status == 64)
        #expect(daemon.stop(signal: SIGTERM) == 0)
        let before = self.entries(parent)
        #expect(try self.registryctl(["backup", "--into", parent, "--keep", "1"], daemon).status == 4)
        #expect(self.entries(parent) == before)
    }
}
