import Glibc
import LMDB
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Per-record checksums: checked at open (a damaged record or payload refuses the store, naming the
/// template and the recovery) and by `verify`, which checks the store against itself.
@Suite struct StoreChecksTests {
    @Test func crc32cMatchesTheCastagnoliCheckValueInOneOrManyUpdates() {
        let text = Array("123456789".utf8)
        #expect(CRC32C.checksum(text) == 0xE306_9283)
        let long = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var pieces = CRC32C()
        for chunk in stride(from: 0, to: long.count, by: 13) { pieces.update(Array(long[chunk..<min(long.count, chunk + 13)])) }
        #expect(pieces.value == CRC32C.checksum(long))
        #expect(CRC32C.checksum([]) == 0)
        // The crc32 instruction (where the CPU has it) and the tables agree, at every length and offset;
        // from three stripes of 8 KiB (24,576 bytes) the instruction runs on three stripes at once.
        var random = SeededGenerator(seed: 8)
        let bytes = (0..<(2 * 24_576 + 4099)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        bytes.withUnsafeBytes { raw in
            let pairs = [
                (0, 4099), (1, 4098), (3, 11), (5, 5), (7, 64), (0, 8), (0, 24_575), (0, 24_576), (1, 24_578), (3, 49_152 + 3),
                (5, 49_152 + 4097), (0, bytes.count),
            ]
            for (start, end) in pairs {
                let part = UnsafeRawBufferPointer(rebasing: raw[start..<end])
                var tables = CRC32C()
                tables.updateWithTables(part)
                #expect(CRC32C.checksum(part) == tables.value, "bytes \(start)..<\(end)")
            }
        }
    }

    /// Flips one bit of a stored value of `database` (the `index`-th entry) inside a write transaction.
    static func flipBit(_ engine: Engine, in database: KeyPath<Store, Database>, entry index: Int, byte: Int) throws {
        try engine.store.environment.write { txn in
            var target: ([UInt8], [UInt8])?
            var position = 0
            try txn.forEach(engine.store[keyPath: database]) { key, value in
                if position == index { target = (Array(key), Array(value)) }
                position += 1
                return target == nil ? .continue : .stop
            }
            guard let (key, original) = target else {
                Issue.record("this guard did not hold: let (key, original) = target")
                return
            }
            var value = original
            value[byte % value.count] ^= 0x10
            try txn.put(engine.store[keyPath: database], key: key, value: value)
        }
    }

    static func registerSome(_ engine: Engine) async throws -> [UInt64] {
        var ids: [UInt64] = []
        for index in 0..<5 {
            ids.append(try await engine.register(identifier: "person-\(index)", face: Face(arcface([index, index + 5]))).stored[0].id)
        }
        return ids
    }

    /// The error of reopening a store of five templates after `damage` (given their ids) was done to it.
    /// - Parameter snapshot: whether the close before the reopen writes an index snapshot (which the
    ///   reopen's load then takes in, decoding the records on its second thread).
    static func reopenAfter(snapshot: Bool = false, _ damage: (Engine, [UInt64]) throws -> Void) async throws -> (RegistryError?, [UInt64]) {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let ids: [UInt64]
        do {
            let engine = try Engine(
                path: directory.path, configuration: IndexSnapshotTests.configuration(minimum: snapshot ? 0 : Int.max, resident: true))
            ids = try await Self.registerSome(engine)
            try damage(engine, ids)
            engine.close()
        }
        #expect(IndexSnapshotTests.snapshotExists(directory) == snapshot)
        return (await expectRegistryError(.internal) { _ = try Engine(path: directory.path) }, ids)
    }

    /// Flips a bit of a template's first payload part.
    static func damagePayload(_ engine: Engine, id: UInt64, byte: Int) throws {
        try engine.store.environment.write { txn in
            let key = Keys.vectorPart(id, part: 0)
            var value = try #require(try txn.get(engine.store.vectors, key: key).map { Array($0) })
            value[byte] ^= 0x01
            try txn.put(engine.store.vectors, key: key, value: value)
        }
    }

    /// Seen in the bit-flip trial: a flipped page number in the free list makes the opening
    /// transaction's commit write far beyond the file, and the kernel answers EFBIG. The operator
    /// must read damage and the recovery, not only "File too large".
    @Test func aCommitAtOpenFailingWithFileTooLargeIsReportedAsProbableDamage() {
        let error = RegistryError.opening("/var/lib/registryd", LMDBError(code: EFBIG, operation: "mdb_txn_commit"))
        let message = (error as? RegistryError)?.message ?? "\(error)"
        #expect(message.contains("cannot open the store in /var/lib/registryd"))
        #expect(message.contains("File too large") && message.contains("damaged") && message.contains("ulimit -f"))
        #expect(message.contains(RegistryError.restoreAdvice))
    }

    /// `verify` on an open store checks the trees' structure first, as the open does: a page header
    /// damaged under the running engine is reported by page and database (and nothing past it is
    /// walked); once the bytes are put back, the next verify is clean.
    @Test func verifyReportsStructuralDamageOfTheOpenStoreAndIsCleanOnceRepaired() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        _ = try await Self.registerSome(engine)
        #expect(try await engine.verify().problems == [])
        // The main database's root (the newer meta page's record): its header's page number.
        let fd = open(directory.path + "/data.mdb", O_RDWR)
        defer { close(fd) }
        func read(_ offset: Int) -> UInt64 {
            var value: UInt64 = 0
            #expect(pread(fd, &value, 8, off_t(offset)) == 8)
            return value
        }
        let meta = read(4096 + 144) > read(144) ? 4096 : 0
        let root = read(meta + 88 + 40)
        let header = Int(root) * 4096
        #expect(read(header) == root)
        var wrong = root + 1000
        #expect(pwrite(fd, &wrong, 8, off_t(header)) == 8)
        let damaged = try await engine.verify()
        #expect(damaged.problems.count == 1 && damaged.checked == 0)
        #expect(damaged.problems.first?.contains("the structure of data.mdb is damaged") == true, "\(damaged.problems)")
        #expect(damaged.problems.first?.contains("page \(root) of the main database") == true, "\(damaged.problems)")
        var original = root
        #expect(pwrite(fd, &original, 8, off_t(header)) == 8)
        let repaired = try await engine.verify()
        #expect(repaired.problems == [] && repaired.checked == 5)
    }

    @Test(arguments: [false, true])
    func aDamagedTemplateRecordRefusesTheStoreNamingTheTemplateAndTheRecovery(snapshot: Bool) async throws {
        let (error, ids) = try await Self.reopenAfter(snapshot: snapshot) { engine, _ in
            try Self.flipBit(engine, in: \.templates, entry: 2, byte: 9)
        }
        #expect(error?.message.contains("template \(ids[2])") == true, "\(String(describing: error))")
        #expect(error?.message.contains("damaged") == true && error?.message.contains("registryctl backup") == true)
    }

    @Test func aDamagedPayloadRefusesTheStoreNamingTheTemplate() async throws {
        let (error, ids) = try await Self.reopenAfter { engine, ids in try Self.damagePayload(engine, id: ids[3], byte: 17) }
        #expect(error?.message.contains("template \(ids[3]): its payload does not match its checksum") == true, "\(String(describing: error))")
    }

    /// The index was loaded before the damage, so comparing against it alone cannot see that the
    /// store changed in ways the index does not show; verify checks the store against itself.
    @Test func verifyChecksTheStoreAgainstItself() async throws {
        try await withEngine { engine in
            let ids = try await Self.registerSome(engine)
            #expect(try await engine.verify().problems.isEmpty)
            try Self.flipBit(engine, in: \.templates, entry: 0, byte: 3)
            try Self.damagePayload(engine, id: ids[1], byte: 0)
            try engine.store.environment.write { txn in
                // An identifier-index entry dropped, and one for a template that does not exist.
                #expect(try txn.delete(engine.store.identifiers, key: Keys.identifierEntry(1, "person-2", ids[2])))
                try txn.put(engine.store.identifiers, key: Keys.identifierEntry(1, "ghost", 999), value: [1, 0, 0, 0])
            }
            let problems = try await engine.verify().problems
            #expect(problems.contains("template \(ids[0]): its record does not match its checksum"), "\(problems)")
            #expect(problems.contains("template \(ids[1]): its payload does not match its checksum"), "\(problems)")
            #expect(problems.contains("template \(ids[2]) is missing from the identifier index"), "\(problems)")
            #expect(problems.contains { $0.contains("template 999 of 'ghost', which has no record") }, "\(problems)")
            #expect(!problems.contains { $0.contains("person-3") || $0.contains("template \(ids[3])") })
        }
    }

    @Test func aSchema2StoreGainsChecksumsInTheOpeningTransaction() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let before: StoreSnapshot
        do {
            let engine = try Engine(path: directory.path)
            _ = try await Self.registerSome(engine)
            _ = try await engine.register(identifier: "lena", face: Face(landmarkFace(seed: 1)))
            before = try await StoreSnapshot(engine)
            // Rewrite the records as schema 2 stored them: no checksums.
            try engine.store.environment.write { txn in
                var records: [(UInt64, TemplateRecord)] = []
                try txn.forEach(engine.store.templates) { key, value in
                    let id = try Store.templateId(key)
                    records.append((id, try TemplateRecord(decoding: value, id: id)))
                    return .continue
                }
                for (id, record) in records { try txn.put(engine.store.templates, key: Keys.template(id), value: record.encodedFields()) }
                try engine.store.writeInteger(txn, Keys.schemaVersion, UInt32(2))
            }
            engine.close()
        }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        #expect(try engine.store.environment.read { txn in try engine.store.readUInt32(txn, Keys.schemaVersion) } == Store.schemaVersion)
        #expect(try await StoreSnapshot(engine) == before)
        #expect(try await engine.verify().problems.isEmpty)
        // The migrated checksums are real: damage after the migration is caught.
        try Self.flipBit(engine, in: \.vectors, entry: 0, byte: 5)
        #expect(try await engine.verify().problems.count == 1)
    }

    @Test func anEncryptedStoreChecksumsTheSealedBytesAcrossAKeyRotation() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let key = [UInt8](repeating: 7, count: 32)
        let rotated = [UInt8](repeating: 9, count: 32)
        func configuration(_ key: [UInt8]) -> EngineConfiguration {
            var configuration = EngineConfiguration()
            configuration.encryptionKey = key
            return configuration
        }
        let before: StoreSnapshot
        do {
            let engine = try Engine(path: directory.path, configuration: configuration(key))
            _ = try await Self.registerSome(engine)
            #expect(try await engine.setEncryptionKey(rotated) == 5)
            #expect(try await engine.verify().problems.isEmpty)
            before = try await StoreSnapshot(engine)
            engine.close()
        }
        let engine = try Engine(path: directory.path, configuration: configuration(rotated))
        defer { engine.close() }
        #expect(try await StoreSnapshot(engine) == before)
        try Self.flipBit(engine, in: \.vectors, entry: 2, byte: 40)
        let problems = try await engine.verify().problems
        #expect(problems.count == 1 && problems[0].contains("its payload does not match its checksum"), "\(problems)")
    }
}

