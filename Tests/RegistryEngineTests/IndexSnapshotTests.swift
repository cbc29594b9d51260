import Glibc
import LMDB
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// The index snapshot: written at a clean close, mapped by the next open instead of loading every
/// payload, and used only when it is exactly what the store holds; anything else is a full load with
/// the same results.
@Suite struct IndexSnapshotTests {
    static let gallery = "snap"

    /// - Parameter resident: whether the vector registry keeps its rows in memory (and the snapshot
    ///   holds them) or reads them from the store, as a million-template one does.
    static func configuration(minimum: Int = 0, resident: Bool = false) -> EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.snapshotMinimumTemplates = minimum
        if !resident { configuration.residentRowBytes = 0 }
        return configuration
    }

    static func randomVector(_ random: inout SeededGenerator, dimension: Int = 128) -> [Float] {
        (0..<dimension).map { _ in Float(random.normal()) }
    }

    /// A store of 3,000 arcface templates of 1,000 people (enough for the prefilter's codes to be
    /// used) and 40 landmark templates, with some deleted so that rows are no longer in id order.
    static func populate(_ engine: Engine) async throws -> [[Float]] {
        _ = try await engine.defineGallery(
            GalleryConfiguration(
                name: Self.gallery,
                registries: [
                    RegistryConfiguration(
                        algorithm: Algorithm.arcface.version, thresholds: Thresholds(authentication: 0.45, identification: 0.45, autoEnrolment: 1)),
                    RegistryConfiguration(
                        algorithm: Algorithm.landmarks.version, thresholds: Thresholds(authentication: 0.1, identification: 0.1, autoEnrolment: 1)),
                ]))
        var random = SeededGenerator(seed: 31)
        let vectors = (0..<3000).map { _ in Self.randomVector(&random) }
        let items = vectors.enumerated().map { index, vector in
            ImportItem(identifier: "p\(index % 1000)", template: FaceTemplate(algorithm: Algorithm.arcface.version, vector: vector))
        }
        let ids = try await engine.importTemplates(gallery: Self.gallery, items)
        let landmarks = (0..<40).map { ImportItem(identifier: "p\($0)", template: landmarkFace(seed: $0, jitter: Float($0 % 7))) }
        _ = try await engine.importTemplates(gallery: Self.gallery, landmarks)
        for id in ids.prefix(500) where id % 7 == 0 { #expect(try await engine.deleteTemplate(gallery: Self.gallery, id: id)) }
        return vectors
    }

    /// What identification answers for a set of queries: noisy copies of stored vectors, strangers,
    /// and landmark faces.
    static func answers(_ engine: Engine, _ vectors: [[Float]]) async throws -> [[IdentifyMatch]] {
        var random = SeededGenerator(seed: 77)
        var faces: [FaceTemplate] = []
        for index in stride(from: 0, to: vectors.count, by: 97) {
            let noisy = zip(vectors[index], Self.randomVector(&random)).map { $0 + 0.6 * $1 }
            faces.append(FaceTemplate(algorithm: Algorithm.arcface.version, vector: noisy))
        }
        faces += (0..<5).map { _ in FaceTemplate(algorithm: Algorithm.arcface.version, vector: Self.randomVector(&random)) }
        faces += (0..<5).map { landmarkFace(seed: $0 * 3, jitter: 2) }
        var result: [[IdentifyMatch]] = []
        for face in faces {
            result.append(try await engine.identify(gallery: Self.gallery, face: Face(face), safe: false, autoEnrol: false, limit: 10).matches)
        }
        return result
    }

    /// A populated store, closed (so with a snapshot), and its answers before the close.
    static func closedStore(_ directory: TemporaryDirectory, resident: Bool = false) async throws -> ([[Float]], [[IdentifyMatch]]) {
        let engine = try Engine(path: directory.path, configuration: Self.configuration(resident: resident))
        defer { engine.close() }
        let vectors = try await Self.populate(engine)
        return (vectors, try await Self.answers(engine, vectors))
    }

    /// Registers one random face as `identifier`: a change of the index.
    static func registerNewcomer(_ engine: Engine, _ identifier: String, seed: UInt64) async throws -> Registration {
        var random = SeededGenerator(seed: seed)
        return try await engine.register(
            gallery: Self.gallery, identifier: identifier,
            face: Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: Self.randomVector(&random))))
    }

    /// Opens the store, which must map its snapshot, and expects `answers`.
    static func expectSnapshotLoad(_ directory: TemporaryDirectory, vectors: [[Float]], answers: [[IdentifyMatch]]) async throws {
        let engine = try Engine(path: directory.path, configuration: Self.configuration())
        defer { engine.close() }
        #expect(engine.indexLoad.fromSnapshot, "\(engine.indexLoad)")
        #expect(try await Self.answers(engine, vectors) == answers)
    }

    static func snapshotExists(_ directory: TemporaryDirectory) -> Bool {
        access(IndexSnapshot.path(in: directory.path), F_OK) == 0
    }

    static func hasToken(_ engine: Engine) throws -> Bool {
        try engine.store.environment.read { txn in try txn.get(engine.store.meta, key: Keys.snapshotToken) != nil }
    }

    @Test(arguments: [false, true])
    func aCleanCloseWritesASnapshotThatTheNextOpenMapsWithTheSameAnswers(resident: Bool) async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let vectors: [[Float]]
        let before: [[IdentifyMatch]]
        let stored: StoreSnapshot
        do {
            let engine = try Engine(path: directory.path, configuration: Self.configuration(resident: resident))
            #expect(!engine.indexLoad.fromSnapshot)
            vectors = try await Self.populate(engine)
            before = try await Self.answers(engine, vectors)
            stored = try await StoreSnapshot(engine)
            engine.close()
            #expect(engine.snapshotReport?.hasPrefix("index snapshot written: 2969 rows") == true, "\(engine.snapshotReport ?? "nil")")
        }
        #expect(before.filter { !$0.isEmpty }.count >= 30 && before.contains { $0.isEmpty })
        #expect(Self.snapshotExists(directory))
        do {
            let engine = try Engine(path: directory.path, configuration: Self.configuration(resident: resident))
            #expect(engine.indexLoad.fromSnapshot, "\(engine.indexLoad)")
            #expect((engine.state[Self.gallery]?.registries.first?.rows != nil) == resident)
            // Good for this open only: the file is gone and the token consumed before anything is served.
            #expect(!Self.snapshotExists(directory))
            #expect(try !Self.hasToken(engine))
            #expect(try await Self.answers(engine, vectors) == before)
            #expect(try await StoreSnapshot(engine) == stored)
            #expect(try await engine.verify().problems.isEmpty)
            // The mapped rows take writes (appends, and removals moving the last row into a hole).
            let added = try await Self.registerNewcomer(engine, "newcomer", seed: 5)
            #expect(added.stored.count == 1)
            let first = try #require(try await engine.templates(gallery: Self.gallery, identifier: "p1", includeData: false).first)
            #expect(try await engine.deleteTemplate(gallery: Self.gallery, id: first.id))
            let changed = try await Self.answers(engine, vectors)
            engine.close()
            // Reopened in full (no snapshot) and from the new snapshot, the changed store answers alike.
            let full = try Engine(path: directory.path, configuration: Self.configuration(minimum: .max, resident: resident))
            #expect(full.indexLoad.fromSnapshot)
            #expect(try await Self.answers(full, vectors) == changed)
            full.close()
            #expect(full.snapshotReport?.contains("load in full quickly") == true)
            let again = try Engine(path: directory.path, configuration: Self.configuration(resident: resident))
            defer { again.close() }
            #expect(!again.indexLoad.fromSnapshot && again.indexLoad.reason == nil, "\(again.indexLoad)")
            #expect(try await Self.answers(again, vectors) == changed)
        }
    }

    static func inode(_ path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    /// A daemon that only identified (or authenticated) stops without writing the same snapshot
    /// again: the file it loaded, kept under its in-use name while it ran, gets its name back and its
    /// token is committed again; the next open maps that very file.
    @Test func aStopWithTheIndexUnchangedKeepsTheSnapshotItLoaded() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (vectors, expected) = try await Self.closedStore(directory)
        let path = IndexSnapshot.path(in: directory.path)
        let written = try #require(Self.inode(path))
        for _ in 0..<2 {
            let engine = try Engine(path: directory.path, configuration: Self.configuration())
            #expect(engine.indexLoad.fromSnapshot, "\(engine.indexLoad)")
            #expect(!Self.snapshotExists(directory) && Self.inode(path + IndexSnapshot.inUseSuffix) == written)
            #expect(try !Self.hasToken(engine))
            #expect(try await Self.answers(engine, vectors) == expected)
            engine.close()
            #expect(engine.snapshotReport == "index snapshot kept: 2969 rows, unchanged since it was loaded", "\(engine.snapshotReport ?? "nil")")
            #expect(Self.inode(path) == written)
            #expect(Self.inode(path + IndexSnapshot.inUseSuffix) == nil)
        }
        try await Self.expectSnapshotLoad(directory, vectors: vectors, answers: expected)
    }

    /// The index's first change makes the loaded snapshot worthless: its file is unlinked at once
    /// (its disk space comes back as the rows move off it), and the stop writes a new one.
    @Test func theIndexsFirstChangeUnlinksTheSnapshotInUse() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (vectors, _) = try await Self.closedStore(directory)
        let path = IndexSnapshot.path(in: directory.path)
        let written = try #require(Self.inode(path))
        let engine = try Engine(path: directory.path, configuration: Self.configuration())
        #expect(engine.indexLoad.fromSnapshot)
        #expect(Self.inode(path + IndexSnapshot.inUseSuffix) == written)
        // A refused registration changes nothing: the file stays.
        let refused = await expectRegistryError(.similarFaceRegistered) {
            _ = try await engine.register(
                gallery: Self.gallery, identifier: "someone else",
                face: Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: vectors[0])))
        }
        #expect(refused != nil)
        #expect(Self.inode(path + IndexSnapshot.inUseSuffix) == written)
        _ = try await Self.registerNewcomer(engine, "newcomer", seed: 17)
        #expect(Self.inode(path + IndexSnapshot.inUseSuffix) == nil)
        let changed = try await Self.answers(engine, vectors)
        engine.close()
        #expect(engine.snapshotReport?.hasPrefix("index snapshot written: 2970 rows") == true, "\(engine.snapshotReport ?? "nil")")
        try await Self.expectSnapshotLoad(directory, vectors: vectors, answers: changed)
    }

    /// A snapshot left under its in-use name (its open was killed: the token it had is gone) is
    /// removed by the next open, which loads in full.
    @Test func aSnapshotLeftInUseByAKilledOpenIsRemoved() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (vectors, expected) = try await Self.closedStore(directory)
        let path = IndexSnapshot.path(in: directory.path)
        #expect(rename(path, path + IndexSnapshot.inUseSuffix) == 0)
        try Engine.removeSnapshotToken(directory.path)
        let engine = try Engine(path: directory.path, configuration: Self.configuration())
        defer { engine.close() }
        #expect(!engine.indexLoad.fromSnapshot)
        #expect(Self.inode(path + IndexSnapshot.inUseSuffix) == nil)
        #expect(try await Self.answers(engine, vectors) == expected)
    }

    /// Rows mapped from a snapshot and then outgrown move into anonymous memory whole. 4,096 rows of
    /// 128 floats are exactly 2 MiB, so the snapshot's rows section covers the whole row buffer: grown
    /// in place (mremap), the new rows would map the file beyond the section (its codes, then its end:
    /// SIGBUS) instead of fresh memory.
    @Test func rowsMappedFromASnapshotGrowIntact() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var random = SeededGenerator(seed: 41)
        let vectors = (0..<9000).map { _ in Self.randomVector(&random) }
        func items(_ range: Range<Int>) -> [ImportItem] {
            range.map { ImportItem(identifier: "p\($0 % 3000)", template: FaceTemplate(algorithm: Algorithm.arcface.version, vector: vectors[$0])) }
        }
        let thresholds = Thresholds(authentication: 0.45, identification: 0.45, autoEnrolment: 1)
        do {
            let engine = try Engine(path: directory.path, configuration: Self.configuration())
            _ = try await engine.defineGallery(
                GalleryConfiguration(
                    name: Self.gallery,
                    registries: [
                        RegistryConfiguration(algorithm: Algorithm.arcface.version, thresholds: thresholds),
                        // answers(_:_:) asks with landmark faces too.
                        RegistryConfiguration(algorithm: Algorithm.landmarks.version, thresholds: thresholds),
                    ]))
            _ = try await engine.importTemplates(gallery: Self.gallery, items(0..<4096))
            engine.close()
        }
        let grown: [[IdentifyMatch]]
        do {
            let engine = try Engine(path: directory.path, configuration: Self.configuration())
            #expect(engine.indexLoad.fromSnapshot, "\(engine.indexLoad)")
            // Past the 4,096 rows the open reserved: the buffers grow, twice.
            _ = try await engine.importTemplates(gallery: Self.gallery, items(4096..<9000))
            #expect(try await engine.verify().problems.isEmpty)
            grown = try await Self.answers(engine, vectors)
            engine.close()
        }
        unlink(IndexSnapshot.path(in: directory.path))
        let full = try Engine(path: directory.path, configuration: Self.configuration())
        defer { full.close() }
        #expect(!full.indexLoad.fromSnapshot)
        #expect(try await Self.answers(full, vectors) == grown)
        #expect(grown.filter { !$0.isEmpty }.count >= 80)
    }

    /// A snapshot of another state of the store (kept from an earlier stop) is refused by its token,
    /// and the open loads in full.
    @Test func aSnapshotFromAnEarlierStopIsNotUsed() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let vectors: [[Float]]
        let old = directory.path + "/old.snapshot"
        do {
            let engine = try Engine(path: directory.path, configuration: Self.configuration())
            vectors = try await Self.populate(engine)
            engine.close()
            #expect(link(IndexSnapshot.path(in: directory.path), old) == 0)
        }
        let expected: [[IdentifyMatch]]
        do {
            let engine = try Engine(path: directory.path, configuration: Self.configuration())
            #expect(engine.indexLoad.fromSnapshot)
            _ = try await Self.registerNewcomer(engine, "later", seed: 9)
            expected = try await Self.answers(engine, vectors)
            engine.close()
        }
        #expect(rename(old, IndexSnapshot.path(in: directory.path)) == 0)
        try await Self.expectFullLoad(directory, reason: "token", vectors: vectors, answers: expected)
    }

    /// Opens the store, which must load in full, saying why (`reason` in it), take the file out of
    /// the directory all the same, and answer as `answers`.
    static func expectFullLoad(
        _ directory: TemporaryDirectory, reason: String, vectors: [[Float]], answers: [[IdentifyMatch]]
    ) async throws {
        let engine = try Engine(path: directory.path, configuration: Self.configuration())
        defer { engine.close() }
        #expect(!engine.indexLoad.fromSnapshot)
        #expect(engine.indexLoad.reason?.contains(reason) == true, "\(engine.indexLoad)")
        #expect(!Self.snapshotExists(directory))
        #expect(try await Self.answers(engine, vectors) == answers)
    }

    /// An open that consumed the snapshot and then stopped without closing (a crash) leaves neither
    /// file nor token: the next open is a full load. Simulated by putting the file back without the
    /// token, as a crash after the open's first commit would leave things.
    @Test func aSnapshotWithoutItsTokenIsNotUsed() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (vectors, expected) = try await Self.closedStore(directory)
        try Engine.removeSnapshotToken(directory.path)
        try await Self.expectFullLoad(directory, reason: "no token", vectors: vectors, answers: expected)
    }

    /// Damage to the file is found before anything is served, and the open loads in full.
    /// "rows": a resident registry's row (checked against its record's payload checksum).
    @Test(arguments: ["terms", "codes", "header", "truncated", "rows"])
    func aDamagedSnapshotIsNotUsed(damage: String) async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let resident = damage == "rows"
        let (vectors, expected) = try await Self.closedStore(directory, resident: resident)
        let path = IndexSnapshot.path(in: directory.path)
        var bytes = try #require(readFileBytes(path))
        let header = try bytes.withUnsafeBytes { try IndexSnapshot(decoding: $0, fileSize: bytes.count) }
        let arcface = try #require(header.registries.first { $0.algorithm == Algorithm.arcface.version && $0.count > 0 })
        // A registry reading its rows from the store (their payloads) has only its codes in the snapshot.
        #expect(arcface[.rows].length == (resident ? arcface.count * arcface.rowBytes : 0))
        #expect(arcface[.codes].length == arcface.count * arcface.codeBytes)
        switch damage {
        case "terms": bytes[arcface[.terms].offset + 16 * 1234 + 3] ^= 0x04
        case "codes": bytes[arcface[.codes].offset + 999] ^= 0x01
        case "rows": bytes[arcface[.rows].offset + 512 * 2021 + 77] ^= 0x10
        case "header": bytes[40] ^= 0x80
        default: bytes.removeLast(bytes.count - arcface[.codes].offset - 4096)
        }
        let file = open(path, O_WRONLY | O_TRUNC)
        #expect(bytes.withUnsafeBytes { write(file, $0.baseAddress!, $0.count) } == bytes.count)
        close(file)
        let engine = try Engine(path: directory.path, configuration: Self.configuration(resident: resident))
        defer { engine.close() }
        #expect(!engine.indexLoad.fromSnapshot)
        let reason = engine.indexLoad.reason ?? ""
        switch damage {
        case "rows": #expect(reason.contains("does not match the template's payload checksum"), "\(reason)")
        case "terms": #expect(reason.contains("terms section") && reason.contains("checksum"), "\(reason)")
        case "codes": #expect(reason.contains("codes section") && reason.contains("checksum"), "\(reason)")
        case "header": #expect(reason.contains("header"), "\(reason)")
        default: #expect(reason.contains("outside the file"), "\(reason)")
        }
        #expect(try await Self.answers(engine, vectors) == expected)
        #expect(try await engine.verify().problems.isEmpty)
    }

    /// The snapshot serves whatever the registries kept when it was written: one written with the
    /// rows in memory opens where the limit is now 0 (its rows section unused: the rows are read from
    /// the store), and one written with the rows in the store opens where the limit is the default
    /// (the registry then keeps reading them from the store, as when it was written). A full load
    /// decides afresh by the store's size. The answers never change.
    @Test func aSnapshotIsUsedWhicheverWayItsRowsWereKept() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let (vectors, expected) = try await Self.closedStore(directory, resident: true)
        func open(resident: Bool, minimum: Int = 0) throws -> Engine {
            try Engine(path: directory.path, configuration: Self.configuration(minimum: minimum, resident: resident))
        }
        func keepsRows(_ engine: Engine) -> Bool { engine.state[Self.gallery]?.registries.first?.rows != nil }
        for (configured, kept, fromSnapshot) in [(false, false, true), (true, false, true), (true, true, false)] {
            // The third open finds no snapshot: the second (minimum .max) wrote none.
            let engine = try open(resident: configured, minimum: configured ? .max : 0)
            #expect(engine.indexLoad.fromSnapshot == fromSnapshot, "\(engine.indexLoad)")
            #expect(keepsRows(engine) == kept)
            #expect(try await Self.answers(engine, vectors) == expected)
            #expect(try await engine.verify().problems.isEmpty)
            engine.close()
        }
    }

    /// An open that fails (here: a schema newer than this code) still takes the file out of the
    /// directory first, so its disk space comes back even when a full disk is what failed the open.
    @Test func aFailedOpenLeavesNoSnapshotBehind() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        _ = try await Self.closedStore(directory)
        #expect(Self.snapshotExists(directory))
        do {
            let store = try Store(path: directory.path, configuration: EngineConfiguration())
            defer { store.close() }
            try store.environment.write { txn in try store.writeInteger(txn, Keys.schemaVersion, UInt32(99)) }
        }
        let error = await expectRegistryError(.internal) { _ = try Engine(path: directory.path, configuration: Self.configuration()) }
        #expect(error?.message.contains("newer") == true, "\(String(describing: error))")
        #expect(!Self.snapshotExists(directory))
    }

    @Test func anEncryptedStoreWritesNoSnapshot() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var configuration = Self.configuration()
        configuration.encryptionKey = [UInt8](repeating: 3, count: 32)
        let engine = try Engine(path: directory.path, configuration: configuration)
        _ = try await engine.register(identifier: "a", face: Face(arcface([1])))
        engine.close()
        #expect(engine.snapshotReport == "no index snapshot: the store is encrypted")
        #expect(!Self.snapshotExists(directory))
    }

    /// Small stores load in full at every start (each payload read and checked): no snapshot.
    @Test func aSmallStoreWritesNoSnapshotByDefault() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let engine = try Engine(path: directory.path)
        _ = try await engine.register(identifier: "a", face: Face(arcface([1])))
        engine.close()
        #expect(engine.snapshotReport?.contains("1 templates load in full quickly") == true, "\(engine.snapshotReport ?? "nil")")
        #expect(!Self.snapshotExists(directory))
    }
}

extension Engine {
    /// Deletes the snapshot token from a closed store, as an open that crashed after its first commit
    /// would have left it.
    static func removeSnapshotToken(_ path: String) throws {
        let store = try Store(path: path, configuration: EngineConfiguration())
        defer { store.close() }
        try store.environment.write { txn in _ = try store.takeSnapshotToken(txn) }
    }
}
