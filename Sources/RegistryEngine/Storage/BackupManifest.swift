import Crypto
import FoundationEssentials
import Glibc
import LMDB
import RegistryModel

/// What a backup holds, written beside its `data.mdb` as `manifest.json`: the registryd and schema
/// versions, when, the file's size and SHA-256, and per gallery and registry how many templates and
/// identifiers — counted in the copy itself, so the manifest describes exactly the file next to it.
/// A restore checks the file against it before trusting the copy. No identifiers, no templates.
struct BackupManifest: Sendable, Equatable, Codable {
    struct Registry: Sendable, Equatable, Codable {
        var algorithm: UInt32
        var name: String
        var templates: Int
        var identifiers: Int
    }
    struct Gallery: Sendable, Equatable, Codable {
        var name: String
        var registries: [Registry]
    }

    /// The manifest's own layout, and the file it describes (always data.mdb beside it).
    var format = 1
    var file = "data.mdb"
    var registrydVersion = RegistryVersion.current
    var schemaVersion: UInt32
    var createdAt: Time
    var bytes: Int
    var sha256: String
    var galleries: [Gallery]

    static let fileName = "manifest.json"

    /// When the backup was made, in whole seconds: written in ISO 8601 (UTC, as the backup's
    /// directory is named), read in that form or as the Unix seconds manifests held before.
    struct Time: Sendable, Equatable, Codable {
        var seconds: Int64

        init(seconds: Int64) { self.seconds = seconds }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let seconds = try? container.decode(Int64.self) {
                self.seconds = seconds
                return
            }
            let text = try container.decode(String.self)
            guard let seconds = Self.parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "createdAt is not an ISO 8601 UTC time")
            }
            self.seconds = seconds
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(self.text)
        }

        /// `2026-11-29T01:40:12Z`.
        var text: String {
            var time = time_t(self.seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            var buffer = [CChar](repeating: 0, count: 32)
            let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
            return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }

        /// The seconds of `YYYY-MM-DDTHH:MM:SSZ`, nil for anything else, an impossible date (a 30
        /// February, an hour 24) included: read back the way ``BackupName/parse(_:)`` reads a backup's
        /// name, by `timegm` and a comparison with the time written again.
        static func parse(_ text: String) -> Int64? {
            let bytes = Array(text.utf8)
            guard bytes.count == 20 else { return nil }
            func number(_ range: Range<Int>) -> Int32? {
                guard bytes[range].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
                return bytes[range].reduce(0) { $0 * 10 + Int32($1 - UInt8(ascii: "0")) }
            }
            guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
                let minute = number(14..<16), let second = number(17..<19)
            else { return nil }
            var parts = tm()
            (parts.tm_year, parts.tm_mon, parts.tm_mday) = (year - 1900, month - 1, day)
            (parts.tm_hour, parts.tm_min, parts.tm_sec) = (hour, minute, second)
            let seconds = Int64(timegm(&parts))
            // timegm normalises what is out of range (31 April becomes 1 May): not a time we write.
            return Time(seconds: seconds).text == text ? seconds : nil
        }
    }

    /// Reads the copy in `directory` (its `data.mdb`), read-only, and describes it. `keepsPath`: open
    /// `directory` as given (a `/proc/self/fd/N` name of a directory held open, see ``Store``).
    static func describe(
        directory: String, catalog: AlgorithmCatalog, now: Int64 = Int64(time(nil)), keepsPath: Bool = false
    ) throws -> BackupManifest {
        let store = try Store(path: directory, configuration: EngineConfiguration(), readOnly: true, keepsPath: keepsPath)
        defer { store.close() }
        let (schema, galleries) = try store.environment.read { txn in
            let schema = try store.readUInt32(txn, Keys.schemaVersion) ?? 0
            var templates: [UInt32: Int] = [:]
            // By bytes, as the store tells identifiers apart: a `Set<String>` counts canonically
            // equivalent twins as one.
            var identifiers: [UInt32: Set<IdentifierKey>] = [:]
            try txn.forEach(store.templates) { key, value in
                let record = try TemplateRecord(decoding: value, id: try Store.templateId(key))
                templates[record.registryId, default: 0] += 1
                identifiers[record.registryId, default: []].insert(IdentifierKey(record.identifier))
                return .continue
            }
            let galleries = try store.storedGalleries(txn).sorted { $0.name.identifierPrecedes($1.name) }.map { name, record in
                Gallery(
                    name: name,
                    registries: record.registries.map { entry in
                        Registry(
                            algorithm: entry.algorithm, name: (try? catalog.algorithm(version: entry.algorithm).name) ?? "unknown",
                            templates: templates[entry.id, default: 0], identifiers: identifiers[entry.id]?.count ?? 0)
                    })
            }
            return (schema, galleries)
        }
        let (bytes, digest) = try Self.digest(of: directory + "/data.mdb")
        return BackupManifest(schemaVersion: schema, createdAt: Time(seconds: now), bytes: bytes, sha256: digest, galleries: galleries)
    }

    /// The size and SHA-256 (hex) of a file, read in 1 MiB pieces.
    static func digest(of path: String) throws(RegistryError) -> (bytes: Int, sha256: String) {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { throw RegistryError(.internal, "cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(file) }
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw RegistryError(.internal, "cannot read \(path): \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            hasher.update(data: buffer[0..<count])
            total += count
        }
        return (total, hasher.finalize().map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined())
    }

    /// Whether `directory/data.mdb` is the file this manifest describes (size and SHA-256).
    func describesFile(in directory: String) throws(RegistryError) -> Bool {
        let (bytes, digest) = try Self.digest(of: directory + "/data.mdb")
        return bytes == self.bytes && digest == self.sha256
    }

    /// Writes `manifest.json` into the directory open as `directory` (`path` names it in messages):
    /// a new file (never one already there, never through a symbolic link), 0600, as it names the
    /// galleries.
    func write(into directory: Int32, path: String) throws(RegistryError) {
        let path = path + "/" + Self.fileName
        let file = openat(directory, Self.fileName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw RegistryError(.internal, "cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(file) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let bytes: [UInt8]
        do {
            bytes = Array(try encoder.encode(self)) + [0x0A]
        } catch {
            throw RegistryError(.internal, "cannot encode the manifest: \(error)")
        }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(file, $0.baseAddress! + written, $0.count - written) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw RegistryError(.internal, "cannot write \(path): \(String(cString: strerror(errno)))") }
            written += count
        }
        guard fsync(file) == 0 else { throw RegistryError(.internal, "cannot write \(path): \(String(cString: strerror(errno)))") }
    }
}