/// Storage errors say what happened (a tmpfs fills with ENOSPC; other file systems fail the commit's
/// write or fsync with EIO, which the daemon answered as INTERNAL "Input/output error").
@Suite struct StorageErrorTests {
    @Test(arguments: [ENOSPC, EDQUOT, EIO])
    func aFullOrFailingDiskIsStorageFull(code: Int32) {
        let error = RegistryError.storage(LMDBError(code: code, operation: "mdb_txn_commit"))
        #expect(error.code == .storageFull)
    }

    @Test func theMapAtItsMaximumIsStorageFull() {
        #expect(RegistryError.storage(LMDBError(code: -30792 /* MDB_MAP_FULL */, operation: "mdb_put")).code == .storageFull)
    }

    @Test func permissionAndReadOnlyErrorsAreNamed() {
        #expect(RegistryError.storage(LMDBError(code: EACCES, operation: "mdb_txn_commit")).message.contains("not writable (permission denied)"))
        #expect(RegistryError.storage(LMDBError(code: EPERM, operation: "mdb_txn_commit")).message.contains("not writable (permission denied)"))
        #expect(RegistryError.storage(LMDBError(code: EROFS, operation: "mdb_txn_commit")).message.contains("read-only file system"))
    }

    @Test func lmdbsOwnDamageChecksSayTheStoreIsDamagedAndTheRecovery() {
        for code: Int32 in [-30796 /* MDB_CORRUPTED */, -30797 /* MDB_PAGE_NOTFOUND */, -30782 /* MDB_BAD_TXN */] {
            let message = RegistryError.storage(LMDBError(code: code, operation: "mdb_cursor_get(templates)")).message
            #expect(message.contains("the store is damaged") && message.contains("registryctl backup"), "\(message)")
        }
    }
}
