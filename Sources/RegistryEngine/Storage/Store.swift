import Glibc
import LMDB
import RegistryModel
import Synchronization

/// The LMDB side of the registry: opening and versioning the schema, and the reads and writes of
/// records inside transactions the engine runs. Knows nothing of the register/identify semantics.
///
/// `@unchecked Sendable`: immutable after init apart from the environment, which is thread-safe
/// under its own rules (see ``Environment``).
final class Store: @unchecked Sendable {
    /// The schema this code writes. Older stores are migrated on open; newer ones are refused.
    static let schemaVersion: UInt32 = 4

    /// Migrations from version `n` (the key) to `n + 1`, run in order inside the open transaction.
    static let migrations: [UInt32: @Sendable (borrowing Transaction, Store) throws -> Void] = [
        1: { txn, store in try store.migrateFrom1(txn) },
        2: { txn, store in try store.migrateFrom2(txn) },
        3: { txn, store in try store.migrateFrom3(txn) },
    ]

    /// Schema 1 → 2: gallery records gain per-registry minimum qualities and the liveness policy;
    /// template records gain a landmark-quality field, and the landmark score schema 1 kept in the
    /// quality slot moves there (the quality slot now holds the capture quality).
    func migrateFrom1(_ txn: borrowing Transaction) throws {
        var galleries: [([UInt8], GalleryRecord)] = []
        try txn.forEach(self.galleries) { key, value in
            galleries.append((Array(key), try GalleryRecord(decoding: value, schema: 1)))
            return .continue
        }
        for (key, record) in galleries { try txn.put(self.galleries, key: key, value: record.encoded()) }
        var templates: [([UInt8], TemplateRecord)] = []
        try txn.forEach(self.templates) { key, value in
            var record = try TemplateRecord(decoding: value, id: try Self.templateId(key), schema: 1)
            record.landmarkQuality = record.quality
            record.quality = nil
            templates.append((Array(key), record))
            return .continue
        }
        for (key, record) in templates { try txn.put(self.templates, key: key, value: record.encodedFields()) }
    }

    /// Schema 2 → 3: every template record gains the checksum of its payload (as stored: sealed in an
    /// encrypted store) and its own checksum. Schema 2 stores were never checked, so this can only
    /// vouch for what is there now; records and payloads that do not decode are refused here already.
    func migrateFrom2(_ txn: borrowing Transaction) throws {
        var templates: [(UInt64, TemplateRecord)] = []
        try txn.forEach(self.templates) { key, value in
            let id = try Self.templateId(key)
            templates.append((id, try TemplateRecord(decoding: value, id: id, schema: 2)))
            return .continue
        }
        for (id, var record) in templates {
            record.payloadChecksum = try self.storedPayloadChecksum(txn, id: id)
            try txn.put(self.templates, key: Keys.template(id), value: record.encoded(id: id))
        }
    }

    /// Schema 3 → 4: the audit trail's entries, a record each, are gathered into blocks
    /// (``AuditBlock``) in key order, each under the key of its first entry, and the trail's entry
    /// count goes into `meta`.
    func migrateFrom3(_ txn: borrowing Transaction) throws {
        var total = 0
        var start: [UInt8] = []
        while true {
            var keys: [[UInt8]] = []
            var framed = ByteWriter()
            try txn.forEach(self.audit, from: start) { key, value in
                guard keys.count < AuditBlock.maximumEntries else { return .stop }
                guard key.count == 12, value.count >= 8 else { throw StoreCorruption("an audit record of \(value.count) bytes") }
                keys.append(Array(key))
                AuditBlock.appendFramed(to: &framed) { $0.append(bytes: value) }
                return .continue
            }
            guard let first = keys.first, let last = keys.last else { break }
            for key in keys { try txn.delete(self.audit, key: key) }
            try framed.bytes.withUnsafeBytes { framed in try txn.put(self.audit, key: first, value: AuditBlock.block(framed: framed)) }
            total += keys.count
            // The key right after the last one read (the block now sits at the first).
            start = last + [0]
        }
        try self.writeInteger(txn, Keys.auditEntries, UInt64(total))
    }

    /// The id in a `templates` key.
    static func templateId(_ key: UnsafeRawBufferPointer) throws(StoreCorruption) -> UInt64 {
        guard key.count == 8 else { throw StoreCorruption("a template key of \(key.count) bytes") }
        return key.loadBigEndian(as: UInt64.self)
    }

