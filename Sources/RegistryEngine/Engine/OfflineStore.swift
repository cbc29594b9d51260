import FoundationEssentials
import Glibc
import LMDB
import RegistryModel

/// Work on a store while no daemon serves it: checking it, and restoring a backup into place. The
/// store's own lock keeps a running daemon's store out of reach (it is reported as in use).
public enum OfflineStore {
    /// What an offline check found.
    public struct Verification: Sendable {
        public var checked: Int
        public var problems: [String]
        /// Whether the directory is a backup with a manifest, checked too.
        public var manifestChecked: Bool
    }

    /// Checks the store or backup in `path` against itself (`verify`) without changing it: opened
    /// read-only, it is not committed to, upgraded, erased or snapshotted, and no lock file is
    /// created. A backup's `data.mdb` is also checked against its manifest (size, SHA-256, and the
    /// counts per gallery and registry). A directory without a store, or a store of an older schema
    /// (which only opening it for writing would upgrade), is refused.
    public static func verify(path: String, configuration: EngineConfiguration) async throws -> Verification {
        try Self.requireStore(path)
        var problems: [String] = []
        let manifest = try Self.manifest(in: path)
        var fileMatches = false
        if let manifest {
            fileMatches = try manifest.describesFile(in: path)
            if !fileMatches { problems.append("data.mdb does not match the backup's manifest (size or SHA-256 differ): the backup is damaged") }
        }
        let catalog: AlgorithmCatalog
        let verified: (checked: Int, problems: [String])
        do {
            let engine = try Engine(path: path, configuration: configuration, readOnly: true)
            catalog = engine.catalog
            defer { engine.close() }
            verified = try await engine.verify()
        } catch  where !problems.isEmpty {
            // A backup that fails its manifest may well not open: both are said.
            return Verification(checked: 0, problems: problems + ["\(error)"], manifestChecked: true)
        }
        problems += verified.problems
        // Counted after the engine closed: one process opens a store once at a time.
        if let manifest, fileMatches, try BackupManifest.describe(directory: path, catalog: catalog).galleries != manifest.galleries {
            problems.append("the backup's galleries do not match its manifest's counts")
        }
        return Verification(checked: verified.checked, problems: problems, manifestChecked: manifest != nil)
    }

    /// What a restore did.
    public struct Restoration: Sendable {
        /// Templates in the restored store, checked.
        public var templates: Int
        /// Where the store that was there went (nil: there was none).
        public var previous: String?
        /// Whether the backup had a manifest to check the copy against.
        public var manifestChecked: Bool
    }

