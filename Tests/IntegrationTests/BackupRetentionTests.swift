import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// `registryctl backup --into DIR --keep N`, what registryd-backup.timer runs: a timestamped copy,
/// then the older backups beyond N wiped and removed, and nothing else in DIR touched.
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
        let parent = daemon.directory + "/backups"
        #expect(mkdir(parent, 0o700) == 0)
        // Three earlier backups, taken by the daemon as the timer would have, in a random order of
        // days so that the removal must go by name, not by the order they were made.
        let days = ["20240105T030000Z", "20240103T030000Z", "20240104T030000Z"].shuffled()
        for day in days { _ = try await client.backup(to: parent + "/" + day) }
        await client.close()
        // What is not a finished backup of this scheme stays whatever its age: a copy that failed
        // half-way (no manifest), a backup an operator named, a file.
        #expect(mkdir(parent + "/20200101T000000Z", 0o700) == 0)
        #expect(system("cp -r '\(parent)/20240103T030000Z' '\(parent)/before-upgrade' && echo x > '\(parent)/notes.txt'") == 0)
        // A second name for the oldest backup's data file: it sees whether the removal wiped the
        // blocks or only unlinked the name.
        let witness = daemon.directory + "/witness"
        #expect(link(parent + "/20240103T030000Z/data.mdb", witness) == 0)
        let size = try #require(readFileBytes(witness)).count
        #expect(size > 0)

        let (status, output) = try self.registryctl(["backup", "--into", parent, "--keep", "2", "--json"], daemon)
        #expect(status == 0, "\(output)")
        let document = try JSONDecoder().decode(Document.self, from: Data(output.utf8))
        let made = String(document.directory.dropFirst(parent.count + 1))
        #expect(document.directory.hasPrefix(parent + "/") && made.count == 16 && made.hasSuffix("Z"), "\(document.directory)")
        #expect(document.removed == ["20240103T030000Z", "20240104T030000Z"])
        #expect(document.retentionProblems == [])
        #expect(self.entries(parent) == ["20200101T000000Z", "20240105T030000Z", made, "before-upgrade", "notes.txt"].sorted())
        #expect(readFileText(parent + "/" + made + "/manifest.json").contains("data.mdb"))
        let wiped = try #require(readFileBytes(witness))
        #expect(wiped.count == size && wiped.allSatisfy { $0 == 0 }, "the removed backup's data file was unlinked without being wiped")

        // The copy just made is always kept, and a stopped daemon removes nothing.
        #expect(try self.registryctl(["backup", "--into", parent, "--keep", "0"], daemon).status == 64)
        #expect(try self.registryctl(["backup", "--keep", "1", parent + "/x"], daemon).status == 64)
        #expect(try self.registryctl(["backup", "--into", parent, parent + "/x"], daemon).status == 64)
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(try self.registryctl(["backup", "--into", parent, "--keep", "1"], daemon).status == 4)
        #expect(self.entries(parent) == ["20200101T000000Z", "20240105T030000Z", made, "before-upgrade", "notes.txt"].sorted())
    }
}