    /// The template id and part number in a `vectors` key.
    static func vectorPart(_ key: UnsafeRawBufferPointer) throws(StoreCorruption) -> (id: UInt64, part: Int) {
        guard key.count == 8 else { throw StoreCorruption("a payload key of \(key.count) bytes") }
        let value = key.loadBigEndian(as: UInt64.self)
        return (value >> 8, Int(value & 0xFF))
    }

    let environment: Environment
    let meta: Database
    let algorithms: Database
    let galleries: Database
    let templates: Database
    let vectors: Database
    let identifiers: Database
    let profiles: Database
    let audit: Database
    let pageSize: Int
    /// Seals template payloads at rest when the store is encrypted (replaced by a key rotation).
    let cipher = Mutex<PayloadCipher?>(nil)
    /// A key being set: from the transaction that seals the payloads with it until the index takes it
    /// (``cipher``), scans that read rows from the store may find committed payloads sealed with it.
    let pendingCipher = Mutex<PayloadCipher?>(nil)
    /// ``VectorLayout/partSize(payloadBytes:pageSize:)`` by payload size: a store holds a few sizes
    /// (one per algorithm), and working one out tries 64 part counts.
    private let partSizes = Mutex<[Int: Int]>([:])

    /// The named databases, in the order of the properties they fill.
    private static let databaseNames = ["meta", "algorithms", "galleries", "templates", "vectors", "identifiers", "profiles", "audit"]

    /// Opens (creating if needed) the store in `path`; `readOnly` opens an existing one without
    /// writing anything into its directory (``Environment/Options/readOnly``), and `keepsPath` with
    /// it opens `path` as given (``Environment/Options/keepsPath``: a `/proc/self/fd/N` directory).
    init(path: String, configuration: EngineConfiguration, readOnly: Bool = false, keepsPath: Bool = false) throws {
        var options = Environment.Options()
        options.mapSize = configuration.initialMapSize
        options.maxMapSize = configuration.maximumMapSize
        options.durable = configuration.durable
        options.damageAdvice = RegistryError.restoreAdvice
        options.readOnly = readOnly
        options.keepsPath = keepsPath
        let environment = try Environment(path: path, options: options)
        let handles: [Database]
        do {
            handles = try Self.openDatabases(environment, path: path, readOnly: readOnly)
        } catch {
            environment.close()
            throw error
        }
        self.meta = handles[0]
        self.algorithms = handles[1]
        self.galleries = handles[2]
        self.templates = handles[3]
        self.vectors = handles[4]
        self.identifiers = handles[5]
        self.profiles = handles[6]
        self.audit = handles[7]
        self.environment = environment
        self.pageSize = environment.pageSize
    }

    /// The named databases (``databaseNames``), created when missing unless `readOnly`.
    private static func openDatabases(_ environment: Environment, path: String, readOnly: Bool) throws -> [Database] {
        guard readOnly else {
            return try environment.write { txn in try Self.databaseNames.map { name in try txn.openDatabase(name, create: true) } }
        }
        let opened = Result { () throws(LMDBError) in try environment.openExistingDatabases(Self.databaseNames) }
        if case .failure(let error) = opened, error.isNotFound {
            throw RegistryError(
                .malformedRequest,
                "\(path) lacks some of the registry's databases: it was written by an older registryd (start the daemon "
                    + "on it once, which upgrades it) or is not a registry store")
        }
        return try opened.get()
    }

    func close() {
        self.environment.close()
    }

    // MARK: Schema and counters

    /// Before an older store is migrated: a copy of it as it is, in `path/before-schema-N-<UTC time>/`
    /// (the data directory is the one place the daemon surely may write). A failed copy stops the
    /// open, with nothing changed. Returns the copy's directory, nil when no migration is due.
    @discardableResult
    func backupBeforeMigration(path: String, now: Int64 = Int64(time(nil))) throws -> String? {
        let stored = try self.environment.read { txn in try self.readUInt32(txn, Keys.schemaVersion) }
        guard let stored, stored < Self.schemaVersion else { return nil }
        let stamp = Store.stamp(now)
        let directory = "\(path)/before-schema-\(stored)-\(stamp)"
        guard mkdir(directory, 0o700) == 0 else {
            throw RegistryError(
                .internal,
                "the store needs an upgrade from schema \(stored) to \(Self.schemaVersion), and its copy could not be made first: "
                    + "cannot create \(directory): \(String(cString: strerror(errno))); nothing was changed")
        }
        do {
            try self.environment.copy(to: directory, compact: false)
        } catch {
            throw RegistryError(
                .internal,
                "the store needs an upgrade from schema \(stored) to \(Self.schemaVersion), and its copy into \(directory) failed: "
                    + "\(error); nothing was changed")
        }
        chmod(directory + "/data.mdb", 0o600)
        return directory
    }

