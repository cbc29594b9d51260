import Crypto
import FoundationEssentials
import Glibc
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Every backup carries a manifest that describes exactly the file beside it.
@Suite struct BackupManifestTests {
    struct Manifest: Decodable {
        struct Gallery: Decodable {
            struct Registry: Decodable {
                var algorithm: UInt32
                var name: String
                var templates: Int
                var identifiers: Int
            }
            var name: String
            var registries: [Registry]
        }
        var format: Int
        var registrydVersion: String
        var schemaVersion: UInt32
        var createdAt: String
        var file: String
        var bytes: Int
        var sha256: String
        var galleries: [Gallery]
    }

    /// Manifests written before the time was ISO 8601 held Unix seconds: both read as the same time.
    @Test func manifestTimesReadInEitherForm() throws {
        let decoder = JSONDecoder()
        let old = try decoder.decode(BackupManifest.Time.self, from: Data("1796000000".utf8))
        let new = try decoder.decode(BackupManifest.Time.self, from: Data(#""2026-11-30T00:53:20Z""#.utf8))
        #expect(old.seconds == 1_796_000_000 && new.seconds == 1_796_000_000)
        #expect(String(decoding: try JSONEncoder().encode(old), as: UTF8.self) == #""2026-11-30T00:53:20Z""#)
        #expect(throws: DecodingError.self) { try decoder.decode(BackupManifest.Time.self, from: Data(#""yesterday""#.utf8)) }
        // Written and read back: the epoch, a leap day, the end of a year, the far future.
        for seconds: Int64 in [0, 951_782_400, 1_709_164_800, 1_798_761_599, 4_102_444_800] {
            #expect(BackupManifest.Time.parse(BackupManifest.Time(seconds: seconds).text) == seconds, "\(BackupManifest.Time(seconds: seconds).text)")
        }
    }

    @Test func aBackupCarriesAManifestOfItsOwnFile() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var configuration = EngineConfiguration()
        configuration.backupDirectory = directory.path + "/backups/"
        try await withEngine(configuration) { engine in
            _ = try await engine.defineGallery(
                GalleryConfiguration(name: "door", registries: [RegistryConfiguration(algorithm: 24), RegistryConfiguration(algorithm: 16)]))
            for index in 0..<5 {
                _ = try await engine.register(gallery: "door", identifier: "p\(index)", face: Face(arcface([index])), force: true)
            }
            _ = try await engine.register(gallery: "door", identifier: "p0", face: Face(arcface([7, 9])), force: true)
            _ = try await engine.register(identifier: "ann", face: Face(arcface([3])), force: true)
            let before = Int64(time(nil))
            let (copy, bytes) = try await engine.backup()
            // A new directory of the root (made at the first backup), named by the start time, and
            // everything in it the daemon's user's alone.
            let name = String(copy.dropFirst((directory.path + "/backups/").count))
            #expect(copy.hasPrefix(directory.path + "/backups/") && BackupName.parse(name) != nil, "\(copy)")
            #expect(BackupName.parse(name).map { $0.time >= before && $0.time <= Int64(time(nil)) } == true)
            for (path, mode) in [(directory.path + "/backups", 0o700), (copy, 0o700), (copy + "/data.mdb", 0o600), (copy + "/manifest.json", 0o600)] {
                var info = stat()
                #expect(lstat(path, &info) == 0 && Int(info.st_mode & 0o7777) == mode, "\(path)")
            }
            // A second one in the same second takes the next name.
            let (second, _) = try await engine.backup(into: directory.path + "/backups")
            #expect(second.hasPrefix(directory.path + "/backups/") && second != copy)

            let text = String(decoding: try #require(readFileBytes(copy + "/manifest.json")), as: UTF8.self)
            let manifest = try JSONDecoder().decode(Manifest.self, from: Data(text.utf8))
            #expect(manifest.format == 1 && manifest.file == "data.mdb")
            #expect(manifest.registrydVersion == RegistryVersion.current && manifest.schemaVersion == Store.schemaVersion)
            // ISO 8601 in UTC, as the backup's name gives its time.
            let created = try #require(BackupManifest.Time.parse(manifest.createdAt), "\(manifest.createdAt)")
            #expect(created >= before && created <= Int64(time(nil)))
            #expect(manifest.createdAt.count == 20 && manifest.createdAt.hasSuffix("Z") && manifest.createdAt.contains("T"))
            var info = stat()
            #expect(stat(copy + "/data.mdb", &info) == 0 && Int(info.st_size) == manifest.bytes && manifest.bytes == bytes)
            let file = try #require(readFileBytes(copy + "/data.mdb"))
            #expect(manifest.sha256 == SHA256.hash(data: file).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
            let door = try #require(manifest.galleries.first { $0.name == "door" })
            #expect(door.registries.map(\.name) == ["arcface", "dlib"])
            #expect(door.registries.map(\.templates) == [6, 0] && door.registries.map(\.identifiers) == [5, 0])
            #expect(manifest.galleries.first { $0.name == "default" }?.registries.first?.templates == 1)
            // Nothing of the manifest's reading is left behind, and nothing personal is in it.
            #expect(access(copy + "/lock.mdb", F_OK) != 0 && access(copy + "/exclusive.lock", F_OK) != 0)
            #expect(!text.contains("p0") && !text.contains("ann"))
            // The copy is a store that opens and verifies.
            let restored = try Engine(path: copy)
            defer { restored.close() }
            #expect(try await restored.verify().problems.isEmpty)
        }
    }

    @Test func theManifestCountsCanonicallyEquivalentIdentifiersAsTheDifferentPeopleTheyAre() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var configuration = EngineConfiguration()
        configuration.backupDirectory = directory.path + "/backups/"
        try await withEngine(configuration) { engine in
            // Precomposed ë and e + combining diaeresis: one string to Swift, two keys in the store.
            _ = try await engine.register(identifier: "Zo\u{EB}", face: Face(arcface()))
            _ = try await engine.register(identifier: "Zoe\u{308}", face: Face(arcface(flips(0, 8))))
            #expect(try engine.gallery("default").identifierCount == 2)
            let (copy, _) = try await engine.backup()
            let manifest = try JSONDecoder().decode(Manifest.self, from: Data(try #require(readFileBytes(copy + "/manifest.json"))))
            let registry = try #require(manifest.galleries.first { $0.name == "default" }?.registries.first)
            #expect(registry.templates == 2 && registry.identifiers == 2)
        }
    }
}
