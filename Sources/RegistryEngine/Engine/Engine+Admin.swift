import CScanKernels
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

extension Engine {
    // MARK: Galleries

    /// The galleries, by name.
    public func galleries() -> [GalleryInfo] {
        self.indexLock.withReadLock {
            self.state.values.sorted { $0.name < $1.name }.map(Self.info)
        }
    }

    /// One gallery.
    /// - Throws: ``RegistryError`` (`unknownGallery`).
    public func gallery(_ name: String) throws(RegistryError) -> GalleryInfo {
        try self.indexLock.withReadLock { () throws(RegistryError) in Self.info(try self.gallery(named: name)) }
    }

    private static func info(_ gallery: GalleryIndex) -> GalleryInfo {
        GalleryInfo(
            name: gallery.name,
            registries: gallery.registries.map {
                RegistryInfo(
                    algorithm: $0.algorithm, thresholds: $0.thresholds, templateCount: $0.count,
                    identifierCount: $0.identifierCount, minimumQuality: $0.minimumQuality,
                    minimumAutoEnrolmentQuality: $0.minimumAutoEnrolmentQuality)
            },
            identifierCount: gallery.identifierCount, liveness: gallery.liveness, livenessK: gallery.livenessK)
    }

    /// Creates a gallery, or reconfigures an existing one: registry order (priority), thresholds, new
    /// registries. A registry left out must be empty.
    /// - Throws: ``RegistryError`` (`malformedRequest`, `unknownAlgorithm`).
    @discardableResult
    public func defineGallery(_ configuration: GalleryConfiguration) async throws -> GalleryInfo {
        try await self.defineGalleries([configuration])[0]
    }

    /// Defines several galleries in one transaction: all of them, or — when any is refused — none.
    /// (A configuration reload must not leave the galleries before a bad one changed and those after
    /// it not.)
    /// - Throws: the first refusal, as ``defineGallery(_:)`` would; nothing is changed then.
    @discardableResult
    public func defineGalleries(_ configurations: [GalleryConfiguration]) async throws -> [GalleryInfo] {
        var names = Set<String>()
        for configuration in configurations {
            try Names.validateGallery(configuration.name)
            guard names.insert(configuration.name).inserted else {
                throw RegistryError.malformedRequest("gallery '\(configuration.name)' is defined twice")
            }
        }
        guard !configurations.isEmpty else { return [] }
        try await self.write(exclusive: true) { txn, context in
            for configuration in configurations {
                let existing = self.state[configuration.name]
                let (record, algorithms) = try self.writeGallery(txn, configuration, existing: existing)
                context.record(.defineGallery(name: configuration.name, record: record, algorithms: algorithms))
            }
        }
        return try configurations.map { try self.gallery($0.name) }
    }

    /// Deletes a gallery with every template and liveness profile in it. `default` cannot be deleted
    /// (it always exists); delete its identifiers instead.
    /// - Returns: the number of templates erased.
    public func deleteGallery(_ name: String) async throws -> Int {
        try Names.validateGallery(name)
        guard name != GalleryConfiguration.defaultName else {
            throw RegistryError.malformedRequest("the default gallery always exists and cannot be deleted")
        }
        return try await self.write(exclusive: true, useReserve: true) { txn, context in
            let gallery = try self.gallery(named: name)
            let ids = try self.store.templateIds(txn, galleryId: gallery.id)
            for id in ids { try self.store.deleteTemplate(txn, id: id) }
            try self.store.deleteProfiles(txn, galleryId: gallery.id)
            try self.store.deleteGalleryRecord(txn, name: name)
            context.record(.deleteGallery(name: name))
            return ids.count
        }
    }

    /// Bytes of the store's map in use (LMDB pages up to the last one written).
    public var storeBytesInUse: Int { self.store.environment.usedBytes }

    // MARK: Deletion

    /// Deletes one template of a gallery.
    /// - Returns: whether it existed (in that gallery).
    public func deleteTemplate(gallery name: String = GalleryConfiguration.defaultName, id: UInt64) async throws -> Bool {
        try Names.validateGallery(name)
        return try await self.write(useReserve: true) { txn, context in
            let gallery = try self.gallery(named: name)
            guard let record = try self.store.templateRecord(txn, id: id), record.galleryId == gallery.id else { return false }
            try self.store.deleteTemplate(txn, id: id)
            context.record(.remove(id: id, galleryId: gallery.id, registryId: record.registryId))
            // The identifier's last template: it is erased, so is its liveness profile.
            if try self.store.templateIds(txn, galleryId: gallery.id, identifier: record.identifier).isEmpty {
                try self.store.deleteProfile(txn, galleryId: gallery.id, identifier: record.identifier)
                context.record(.setProfile(galleryId: gallery.id, identifier: record.identifier, profile: nil))
            }
            return true
        }
    }