    /// Installs the backup in `backup` (a directory `registryctl backup` wrote) as the store in
    /// `path`, with no daemon running on it: the backup's `data.mdb` is checked against its manifest
    /// (size and SHA-256), copied next to `path`, opened and verified there, its counts compared with
    /// the manifest's, and only then put in place; a store already in `path` is kept beside it as
    /// `path.before-restore-<UTC time>`. Any failure leaves `path` as it was.
    public static func restore(backup: String, into path: String, configuration: EngineConfiguration) async throws -> Restoration {
        let source = backup + "/data.mdb"
        guard access(source, R_OK) == 0 else {
            throw RegistryError(.malformedRequest, "\(backup) holds no readable data.mdb: not a backup")
        }
        let manifest = try Self.manifest(in: backup)
        if let manifest {
            guard try manifest.describesFile(in: backup) else {
                throw RegistryError(
                    .malformedRequest, "\(source) does not match its manifest (size or SHA-256 differ): the backup is damaged; nothing was changed")
            }
        }
        // In use? Opening the current store takes its lock; a running daemon holds it.
        if access(path + "/data.mdb", F_OK) == 0 {
            do {
                let current = try Store(path: path, configuration: configuration)
                current.close()
            } catch {
                throw RegistryError.opening(path, error)
            }
        }
        let stamp = Store.stamp()
        let staging = "\(path).restoring-\(stamp)"
        guard mkdir(staging, 0o700) == 0 else {
            throw RegistryError(.malformedRequest, "cannot create \(staging): \(String(cString: strerror(errno))); nothing was changed")
        }
        var installed = false
        defer { if !installed { _ = try? Self.removeStore(staging) } }
        try Self.copyFile(source, to: staging + "/data.mdb")
        let engine = try Engine(path: staging, configuration: configuration)
        let catalog = engine.catalog
        let verified: (checked: Int, problems: [String])
        do {
            verified = try await engine.verify()
            engine.close()
        } catch {
            engine.close()
            throw error
        }
        let (templates, problems) = verified
        guard problems.isEmpty else {
            throw RegistryError(
                .malformedRequest,
                "the backup does not verify (\(problems.count == 1 ? "1 problem" : "\(problems.count) problems"), first: \(problems[0])); nothing was changed"
            )
        }
        if let manifest {
            let restored = try BackupManifest.describe(directory: staging, catalog: catalog)
            guard restored.galleries == manifest.galleries else {
                throw RegistryError(.malformedRequest, "the backup's galleries do not match its manifest's counts; nothing was changed")
            }
        }
        for file in Environment.lockFiles { unlink(staging + "/" + file) }
        var previous: String?
        if access(path, F_OK) == 0 {
            let aside = "\(path).before-restore-\(stamp)"
            guard rename(path, aside) == 0 else {
                throw RegistryError(.malformedRequest, "cannot move \(path) aside: \(String(cString: strerror(errno))); nothing was changed")
            }
            previous = aside
            // The restored store belongs to whoever owned the one it replaces (the daemon's user).
            var info = stat()
            if stat(aside, &info) == 0 && geteuid() == 0 {
                chown(staging, info.st_uid, info.st_gid)
                chown(staging + "/data.mdb", info.st_uid, info.st_gid)
            }
        }
        guard rename(staging, path) == 0 else {
            if let previous { rename(previous, path) }
            throw RegistryError(.malformedRequest, "cannot move the restored store to \(path): \(String(cString: strerror(errno)))")
        }
        installed = true
        return Restoration(templates: templates, previous: previous, manifestChecked: manifest != nil)
    }

    static func requireStore(_ path: String) throws(RegistryError) {
        guard access(path + "/data.mdb", F_OK) == 0 else {
            throw RegistryError(.malformedRequest, "\(path) holds no store (no data.mdb)")
        }
    }

    /// The backup's manifest, nil when it has none (backups before manifests existed).
    static func manifest(in backup: String) throws -> BackupManifest? {
        let path = backup + "/" + BackupManifest.fileName
        guard access(path, F_OK) == 0 else { return nil }
        guard let file = fopen(path, "rb") else {
            throw RegistryError(.malformedRequest, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { break }
            bytes += buffer[0..<count]
        }
        // Checked first: Foundation's decoder traps on some documents nested 513 deep.
        guard JSONSyntaxChecker.firstProblem(in: bytes) == nil else {
            throw RegistryError(.malformedRequest, "\(path) is not a backup manifest")
        }
        do {
            return try JSONDecoder().decode(BackupManifest.self, from: Data(bytes))
        } catch {
            throw RegistryError(.malformedRequest, "\(path) is not a backup manifest")
        }
    }

    static func copyFile(_ source: String, to target: String) throws(RegistryError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw RegistryError(.internal, "cannot read \(source): \(String(cString: strerror(errno)))") }
        defer { close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw RegistryError(.internal, "cannot write \(target): \(String(cString: strerror(errno)))") }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw RegistryError(.internal, "cannot read \(source): \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            var written = 0
            while written < count {
                let step = buffer.withUnsafeBytes { write(output, $0.baseAddress! + written, count - written) }
                if step < 0 && errno == EINTR { continue }
                guard step > 0 else { throw RegistryError(.internal, "cannot write \(target): \(String(cString: strerror(errno)))") }
                written += step
            }
        }
        guard fsync(output) == 0 else { throw RegistryError(.internal, "cannot write \(target): \(String(cString: strerror(errno)))") }
    }

    static func removeStore(_ directory: String) throws {
        for name in ["data.mdb", Environment.createdMark] + Environment.lockFiles { unlink(directory + "/" + name) }
        rmdir(directory)
    }
}