    /// A UTC time for directory names: 20261125T093312Z.
    static func stamp(_ now: Int64 = Int64(time(nil))) -> String {
        var seconds = time_t(now)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }

    /// Checks the schema version, migrating an older store and stamping a new one.
    /// - Throws: ``RegistryError`` (`internal`) for a store written by a newer version.
    func prepareSchema(_ txn: borrowing Transaction) throws {
        guard let stored = try self.readUInt32(txn, Keys.schemaVersion) else {
            try self.writeInteger(txn, Keys.schemaVersion, Self.schemaVersion)
            return
        }
        guard stored <= Self.schemaVersion else {
            throw RegistryError(
                .internal,
                "the store has schema version \(stored), newer than this registryd's \(Self.schemaVersion); refusing to open it")
        }
        var version = stored
        while version < Self.schemaVersion {
            guard let step = Self.migrations[version] else {
                throw RegistryError(.internal, "no migration from schema version \(version)")
            }
            try step(txn, self)
            version += 1
        }
        try self.writeInteger(txn, Keys.schemaVersion, version)
    }

    /// For a read-only open, which can neither stamp nor migrate: the store must have this schema.
    func requireSchema(_ txn: borrowing Transaction) throws {
        guard let stored = try self.readUInt32(txn, Keys.schemaVersion) else {
            throw RegistryError(.malformedRequest, "the store has no schema version: it is not a registry store")
        }
        guard stored <= Self.schemaVersion else {
            throw RegistryError(
                .internal,
                "the store has schema version \(stored), newer than this registryd's \(Self.schemaVersion); check it with the registryd that wrote it"
            )
        }
        guard stored == Self.schemaVersion else {
            throw RegistryError(
                .malformedRequest,
                "the store has schema \(stored): checking it here would upgrade it to \(Self.schemaVersion); start the daemon "
                    + "(which keeps a copy of the store before upgrading) or check it with the registryd that wrote it")
        }
    }

    func readUInt32(_ txn: borrowing Transaction, _ key: [UInt8]) throws -> UInt32? {
        guard let value = try txn.get(self.meta, key: key), value.count == 4 else { return nil }
        return UInt32(littleEndian: value.loadUnaligned(as: UInt32.self))
    }

    func readUInt64(_ txn: borrowing Transaction, _ key: [UInt8]) throws -> UInt64? {
        guard let value = try txn.get(self.meta, key: key), value.count == 8 else { return nil }
        return UInt64(littleEndian: value.loadUnaligned(as: UInt64.self))
    }

    /// Reads and deletes the index snapshot's token (nil: none).
    func takeSnapshotToken(_ txn: borrowing Transaction) throws -> [UInt8]? {
        guard let value = try txn.get(self.meta, key: Keys.snapshotToken).map({ Array($0) }) else { return nil }
        _ = try txn.delete(self.meta, key: Keys.snapshotToken)
        return value
    }

    func writeInteger<T: FixedWidthInteger>(_ txn: borrowing Transaction, _ key: [UInt8], _ value: T) throws {
        var writer = ByteWriter()
        writer.append(value)
        try txn.put(self.meta, key: key, value: writer.bytes)
    }

    /// Takes the next value of a 32-bit counter (registry and gallery ids; never reused).
    func takeId(_ txn: borrowing Transaction, _ key: [UInt8]) throws -> UInt32 {
        let next = try self.readUInt32(txn, key) ?? 1
        try self.writeInteger(txn, key, next + 1)
        return next
    }

    // MARK: Algorithms and galleries

    func storedAlgorithms(_ txn: borrowing Transaction) throws -> [Algorithm] {
        var result: [Algorithm] = []
        try txn.forEach(self.algorithms) { key, value in
            result.append(try AlgorithmRecord(version: key.loadBigEndian(as: UInt32.self), decoding: value).algorithm)
            return .continue
        }
        return result
    }

    func putAlgorithm(_ txn: borrowing Transaction, _ algorithm: Algorithm) throws {
        try txn.put(self.algorithms, key: [UInt8](bigEndian: algorithm.version), value: AlgorithmRecord(algorithm).encoded())
    }

    func storedGalleries(_ txn: borrowing Transaction) throws -> [(name: String, record: GalleryRecord)] {
        var result: [(String, GalleryRecord)] = []
        try txn.forEach(self.galleries) { key, value in
            result.append((String(decoding: key, as: UTF8.self), try GalleryRecord(decoding: value)))
            return .continue
        }
        return result
    }