    /// Erases an identifier from a gallery: its templates in every registry and its liveness profile.
    /// - Returns: the number of templates erased (0 when it was not registered).
    public func deleteIdentifier(gallery name: String = GalleryConfiguration.defaultName, identifier: String) async throws -> Int {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        return try await self.write(useReserve: true) { txn, context in
            let gallery = try self.gallery(named: name)
            let ids = try self.store.templateIds(txn, galleryId: gallery.id, identifier: identifier)
            for id in ids {
                guard let record = try self.store.deleteTemplate(txn, id: id) else { continue }
                context.record(.remove(id: id, galleryId: gallery.id, registryId: record.registryId))
            }
            try self.store.deleteProfile(txn, galleryId: gallery.id, identifier: identifier)
            context.record(.setProfile(galleryId: gallery.id, identifier: identifier, profile: nil))
            return ids.count
        }
    }

    // MARK: Listing

    /// Runs `body` in a read transaction on the engine's read pool (``ReadPool``), never on the
    /// caller's thread; storage errors surface as ``RegistryError``s (`SHUTTING_DOWN` once closed).
    func readStore<T: Sendable>(_ body: @escaping @Sendable (borrowing Transaction) throws -> T) async throws -> T {
        try await self.reads.run {
            do {
                return try self.store.environment.read(body)
            } catch let error as LMDBError {
                throw RegistryError.storage(error)
            }
        }
    }

    /// Begins and ends a read transaction on the calling thread: whether the store still answers (the
    /// watchdog's health check). Unlike the reads above it may run anywhere: it reads no page but
    /// LMDB's meta pages and waits for no other transaction, so a read pool busy with long reads (two
    /// backups) cannot make a healthy daemon look stuck.
    public func checkStoreAnswers() throws {
        do {
            try self.store.environment.read { _ in }
        } catch let error as LMDBError {
            throw RegistryError.storage(error)
        }
    }

    /// A page of a gallery's identifiers in byte order, starting after `after`.
    /// - Parameters:
    ///   - limit: page size, 1...10,000.
    public func identifiers(
        gallery name: String = GalleryConfiguration.defaultName,
        after: String? = nil,
        limit: Int = 100
    ) async throws -> IdentifierPage {
        guard (1...10_000).contains(limit) else { throw RegistryError.malformedRequest("limit must be within 1...10000") }
        let galleryId = try self.indexLock.withReadLock { () throws(RegistryError) in try self.gallery(named: name).id }
        let (identifiers, more) = try await self.readStore { txn in
            try self.store.identifierPage(txn, galleryId: galleryId, after: after, limit: limit)
        }
        return IdentifierPage(identifiers: identifiers, next: more ? identifiers.last : nil)
    }

