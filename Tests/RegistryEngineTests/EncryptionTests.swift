import Glibc
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Templates at rest encrypted with AES-GCM.
@Suite struct EncryptionTests {
    static let key1 = [UInt8](repeating: 0x11, count: 32)
    static let key2 = Array("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n".utf8)  // hex form

    /// A template whose bytes are easy to find in a file.
    static let distinctive: [Float] = (0..<128).map { Float($0 + 1) / 1000 }

    /// The first 32 bytes of the template as the engine stores it (normalised float32s).
    static var storedPrefix: [UInt8] {
        let norm = Self.distinctive.reduce(0) { $0 + Double($1) * Double($1) }.squareRoot()
        let stored = Self.distinctive.map { Float(Double($0) / norm) }
        return Array(stored.prefix(8).withUnsafeBytes { Array($0) })
    }

    func open(_ directory: TemporaryDirectory, key: [UInt8]?) throws -> Engine {
        var configuration = EngineConfiguration()
        configuration.encryptionKey = key
        return try Engine(path: directory.path, configuration: configuration)
    }

    @Test func templateBytesDoNotAppearInTheStoreFileWhenEncrypted() async throws {
        for encrypted in [false, true] {
            let directory = TemporaryDirectory()
            defer { directory.remove() }
            let engine = try self.open(directory, key: encrypted ? Self.key1 : nil)
            _ = try await engine.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: Self.distinctive)))
            engine.close()
            // The control proves the search finds the bytes when they are there.
            #expect(try DataFileScan(directory: directory.path).contains(Self.storedPrefix) == !encrypted, "encrypted: \(encrypted)")
        }
    }

    @Test func anEncryptedStoreOpensWithItsKeyAndRefusesAWrongOrMissingOne() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let before: StoreSnapshot
        do {
            let engine = try self.open(directory, key: Self.key1)
            _ = try await engine.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: Self.distinctive)))
            _ = try await engine.register(identifier: "lena", face: Face(landmarkFace(seed: 1)))
            before = try await StoreSnapshot(engine)
            engine.close()
        }
        let wrong = await expectRegistryError(.internal) { _ = try self.open(directory, key: Self.key2) }
        #expect(wrong?.message.contains("does not open") == true)
        let missing = await expectRegistryError(.internal) { _ = try self.open(directory, key: nil) }
        #expect(missing?.message.contains("encrypted") == true)
        let engine = try self.open(directory, key: Self.key1)
        defer { engine.close() }
        #expect(try await StoreSnapshot(engine) == before)
        let result = try await engine.identify(
            face: Face(FaceTemplate(algorithm: 24, vector: Self.distinctive)), safe: false, autoEnrol: false)
        #expect(result.matches.map(\.identifier) == ["alice"])
    }

    @Test func anUnencryptedStoreIsEncryptedAndAKeyRotatedKeepingEveryTemplate() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var snapshot: StoreSnapshot
        do {
            let engine = try self.open(directory, key: nil)
            try await Scenario.run(on: engine)
            _ = try await engine.register(identifier: "marker", face: Face(FaceTemplate(algorithm: 24, vector: Self.distinctive)))
            snapshot = try await StoreSnapshot(engine)
            // A key for a store with plain templates is refused until it is encrypted.
            #expect(try await engine.setEncryptionKey(Self.key1) > 0)
            #expect(try await StoreSnapshot(engine) == snapshot)
            // LMDB does not wipe freed pages: the live file may still hold the old plaintext pages
            // until they are reused. A compacting copy (backup) leaves free pages out, so it is clean.
            let (copy, _) = try await engine.backup()
            #expect(try !DataFileScan(directory: copy).contains(Self.storedPrefix), "a compacted encrypted copy must hold no template bytes")
            _ = system("rm -rf '\(engine.backupRoot)'")
            engine.close()
        }
        await expectRegistryError(.internal) { _ = try self.open(directory, key: nil) }
        do {
            let engine = try self.open(directory, key: Self.key1)
            #expect(try await StoreSnapshot(engine) == snapshot)
            _ = try await engine.setEncryptionKey(Self.key2)  // rotation
            engine.close()
        }
        await expectRegistryError(.internal) { _ = try self.open(directory, key: Self.key1) }
        let engine = try self.open(directory, key: Self.key2)
        defer { engine.close() }
        #expect(try await StoreSnapshot(engine) == snapshot)
        #expect(try await engine.verify().problems.isEmpty)
    }

    @Test func aKeyForAStoreWithUnencryptedTemplatesIsRefused() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        do {
            let engine = try self.open(directory, key: nil)
            _ = try await engine.register(identifier: "alice", face: Face(arcface()))
            engine.close()
        }
        let refusal = await expectRegistryError(.internal) { _ = try self.open(directory, key: Self.key1) }
        #expect(refusal?.message.contains("unencrypted") == true)
        #expect(throws: RegistryError.self) { _ = try PayloadCipher(keyMaterial: Array("short".utf8)) }
    }
}