    func putGallery(_ txn: borrowing Transaction, name: String, _ record: GalleryRecord) throws {
        try txn.put(self.galleries, key: Array(name.utf8), value: record.encoded())
    }

    func deleteGalleryRecord(_ txn: borrowing Transaction, name: String) throws {
        try txn.delete(self.galleries, key: Array(name.utf8))
    }

    // MARK: Templates

    /// Writes a template: its metadata, its payload parts and its identifier-index entry. `id` must be
    /// greater than every stored id (ids come from the engine's counter), so all three are appends.
    func putTemplate(_ txn: borrowing Transaction, id: UInt64, record: TemplateRecord, payload: [UInt8]) throws {
        let stored = try self.storedForm(payload, id: id, cipher: self.cipher.withLock { $0 })
        var record = record
        record.payloadChecksum = CRC32C.checksum(stored)
        try txn.put(self.templates, key: Keys.template(id), value: record.encoded(id: id), flags: .append)
        try self.putParts(txn, id: id, stored: stored, append: true)
        var registry = ByteWriter()
        registry.append(record.registryId)
        try txn.put(
            self.identifiers, key: Keys.identifierEntry(record.galleryId, record.identifier, id), value: registry.bytes)
    }

    /// A payload as stored: sealed when the store is encrypted.
    private func storedForm(_ plain: [UInt8], id: UInt64, cipher: PayloadCipher?) throws -> [UInt8] {
        try cipher.map { try $0.seal(plain, templateId: id) } ?? plain
    }