    /// An identifier's templates, in registration order: metadata, and the templates themselves when
    /// `includeData` (an admin export; vectors as stored).
    /// - Throws: ``RegistryError`` (`identifierNotRegistered` when it has none).
    public func templates(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        includeData: Bool = false
    ) async throws -> [StoredTemplate] {
        try Names.validateIdentifier(identifier)
        let (galleryId, algorithmOf) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return (gallery.id, Dictionary(uniqueKeysWithValues: gallery.registries.map { ($0.id, $0.algorithm) }))
        }
        let result = try await self.readStore { txn in
            try self.store.templateIds(txn, galleryId: galleryId, identifier: identifier).compactMap { id -> StoredTemplate? in
                guard let record = try self.store.templateRecord(txn, id: id), let algorithm = algorithmOf[record.registryId] else {
                    return nil
                }
                var template: FaceTemplate?
                if includeData {
                    let payload = try self.store.payload(txn, id: id)
                    let data = payload.withUnsafeBytes { PreparedTemplate.decodePayload($0, algorithm: algorithm) }
                    template = FaceTemplate(algorithm: algorithm.version, data: data)
                }
                return StoredTemplate(
                    id: id, identifier: identifier, algorithm: algorithm.version, registeredAt: record.registeredAt,
                    source: record.source, quality: record.quality, template: template, landmarkQuality: record.landmarkQuality)
            }
        }
        guard !result.isEmpty else {
            throw RegistryError(.identifierNotRegistered, "'\(identifier)' is not registered in gallery '\(name)'")
        }
        return result
    }

    /// Per registry (priority order): identifiers held out of the gallery's total.
    public func migrationStatus(gallery name: String = GalleryConfiguration.defaultName) throws(RegistryError) -> [MigrationStatus] {
        try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            return gallery.registries.map {
                MigrationStatus(
                    algorithm: $0.algorithm.version, identifiersHeld: $0.identifierCount,
                    galleryIdentifiers: gallery.identifierCount)
            }
        }
    }
}

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

    /// Checks the store against itself, then the index against the store. Runs between group commits,
    /// so the store and the index are at the same point.
    ///
    /// First the structure of `data.mdb`'s trees, as the open checks it (page numbers, headers, node
    /// offsets, key order, counts, free-page lists); damage there is the one problem reported, since
    /// the record passes would walk into it.
    ///
    /// The store: every template record matches its checksum and belongs to a stored gallery's
    /// registry; its payload parts run 0, 1, … and match the record's payload checksum, open with the
    /// store's key and have the algorithm's size; no payload part lacks a record; the identifier index
    /// and the template records list the same templates with the same identifier and registry. The
    /// index: every template has its row, with the same data, and no row lacks a template. Problems
    /// name template ids, identifiers and registries, never template data.
    /// - Returns: the number of templates checked and a description of each problem found.
    public func verify() async throws -> (checked: Int, problems: [String]) {
        if self.isReadOnly { return try await self.readStore { txn in try self.verify(txn) } }
        return try await self.write(exclusive: true, useReserve: true) { txn, _ in try self.verify(txn) }
    }

    private func verify(_ txn: borrowing Transaction) throws -> (checked: Int, problems: [String]) {
        // The trees' structure first, as at open: liblmdb follows page numbers without bounds checks,
        // so the passes below are not made over a damaged tree. A read-only store was checked by its
        // open, and nothing has written to it since.
        if !self.isReadOnly, let damage = try self.store.environment.treeDamage(within: txn) {
            return (0, ["the structure of data.mdb is damaged: \(damage.message)"])
        }
        var problems: [String] = []
        // The registries as the store defines them (not as the index loaded them).
        var storedRegistries: [UInt32: (galleryId: UInt32, algorithm: Algorithm?)] = [:]
        for (name, gallery) in try self.store.storedGalleries(txn) {
            for entry in gallery.registries {
                let algorithm = try? self.catalog.algorithm(version: entry.algorithm)
                if algorithm == nil { problems.append("gallery '\(name)' has a registry of unknown algorithm \(entry.algorithm)") }
                storedRegistries[entry.id] = (gallery.id, algorithm)
            }
        }
        var records: [UInt64: TemplateRecord] = [:]
        var checked = 0
        try txn.forEach(self.store.templates) { key, value in
            checked += 1
            do {
                let id = try Store.templateId(key)
                records[id] = try TemplateRecord(decoding: value, id: id)
            } catch let corruption as StoreCorruption {
                problems.append(corruption.description)
            }
            return .continue
        }
        for (id, record) in records.sorted(by: { $0.key < $1.key }) {
            guard let (galleryId, algorithm) = storedRegistries[record.registryId], galleryId == record.galleryId else {
                problems.append("template \(id) belongs to registry \(record.registryId), which its gallery does not have")
                continue
            }
            do {
                let payload = try self.store.payload(txn, id: id)
                if let algorithm, payload.count != PreparedTemplate.payloadSize(of: algorithm) {
                    problems.append("template \(id) has \(payload.count) payload bytes, expected \(PreparedTemplate.payloadSize(of: algorithm))")
                }
            } catch let corruption as StoreCorruption {
                problems.append(corruption.description)
            } catch let error as LMDBError {
                throw error  // the writer must see it (a map to grow, a closed store)
            } catch {
                problems.append("template \(id) does not open with the store's key")
            }
        }
        try txn.forEach(self.store.vectors) { key, _ in
            guard let (id, part) = try? Store.vectorPart(key) else {
                problems.append("a payload key of \(key.count) bytes")
                return .continue
            }
            if part == 0 && records[id] == nil { problems.append("payload of template \(id) has no record") }
            return .continue
        }
        var indexed = Set<UInt64>()
        try txn.forEach(self.store.identifiers) { key, value in
            guard key.count >= 14, key[key.count - 9] == 0, value.count == 4 else {
                problems.append("an identifier-index entry of \(key.count) bytes does not decode")
                return .continue
            }
            let galleryId = key.loadBigEndian(as: UInt32.self)
            let identifier = String(decoding: UnsafeRawBufferPointer(rebasing: key[4..<(key.count - 9)]), as: UTF8.self)
            let id = key.loadBigEndian(at: key.count - 8, as: UInt64.self)
            let registryId = UInt32(littleEndian: value.loadUnaligned(as: UInt32.self))
            indexed.insert(id)
            guard let record = records[id] else {
                problems.append("the identifier index lists template \(id) of '\(identifier)', which has no record")
                return .continue
            }
            if record.galleryId != galleryId || record.identifier != identifier || record.registryId != registryId {
                problems.append("the identifier index and the record of template \(id) disagree on its gallery, identifier or registry")
            }
            return .continue
        }
        for id in records.keys.sorted() where !indexed.contains(id) {
            problems.append("template \(id) is missing from the identifier index")
        }
        problems += self.compareIndex(with: records, txn)
        // Erasure: every page the last erasure pass could wipe is zero (docs/security.md).
        let residue = try self.store.environment.freePageResidue(within: txn)
        if residue.holdingData > 0 {
            problems.append(
                "\(residue.holdingData) of \(residue.erasable) free pages of data.mdb still hold data that erasure should have wiped"
                    + (self.isReadOnly ? " (the daemon stopped before it finished erasing; its next start does)" : ""))
        }
        return (checked, problems)
    }

    /// The index against the (checked) store: every template record has its row with the same data,
    /// and every registry has as many rows as the store has records for it.
    private func compareIndex(with records: [UInt64: TemplateRecord], _ txn: borrowing Transaction) -> [String] {
        var problems: [String] = []
        var registries: [UInt32: RegistryIndex] = [:]
        for gallery in self.state.values {
            for registry in gallery.registries { registries[registry.id] = registry }
        }
        var seen: [UInt32: Int] = [:]
        let rowsByTemplate = registries.mapValues { $0.rowsByTemplate() }
        for (id, record) in records.sorted(by: { $0.key < $1.key }) {
            guard let registry = registries[record.registryId], let row = rowsByTemplate[record.registryId]?[id] else {
                problems.append("template \(id) is stored but not in the index")
                continue
            }
            seen[registry.id, default: 0] += 1
            // A payload that fails its checks was reported by the store pass.
            guard let payload = try? self.store.payload(txn, id: id), payload.count == PreparedTemplate.payloadSize(of: registry.algorithm) else {
                continue
            }
            let expected: [Float] = payload.withUnsafeBytes { bytes in
                switch PreparedTemplate.decodePayload(bytes, algorithm: registry.algorithm) {
                case .vector(let values): return values  // stored prepared
                case .landmarks: return registry.landmarkMatcher.map { Self.preparedLandmarks(bytes, $0) } ?? []
                }
            }
            if registry.rows != nil, !Array(UnsafeBufferPointer(start: registry.row(row), count: registry.stride)).elementsEqual(expected) {
                problems.append("template \(id) differs between the store and the index")
            } else if registry.codes != nil && !Self.codesMatch(expected, registry, row: row) {
                // The prefilter's copy: wrong codes or terms would make it skip rows it must not.
                problems.append("template \(id) differs between the store and the index's codes")
            }
        }
        for (id, registry) in registries where registry.count != seen[id, default: 0] {
            problems.append("the \(registry.algorithm) registry indexes \(registry.count) templates, the store has \(seen[id, default: 0])")
        }
        return problems
    }

    /// Whether row `row` of `registry` holds the codes and bound terms `values` encode to.
    private static func codesMatch(_ values: [Float], _ registry: RegistryIndex, row: Int) -> Bool {
        guard case .vector(let dimension) = registry.algorithm.kind, values.count == dimension, let held = registry.code(row: row) else {
            return false
        }
        var codes = [Int8](repeating: 0, count: registry.codeStride)
        var terms = rk_row_terms()
        rk_encode_row(values, dimension, registry.codeStride, &codes, &terms)
        return codes.elementsEqual(held.codes) && withUnsafeBytes(of: terms) { a in withUnsafeBytes(of: held.terms) { a.elementsEqual($0) } }
    }

    /// A stored landmark payload (mask, raw coordinates) prepared as the index holds it.
    private static func preparedLandmarks(_ bytes: UnsafeRawBufferPointer, _ matcher: LandmarkMatcher) -> [Float] {
        let mask = bytes.loadUnaligned(as: UInt32.self)
        let raw = stride(from: 4, to: bytes.count, by: 4).map { bytes.loadUnaligned(fromByteOffset: $0, as: Float.self) }
        return matcher.prepared(DenseLandmarks(mask: mask, coordinates: raw))
    }
}

