import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Export, backup, verification

    /// One page of a gallery's templates with their data, in registration order, after template id
    /// `after` (exclusive; 0 from the start).
    /// - Returns: the templates, and the id to pass as `after` for the next page (nil on the last).
    public func exportTemplates(
        gallery name: String = GalleryConfiguration.defaultName,
        after: UInt64 = 0,
        limit: Int = 1000
    ) async throws -> (templates: [StoredTemplate], next: UInt64?) {
        guard (1...10_000).contains(limit) else { throw RegistryError.malformedRequest("limit must be within 1...10000") }
        let (galleryId, algorithmOf) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return (gallery.id, Dictionary(uniqueKeysWithValues: gallery.registries.map { ($0.id, $0.algorithm) }))
        }
        return try await self.readStore { txn in
            var page: [StoredTemplate] = []
            var more = false
            var records: [(UInt64, TemplateRecord)] = []
            try txn.forEach(self.store.templates, from: Keys.template(after &+ 1)) { key, value in
                let record = try TemplateRecord(decoding: value, id: try Store.templateId(key))
                guard record.galleryId == galleryId else { return .continue }
                if records.count == limit {
                    more = true
                    return .stop
                }
                records.append((key.loadBigEndian(as: UInt64.self), record))
                return .continue
            }
            for (id, record) in records {
                guard let algorithm = algorithmOf[record.registryId] else { continue }
                let payload = try self.store.payload(txn, id: id)
                let data = payload.withUnsafeBytes { PreparedTemplate.decodePayload($0, algorithm: algorithm) }
                page.append(
                    StoredTemplate(
                        id: id, identifier: record.identifier, algorithm: algorithm.version, registeredAt: record.registeredAt,
                        source: record.source, quality: record.quality, template: FaceTemplate(algorithm: algorithm.version, data: data),
                        landmarkQuality: record.landmarkQuality))
            }
            return (page, more ? records.last?.0 : nil)
        }
    }

    /// One page of a gallery's liveness profiles in identifier (byte) order, after `after`
    /// (exclusive; nil from the start).
    /// - Returns: the profiles, and the identifier to pass as `after` for the next page (nil on the last).
    public func exportLivenessProfiles(
        gallery name: String = GalleryConfiguration.defaultName,
        after: String? = nil,
        limit: Int = 1000
    ) async throws -> (profiles: [ProfileEntry], next: String?) {
        guard (1...10_000).contains(limit) else { throw RegistryError.malformedRequest("limit must be within 1...10000") }
        let galleryId = try self.indexLock.withReadLock { () throws(RegistryError) in try self.gallery(named: name).id }
        let prefix = Keys.galleryPrefix(galleryId)
        return try await self.readStore { txn in
            var page: [ProfileEntry] = []
            var more = false
            // Keys are the gallery's prefix and the identifier's bytes: the 0x00 after `after` makes
            // the smallest key past it (identifiers hold no control character).
            let start = after.map { Keys.profile(galleryId, $0) + [0] } ?? prefix
            try txn.forEach(self.store.profiles, from: start) { key, value in
                guard key.starts(with: prefix) else { return .stop }
                if page.count == limit {
                    more = true
                    return .stop
                }
                let identifier = String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self)
                page.append(ProfileEntry(identifier: identifier, profile: try LivenessProfile(decoding: value)))
                return .continue
            }
            return (page, more ? page.last?.identifier : nil)
        }
    }

    /// Writes a compacted, consistent copy of the store into a new directory while the registry keeps
    /// serving (LMDB's hot copy), and `manifest.json` beside it (``BackupManifest``).
    ///
    /// The engine chooses where, never the caller: the new directory is made in ``backupRoot``, or in
    /// `directory` when that is (as a string, after trailing slashes) the root or one of
    /// ``allowedBackupDirectories``, and it is named by the copy's UTC start time (``BackupName``).
    /// A request comes from a client of the socket, and the copy is the whole biometric store written
    /// as the daemon: a path of the client's choosing would let it put a readable copy where it likes,
    /// or have the daemon write through links it planted.
    /// - Parameter directory: empty for the root.
    /// - Returns: the new directory's path and the copy's size in bytes.
    /// - Throws: ``RegistryError``: `permissionDenied` for any other directory (nothing is written
    ///   then), `internal` when the copy cannot be made. Runs on the read pool.
    public func backup(into directory: String = "") async throws -> (directory: String, bytes: Int) {
        let parent = try self.backupParent(directory)
        return try await self.reads.run { try self.copy(into: parent) }
    }

    /// The directory a backup request may have its copy made in: the root for an empty one, the
    /// request's own when the configuration names it. Client input is compared as written, never
    /// resolved: a symbolic link the client made must not turn into a directory it may not name.
    func backupParent(_ requested: String) throws(RegistryError) -> String {
        guard !requested.isEmpty else { return self.backupRoot }
        let name = Self.withoutTrailingSlashes(requested)
        guard name.hasPrefix("/"), name == self.backupRoot || self.allowedBackupDirectories.contains(name) else {
            let others =
                self.allowedBackupDirectories.isEmpty
                ? "" : " or one of backup.allowedDirectories (\(self.allowedBackupDirectories.joined(separator: ", ")))"
            throw RegistryError(
                .permissionDenied,
                "backups are written only into the backup root \(self.backupRoot) (backup.directory)\(others), "
                    + "not into '\(requested)'; send no directory to use the root")
        }
        return name
    }

    /// A configured backup directory as requests are compared with it: absolute (against the working
    /// directory, for the daemon's own relative defaults) and without trailing slashes.
    static func backupDirectory(_ path: String) -> String {
        let trimmed = Self.withoutTrailingSlashes(path)
        guard !trimmed.hasPrefix("/") else { return trimmed }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return trimmed }
        let cwd = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var relative = Substring(trimmed)
        while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
        return cwd == "/" ? "/" + relative : cwd + "/" + relative
    }

    /// `path` without trailing slashes (`/` stays `/`).
    static func withoutTrailingSlashes(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        return String(trimmed)
    }

    /// ``backup(into:)``'s work, on a thread that may block.
    ///
    /// Everything is created relative to descriptors, never through a path that could change
    /// meanwhile, and with its final mode from the first instant: the parent is opened without
    /// following a link, the new directory made in it (0700; a name already taken, by anything,
    /// a planted link included, moves on to the next suffix, so no link is ever followed), opened
    /// without following a link and checked to be the daemon's own, and `data.mdb` and
    /// `manifest.json` created in it exclusively (0600). A client that may write the parent (an
    /// allowed directory can be such) can rename the new directory away, but cannot make the daemon
    /// write anywhere else, nor read a copy it cannot open.
    private func copy(into parent: String) throws -> (directory: String, bytes: Int) {
        if parent == self.backupRoot && mkdir(parent, 0o700) != 0 && errno != EEXIST {
            throw RegistryError(.internal, "cannot create the backup root \(parent): \(String(cString: strerror(errno)))")
        }
        let parentDescriptor = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard parentDescriptor >= 0 else {
            throw RegistryError(
                .internal, "cannot open the backup directory \(parent) (a directory, not a symbolic link): \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(parentDescriptor) }
        let started = time(nil)
        var name: String?
        for sequence in 1...Self.backupNamesPerSecond {
            let candidate = BackupName.name(at: started, sequence: sequence)
            if mkdirat(parentDescriptor, candidate, 0o700) == 0 {
                name = candidate
                break
            }
            guard errno == EEXIST else {
                throw RegistryError(.internal, "cannot create a backup in \(parent): \(String(cString: strerror(errno)))")
            }
        }
        guard let name else {
            throw RegistryError(.internal, "cannot create a backup in \(parent): \(Self.backupNamesPerSecond) names of this second are taken")
        }
        let path = (parent == "/" ? "" : parent) + "/" + name
        let directory = openat(parentDescriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard directory >= 0 else { throw RegistryError(.internal, "cannot open the new backup \(path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(directory) }
        // The directory just made, not one put in its place since (which would be someone else's).
        var info = stat()
        guard fstat(directory, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o077 == 0 else {
            throw RegistryError(.internal, "backup to \(path) abandoned: the directory is not the one the daemon made")
        }
        let file = openat(directory, "data.mdb", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw RegistryError(.internal, "cannot create \(path)/data.mdb: \(String(cString: strerror(errno)))") }
        do {
            defer { Glibc.close(file) }
            try self.store.environment.copy(toDescriptor: file, compact: true)
            guard fsync(file) == 0 else { throw RegistryError(.internal, String(cString: strerror(errno))) }
        } catch {
            throw RegistryError(.internal, "backup to \(path) failed: \(error)")
        }
        // The manifest describes the copy as written (counted in it, and its checksum), read through
        // the descriptor: the name could be pointed elsewhere by then.
        let manifest: BackupManifest
        do {
            manifest = try BackupManifest.describe(directory: "/proc/self/fd/\(directory)", catalog: self.catalog, keepsPath: true)
            try manifest.write(into: directory, path: path)
        } catch {
            throw RegistryError(.internal, "backup to \(path): the copy is written, its manifest failed: \(error)")
        }
        // The new entries on disk, as the copy is.
        fsync(directory)
        fsync(parentDescriptor)
        return (path, manifest.bytes)
    }

    /// The most backups started in one second in one directory (names up to `-100`).
    private static let backupNamesPerSecond = 100
}