    /// Writes a payload's stored bytes in parts. `append` for a new template (its id is the greatest),
    /// not for a rewrite.
    private func putParts(_ txn: borrowing Transaction, id: UInt64, stored payload: [UInt8], append: Bool) throws {
        let partSize = self.partSizes.withLock { sizes in
            if let size = sizes[payload.count] { return size }
            let size = VectorLayout.partSize(payloadBytes: payload.count, pageSize: self.pageSize)
            sizes[payload.count] = size
            return size
        }
        try payload.withUnsafeBytes { bytes in
            var part = 0
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + partSize)
                try Keys.vectorPart(id, part: part).withUnsafeBytes { key in
                    try txn.put(
                        self.vectors, key: key, value: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]),
                        flags: append ? .append : [])
                }
                part += 1
                offset = end
            }
        }
    }

    /// Replaces a template's payload, sealed with `cipher` (a key being rotated in), and its record's
    /// payload checksum.
    func rewritePayload(_ txn: borrowing Transaction, id: UInt64, payload: [UInt8], sealedWith cipher: PayloadCipher) throws {
        guard var record = try self.templateRecord(txn, id: id) else { throw StoreCorruption("template \(id): no record") }
        var part = 0
        while try txn.delete(self.vectors, key: Keys.vectorPart(id, part: part)) { part += 1 }
        let stored = try self.storedForm(payload, id: id, cipher: cipher)
        record.payloadChecksum = CRC32C.checksum(stored)
        try self.putParts(txn, id: id, stored: stored, append: false)
        try txn.put(self.templates, key: Keys.template(id), value: record.encoded(id: id))
    }

    /// Opens a stored payload (as read from its parts) when the store is encrypted.
    func openPayload(_ stored: [UInt8], id: UInt64) throws -> [UInt8] {
        try self.cipher.withLock { cipher in try cipher.map { try $0.open(stored, templateId: id) } } ?? stored
    }

    /// Deletes a template's metadata, payload parts and identifier-index entry. Returns its record,
    /// or nil when there is no such template.
    @discardableResult
    func deleteTemplate(_ txn: borrowing Transaction, id: UInt64) throws -> TemplateRecord? {
        guard let value = try txn.get(self.templates, key: Keys.template(id)) else { return nil }
        let record = try TemplateRecord(decoding: value, id: id)
        try txn.delete(self.templates, key: Keys.template(id))
        var part = 0
        while try txn.delete(self.vectors, key: Keys.vectorPart(id, part: part)) { part += 1 }
        try txn.delete(self.identifiers, key: Keys.identifierEntry(record.galleryId, record.identifier, id))
        return record
    }

    func templateRecord(_ txn: borrowing Transaction, id: UInt64) throws -> TemplateRecord? {
        guard let value = try txn.get(self.templates, key: Keys.template(id)) else { return nil }
        return try TemplateRecord(decoding: value, id: id)
    }

    /// A template's payload, reassembled from its parts, checked against its record's checksum and
    /// opened when the store is encrypted.
    /// - Throws: ``StoreCorruption`` naming the template when the record or the payload is damaged.
    func payload(_ txn: borrowing Transaction, id: UInt64) throws -> [UInt8] {
        guard let record = try self.templateRecord(txn, id: id) else { throw StoreCorruption("template \(id): no record") }
        let stored = try self.storedPayload(txn, id: id)
        guard CRC32C.checksum(stored) == record.payloadChecksum else {
            throw StoreCorruption("template \(id): its payload does not match its checksum")
        }
        return try self.openPayload(stored, id: id)
    }

    /// A template's payload bytes as stored: its parts in order (part numbers must run 0, 1, …).
    func storedPayload(_ txn: borrowing Transaction, id: UInt64) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var expected = 0
        try txn.forEach(self.vectors, from: Keys.vectorPart(id, part: 0)) { key, value in
            let (owner, part) = try Self.vectorPart(key)
            guard owner == id else { return .stop }
            guard part == expected else { throw StoreCorruption("template \(id): payload part \(part) where \(expected) belongs") }
            expected += 1
            bytes.append(contentsOf: value)
            return .continue
        }
        return bytes
    }

    /// The checksum of a template's payload as stored.
    func storedPayloadChecksum(_ txn: borrowing Transaction, id: UInt64) throws -> UInt32 {
        CRC32C.checksum(try self.storedPayload(txn, id: id))
    }

    /// The template ids of an identifier in a gallery, in registration order.
    func templateIds(_ txn: borrowing Transaction, galleryId: UInt32, identifier: String) throws -> [UInt64] {
        let prefix = Keys.identifierPrefix(galleryId, identifier)
        var ids: [UInt64] = []
        try txn.forEach(self.identifiers, from: prefix) { key, _ in
            guard key.count == prefix.count + 8, key.starts(with: prefix) else { return .stop }
            ids.append(key.loadBigEndian(at: prefix.count, as: UInt64.self))
            return .continue
        }
        return ids
    }

    /// Every template id of a gallery.
    func templateIds(_ txn: borrowing Transaction, galleryId: UInt32) throws -> [UInt64] {
        let prefix = Keys.galleryPrefix(galleryId)
        var ids: [UInt64] = []
        try txn.forEach(self.identifiers, from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return .stop }
            guard key.count >= prefix.count + 10 else { throw StoreCorruption("an identifier-index key of \(key.count) bytes") }
            ids.append(key.loadBigEndian(at: key.count - 8, as: UInt64.self))
            return .continue
        }
        return ids
    }

    /// Up to `limit` distinct identifiers of a gallery after `after` (exclusive), in byte order, and
    /// whether more follow.
    func identifierPage(
        _ txn: borrowing Transaction, galleryId: UInt32, after: String?, limit: Int
    ) throws -> (identifiers: [String], more: Bool) {
        let prefix = Keys.galleryPrefix(galleryId)
        // 0x01 sorts after the 0x00 that ends `after` and before every byte an identifier may contain.
        let start = after.map { prefix + Array($0.utf8) + [1] } ?? prefix
        var result: [String] = []
        var more = false
        try txn.forEach(self.identifiers, from: start) { key, _ in
            guard key.starts(with: prefix) else { return .stop }
            guard key.count >= prefix.count + 10 else { throw StoreCorruption("an identifier-index key of \(key.count) bytes") }
            let name = String(decoding: key[prefix.count..<(key.count - 9)], as: UTF8.self)
            // By bytes: `==` takes a canonically equivalent twin (its key sorts next to this one's)
            // for the same identifier, and the listing would drop a person.
            if let last = result.last, last.sameIdentifier(as: name) { return .continue }
            if result.count == limit {
                more = true
                return .stop
            }
            result.append(name)
            return .continue
        }
        return (result, more)
    }

    /// Erases an identifier's liveness profile, if any.
    func deleteProfile(_ txn: borrowing Transaction, galleryId: UInt32, identifier: String) throws {
        try txn.delete(self.profiles, key: Keys.profile(galleryId, identifier))
    }

    /// Erases every liveness profile of a gallery.
    func deleteProfiles(_ txn: borrowing Transaction, galleryId: UInt32) throws {
        let prefix = Keys.galleryPrefix(galleryId)
        var keys: [[UInt8]] = []
        try txn.forEach(self.profiles, from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return .stop }
            keys.append(Array(key))
            return .continue
        }
        for key in keys { try txn.delete(self.profiles, key: key) }
    }

    /// Microseconds since the Unix epoch.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1_000
    }
}