extension Engine {
    // MARK: Liveness profiles

    /// Enrols (or re-enrols) an identifier's liveness profile from depth frames captured over the
    /// enrolment poses (the liveness enrolment design), with the gallery's k unless `k` is given.
    /// - Throws: ``RegistryError``: `identifierNotRegistered`; `malformedRequest` naming the pose and
    ///   the problem when the frames are too few or fail the fixed checks.
    @discardableResult
    public func enrolLivenessProfile(
        gallery name: String = GalleryConfiguration.defaultName,
        identifier: String,
        frames: [EnrolmentPose: [DepthFrame]],
        k: Float? = nil
    ) async throws -> LivenessProfile {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        let (galleryId, galleryK) = try self.indexLock.withReadLock { () throws(RegistryError) in
            let gallery = try self.gallery(named: name)
            guard gallery.contains(identifier) else {
                throw RegistryError(.identifierNotRegistered, "'\(identifier)' is not registered in gallery '\(name)'")
            }
            return (gallery.id, gallery.livenessK)
        }
        let profile: LivenessProfile
        do {
            profile = try LivenessProfile.enrol(frames, k: k ?? galleryK)
        } catch {
            throw RegistryError.malformedRequest("liveness enrolment refused: \(error)")
        }
        try await self.write { txn, context in
            let gallery = try self.gallery(named: name)
            guard gallery.id == galleryId, Matching.holdsAnywhere(gallery, identifier: identifier, batch: context.batch) else {
                throw RegistryError(.identifierNotRegistered, "'\(identifier)' is not registered in gallery '\(name)'")
            }
            try txn.put(self.store.profiles, key: Keys.profile(galleryId, identifier), value: profile.encoded())
            context.record(.setProfile(galleryId: galleryId, identifier: identifier, profile: profile))
        }
        return profile
    }

