import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// Where the daemon writes a backup: only into a new directory it names, in its backup root or in a
/// directory its configuration allows, never where a client says, never through a link a client
/// planted, and readable by the daemon's user alone from the first instant. A backup is the whole
/// biometric store, and the daemon writes it as itself.
@Suite struct BackupLocationTests {
    /// The daemon, with `backup.allowedDirectories` naming `shared`, a directory anyone may write
    /// (as `/tmp` is): the case where a client controls the names in the directory the daemon writes
    /// into.
    func daemon(sharing shared: String, in directory: TemporaryDirectory) throws -> Daemon {
        let config = directory.path + "/registryd.json"
        let json = #"{ "backup": { "allowedDirectories": ["\#(shared)"] } }"#
        #expect(writeFile(config, json))
        return try Daemon(arguments: ["--config", config])
    }

    /// The file type and permission bits of `path`, not following a link.
    func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode : nil
    }

    func refusal(_ body: () async throws -> Void) async -> RegistryError? {
        do {
            try await body()
            return nil
        } catch let error as RegistryError {
            return error
        } catch {
            Issue.record("not a registry error: \(error)")
            return nil
        }
    }

    @Test func aDirectoryTheConfigurationDoesNotNameIsRefusedAndNothingIsCreatedThere() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        let root = daemon.dataPath + "-backups"
        // A client's link to the root is not the root: requests are compared as written, never resolved.
        let link = daemon.directory + "/link-to-root"
        #expect(mkdir(root, 0o700) == 0 && symlink(root, link) == 0)
        let refused = [
            daemon.directory + "/elsewhere", daemon.directory + "/elsewhere/deeper", "relative", "data-backups", "/", link,
            root + "/..", root + "/sub", daemon.dataPath, daemon.dataPath + "/copy",
        ]
        for path in refused {
            let error = await self.refusal { _ = try await client.backup(into: path) }
            #expect(error?.code == .permissionDenied, "\(path)")
            #expect(error?.message.contains("backup root \(root)") == true, "\(error?.message ?? "")")
        }
        #expect(access(daemon.directory + "/elsewhere", F_OK) != 0)
        #expect(access(daemon.dataPath + "/copy", F_OK) != 0)
        #expect((directoryEntries(root) ?? ["?"]).isEmpty, "a refused request wrote into the root")
        // The root itself, as written or with trailing slashes, and the empty request.
        for path in ["", root, root + "//"] {
            let (written, bytes) = try await client.backup(into: path)
            #expect(bytes > 0 && written.hasPrefix(root + "/") && BackupName.parse(String(written.dropFirst(root.count + 1))) != nil)
        }
        #expect(directoryEntries(root)?.count == 3)
        await client.close()
    }

    @Test func theCopyAndItsManifestAreTheDaemonsUsersAloneFromTheFirstInstant() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(2))))
        // The root does not exist yet: the first backup makes it.
        let root = daemon.dataPath + "-backups"
        #expect(access(root, F_OK) != 0)
        let (written, _) = try await client.backup()
        await client.close()
        #expect(self.mode(root) == S_IFDIR | 0o700)
        #expect(self.mode(written) == S_IFDIR | 0o700)
        #expect(self.mode(written + "/data.mdb") == S_IFREG | 0o600)
        #expect(self.mode(written + "/manifest.json") == S_IFREG | 0o600)
        #expect((directoryEntries(written) ?? []).sorted() == ["data.mdb", "manifest.json"])
    }

    /// A client that may write an allowed directory plants symbolic links at the names the daemon
    /// will choose (this second's and the next few): the daemon's `mkdirat` finds each name taken and
    /// takes the next, so it never writes through a link, and the link's target stays empty.
    @Test func aLinkPlantedAtTheNameTheDaemonChoosesIsNeverFollowed() async throws {
        let directory = TemporaryDirectory("registryd-backup")
        defer { directory.remove() }
        let shared = directory.path + "/shared"
        let target = directory.path + "/target"
        #expect(mkdir(shared, 0o777) == 0 && chmod(shared, 0o1777) == 0 && mkdir(target, 0o777) == 0)
        let daemon = try self.daemon(sharing: shared, in: directory)
        let client = try await daemon.client()
        let now = time(nil)
        var planted: [String] = []
        for second in 0..<5 {
            let name = BackupName.name(at: now + time_t(second))
            #expect(symlink(target, shared + "/" + name) == 0)
            planted.append(name)
        }
        let (written, bytes) = try await client.backup(into: shared + "/")
        await client.close()
        let name = String(written.dropFirst(shared.count + 1))
        #expect(bytes > 0 && written.hasPrefix(shared + "/") && !planted.contains(name), "\(written)")
        #expect(BackupName.parse(name).map { $0.sequence == 2 } == true, "\(name): the next name after the planted one")
        #expect(self.mode(written) == S_IFDIR | 0o700)
        #expect(self.mode(written + "/data.mdb") == S_IFREG | 0o600)
        #expect((directoryEntries(target) ?? ["?"]).isEmpty, "the daemon wrote through a planted link")
        for name in planted { #expect(self.mode(shared + "/" + name).map { $0 & S_IFMT } == S_IFLNK) }

        // The allowed directory itself replaced by a link: the parent is opened without following
        // it, so the request fails and the link's target stays empty.
        #expect(rename(shared, directory.path + "/shared-moved") == 0 && symlink(target, shared) == 0)
        let client2 = try await daemon.client()
        let error = await self.refusal { _ = try await client2.backup(into: shared) }
        await client2.close()
        #expect(error?.code == .internal && error?.message.contains("symbolic link") == true, "\(error?.message ?? "")")
        #expect((directoryEntries(target) ?? ["?"]).isEmpty, "the daemon wrote through a planted link")
    }
}

/// Writes `text` to a new file at `path`.
private func writeFile(_ path: String, _ text: String) -> Bool {
    let file = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard file >= 0 else { return false }
    defer { close(file) }
    return text.utf8CString.withUnsafeBytes { write(file, $0.baseAddress, $0.count - 1) } == text.utf8.count
}