    /// An identifier's liveness profile, if it enrolled one.
    public func livenessProfile(gallery name: String = GalleryConfiguration.defaultName, identifier: String) throws(RegistryError) -> LivenessProfile?
    {
        try self.indexLock.withReadLock { () throws(RegistryError) in try self.gallery(named: name).profile(of: identifier) }
    }

    /// Erases an identifier's liveness profile (its templates stay). Returns whether it had one.
    public func deleteLivenessProfile(gallery name: String = GalleryConfiguration.defaultName, identifier: String) async throws -> Bool {
        try Names.validateGallery(name)
        try Names.validateIdentifier(identifier)
        return try await self.write(useReserve: true) { txn, context in
            let gallery = try self.gallery(named: name)
            let existed = try txn.delete(self.store.profiles, key: Keys.profile(gallery.id, identifier))
            context.record(.setProfile(galleryId: gallery.id, identifier: identifier, profile: nil))
            return existed
        }
    }
}

extension Engine {
    // MARK: Encryption at rest

    /// Encrypts every stored template with `key` (32 bytes or 64 hex characters), or re-encrypts them
    /// when the store is already encrypted (key rotation), in one transaction: every template or none.
    /// From then on the store opens only with this key.
    /// - Returns: the number of templates (re-)encrypted.
    public func setEncryptionKey(_ key: [UInt8]) async throws -> Int {
        let newCipher = try PayloadCipher(keyMaterial: key)
        return try await self.write(exclusive: true) { txn, context in
            // Read every payload with the current key, write it sealed with the new one; the store
            // switches keys only after the commit (an IndexChange), so a failed or re-run batch is safe.
            var ids: [UInt64] = []
            try txn.forEach(self.store.templates) { key, _ in
                ids.append(key.loadBigEndian(as: UInt64.self))
                return .continue
            }
            for id in ids {
                try self.store.rewritePayload(txn, id: id, payload: try self.store.payload(txn, id: id), sealedWith: newCipher)
            }
            try txn.put(
                self.store.meta, key: Keys.encryptionCheck, value: try newCipher.seal(PayloadCipher.checkPlaintext, templateId: 0))
            self.store.pendingCipher.withLock { $0 = newCipher }
            context.record(.setCipher(newCipher))
            return ids.count
        }
    }
}
