import Glibc
import LMDB
import MetricsTestKit
import Synchronization
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Vector registries of the engine whose rows outgrow `residentRowBytes` keep only codes in memory
/// and read the rows they rescore from the store (``StoredRows``). Every scan over them must answer
/// exactly as over the same rows held in memory, with the prefilter and without, plain store or sealed.
@Suite struct StoredRowsTests {
    static let gallery = "rows"

    /// Rows resident up to 3,000 of the 5,000 templates ``populated(_:)`` imports: the registry lets
    /// them go part way, as one outgrowing the limit does.
    static var outgrown: EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.residentRowBytes = 3000 * 128 * 4
        return configuration
    }

    static func normalised(_ values: [Float]) -> [Float] {
        let norm = values.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return values.map { $0 / norm }
    }

    /// An engine holding 5,000 arcface templates of 1,700 people, some removed (so rows are out of id
    /// order), and the vectors registered.
    static func populated(_ engine: Engine) async throws -> [[Float]] {
        _ = try await engine.defineGallery(
            GalleryConfiguration(
                name: Self.gallery,
                registries: [
                    RegistryConfiguration(
                        algorithm: Algorithm.arcface.version, thresholds: Thresholds(authentication: 0.5, identification: 0.5, autoEnrolment: 1))
                ]))
        var random = SeededGenerator(seed: 5)
        let vectors = (0..<5000).map { _ in (0..<128).map { _ in Float(random.normal()) } }
        let items = vectors.enumerated().map { index, vector in
            ImportItem(identifier: "p\(index % 1700)", template: FaceTemplate(algorithm: Algorithm.arcface.version, vector: vector))
        }
        let ids = try await engine.importTemplates(gallery: Self.gallery, items)
        for id in ids.prefix(1000) where id % 11 == 0 { #expect(try await engine.deleteTemplate(gallery: Self.gallery, id: id)) }
        return vectors
    }

    /// The same rows, ids and identifiers as `stored`, held in memory.
    static func resident(copying stored: RegistryIndex) throws -> RegistryIndex {
        let resident = RegistryIndex(id: stored.id, algorithm: stored.algorithm, thresholds: stored.thresholds)
        try stored.withRows { row in
            for index in 0..<stored.count {
                let values = row(index)!
                resident.append(templateId: stored.templateIds[index], ordinal: stored.ordinals[index], mask: 0) {
                    $0.update(from: values, count: stored.stride)
                }
            }
        }
        return resident
    }

    /// Noisy copies of registered vectors (clear matches) and strangers, prepared.
    static func queries(_ vectors: [[Float]]) -> [[Float]] {
        var random = SeededGenerator(seed: 9)
        var queries = stride(from: 3, to: vectors.count, by: 421).map { index in
            Self.normalised(zip(vectors[index], (0..<128).map { _ in Float(random.normal()) }).map { $0 + 0.5 * $1 })
        }
        queries += (0..<6).map { _ in Self.normalised((0..<128).map { _ in Float(random.normal()) }) }
        return queries
    }

    @Test(arguments: [false, true])
    func scansOverStoredRowsAnswerAsOverResidentRows(sealed: Bool) async throws {
        var configuration = Self.outgrown
        if sealed { configuration.encryptionKey = [UInt8](repeating: 0x33, count: 32) }
        try await withEngine(configuration) { engine in
            let vectors = try await Self.populated(engine)
            let stored = try #require(engine.state[Self.gallery]?.registries.first)
            #expect(stored.rows == nil && stored.count == 5000 - (1...1000).filter { $0 % 11 == 0 }.count)
            let resident = try Self.resident(copying: stored)
            // The codes the index holds are those of the rows the store holds.
            for index in 0..<stored.count {
                let (a, b) = (stored.code(row: index)!, resident.code(row: index)!)
                #expect(a.codes.elementsEqual(b.codes))
                #expect(withUnsafeBytes(of: a.terms) { x in withUnsafeBytes(of: b.terms) { x.elementsEqual($0) } })
            }
            let before = StoredRows.unreadable.load(ordering: .relaxed)
            let queries = Self.queries(vectors)
            for query in queries {
                for threshold: Float in [-1, 0.3, 0.6] {
                    for limit in [nil, 1, 10] as [Int?] {
                        func identify(_ registry: RegistryIndex, prefilter: Bool) throws -> [Scan.Candidate] {
                            try Scan.identify(
                                registry, query: query, queryMask: 0, threshold: threshold, limit: limit, rowsPerChunk: 700, prefilter: prefilter)
                        }
                        let expected = try identify(resident, prefilter: false)
                        #expect(try identify(stored, prefilter: true) == expected)
                        #expect(try identify(stored, prefilter: false) == expected)
                        #expect(try identify(resident, prefilter: true) == expected)
                    }
                }
            }
            // Registration checks, one by one and batched, each query as its nearest identifier's own.
            let owners: [UInt32?] = try queries.map { query in
                try Scan.identify(resident, query: query, queryMask: 0, threshold: 0.5, limit: 1).first?.ordinal
            }
            #expect(owners.contains { $0 != nil } && owners.contains { $0 == nil })
            let flat = queries.flatMap { $0 }
            for floor: Float in [-1, 0.2, 0.5] {
                let floors = [Float](repeating: floor, count: queries.count)
                let batched = try flat.withUnsafeBufferPointer { queries in
                    (
                        try Scan.check(stored, queries: queries.baseAddress!, owners: owners, floors: floors, rowsPerChunk: 700),
                        try Scan.check(resident, queries: queries.baseAddress!, owners: owners, floors: floors, rowsPerChunk: 700, prefilter: false)
                    )
                }
                for (index, query) in queries.enumerated() {
                    let one = try Scan.check(stored, query: query, queryMask: 0, own: owners[index], excluded: [], floor: floor, rowsPerChunk: 700)
                    let reference = try Scan.check(
                        resident, query: query, queryMask: 0, own: owners[index], excluded: [], floor: floor, rowsPerChunk: 700, prefilter: false)
                    #expect(one.other == reference.other && one.own == reference.own)
                    #expect(batched.0[index].other == reference.other && batched.0[index].own == reference.own)
                    #expect(batched.1[index].other == reference.other && batched.1[index].own == reference.own)
                }
            }
            #expect(StoredRows.unreadable.load(ordering: .relaxed) == before)
        }
    }

    /// A template removed from the store after a scan's view of the index was taken (the writer
    /// commits a removal before it takes the row out of the index) is skipped, not misread.
    @Test func aRowGoneFromTheStoreIsSkipped() async throws {
        try await withEngine(Self.outgrown) { engine in
            let vectors = try await Self.populated(engine)
            let stored = try #require(engine.state[Self.gallery]?.registries.first)
            let query = Self.normalised(vectors[4321])
            let found = try Scan.identify(stored, query: query, queryMask: 0, threshold: 0.99, limit: nil)
            let id = try #require(found.first?.templateId)
            #expect(found.count == 1)
            // Removed behind the index's back, as between a removal's commit and its publication.
            let removed = try engine.store.environment.write { txn in try engine.store.deleteTemplate(txn, id: id) }
            #expect(removed != nil)
            #expect(stored.templateIds.contains(id))
            #expect(try Scan.identify(stored, query: query, queryMask: 0, threshold: 0.99, limit: nil).isEmpty)
            #expect(try Scan.identify(stored, query: query, queryMask: 0, threshold: -1, limit: 3).allSatisfy { $0.templateId != id })
        }
    }

    /// A stored row a scan needs and cannot read as registered is an error for the request, never a
    /// skipped row: identify, register's similar-face check and authenticate each refuse with
    /// `STORE_DAMAGED` naming the template, and verify reports it. Three kinds of damage: another
    /// template's values in its payload (its codes then disagree), the payload gone while its record
    /// stays, and the payload cut short. Skipping them answered "nobody", stored a face already
    /// registered as someone else, and said "not registered" for a registered person.
    @Test func aDamagedRowIsAnErrorNotASkippedRow() async throws {
        let metrics = TestMetrics()
        try await withEngine(Self.outgrown, metrics: metrics) { engine in
            let vectors = try await Self.populated(engine)
            let registry = try #require(engine.state[Self.gallery]?.registries.first)
            #expect(registry.rows == nil, "the rows must be read from the store")
            func face(_ index: Int) -> Face { Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: vectors[index])) }
            var damaged: [(index: Int, id: UInt64)] = []
            for index in [4999, 4998, 4997] {
                let top = try await engine.identify(gallery: Self.gallery, face: face(index), autoEnrol: false).matches.first
                #expect(top?.identifier == "p\(index % 1700)")
                damaged.append((index, try #require(top?.templateId)))
            }
            let store = engine.store
            try store.environment.write { txn in
                // Another template's values, with the checksum left as it was.
                let other = try store.storedPayload(txn, id: damaged[0].id - 1)
                try txn.put(store.vectors, key: Keys.vectorPart(damaged[0].id, part: 0), value: other)
                // No payload, the record kept.
                var part = 0
                while try txn.delete(store.vectors, key: Keys.vectorPart(damaged[1].id, part: part)) { part += 1 }
                // Cut to half a row.
                let whole = try store.storedPayload(txn, id: damaged[2].id)
                part = 0
                while try txn.delete(store.vectors, key: Keys.vectorPart(damaged[2].id, part: part)) { part += 1 }
                try txn.put(store.vectors, key: Keys.vectorPart(damaged[2].id, part: 0), value: Array(whole.prefix(whole.count / 2)))
            }
            func expectDamage(_ id: UInt64, _ body: () async throws -> Void) async {
                do {
                    try await body()
                    Issue.record("answered although template \(id)'s row cannot be read")
                } catch let error as RegistryError {
                    #expect(
                        error.code == .internal && error.message.hasPrefix("STORE_DAMAGED:") && error.message.contains("template \(id):"), "\(error)")
                } catch {
                    Issue.record("\(error)")
                }
            }
            for (index, id) in damaged {
                await expectDamage(id) { _ = try await engine.identify(gallery: Self.gallery, face: face(index), autoEnrol: false) }
                await expectDamage(id) { _ = try await engine.register(gallery: Self.gallery, identifier: "someone else", face: face(index)) }
                await expectDamage(id) {
                    _ = try await engine.authenticate(gallery: Self.gallery, identifier: "p\(index % 1700)", face: face(index), autoEnrol: false)
                }
            }
            // Nothing was stored for the refused registrations.
            #expect(engine.state[Self.gallery]?.presentOrdinal(of: "someone else") == nil)
            // Counted, one per refused request.
            #expect(try metrics.expectCounter(EngineMetrics.damagedRowsLabel).totalValue == 9)
            let problems = try await engine.verify().problems
            for (_, id) in damaged { #expect(problems.contains { $0.contains("template \(id)") }, "\(problems)") }
        }
    }

    /// Between the commit that seals every payload with a new key and the index taking that key, a
    /// scan finds payloads the current key cannot open: it opens them with the key being set.
    @Test func aPayloadSealedWithTheKeyBeingSetIsOpened() async throws {
        var configuration = Self.outgrown
        configuration.encryptionKey = [UInt8](repeating: 0x44, count: 32)
        try await withEngine(configuration) { engine in
            let vectors = try await Self.populated(engine)
            let stored = try #require(engine.state[Self.gallery]?.registries.first)
            let query = Self.normalised(vectors[4321])
            let expected = try Scan.identify(stored, query: query, queryMask: 0, threshold: 0.9, limit: nil)
            #expect(expected.count == 1)
            // The state in that window: the key in use is another (here: none), the new one pending.
            let key = engine.store.cipher.withLock { cipher in
                defer { cipher = nil }
                return cipher
            }
            // Not skipped as if removed: a payload no key opens is damage.
            #expect(throws: RowFault.self) { try Scan.identify(stored, query: query, queryMask: 0, threshold: 0.9, limit: nil) }
            engine.store.pendingCipher.withLock { $0 = key }
            #expect(try Scan.identify(stored, query: query, queryMask: 0, threshold: 0.9, limit: nil) == expected)
            engine.store.cipher.withLock { $0 = key }
            engine.store.pendingCipher.withLock { $0 = nil }
        }
    }

    /// Setting or rotating the key while identifications run: payloads are committed sealed with the
    /// new key before the index takes it, and scans in between must still open them.
    @Test func identificationsDuringAKeyChangeStillFindTheirMatch() async throws {
        try await withEngine(Self.outgrown) { engine in
            let vectors = try await Self.populated(engine)
            let face = Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: vectors[4999]))
            let expected = try await engine.identify(gallery: Self.gallery, face: face, autoEnrol: false).matches.first
            #expect(expected?.identifier == "p\(4999 % 1700)")
            let changing = Atomic<Bool>(true)
            async let keys: Void = {
                for byte: UInt8 in [1, 2, 3] { _ = try await engine.setEncryptionKey([UInt8](repeating: byte, count: 32)) }
                changing.store(false, ordering: .relaxed)
            }()
            var rounds = 0
            while changing.load(ordering: .relaxed) || rounds < 20 {
                let result = try await engine.identify(gallery: Self.gallery, face: face, autoEnrol: false)
                #expect(result.matches.first == expected)
                rounds += 1
            }
            try await keys
            #expect(try await engine.verify().problems.isEmpty)
        }
    }

    /// Which registries keep their rows: one within the limit keeps them through its imports and a
    /// reopen (an authentication then reads no store page); at the next open, one the whole store
    /// outgrows reads them from the store; and without a snapshot, a crash start decides the same
    /// way. The answers are the same in every case.
    @Test func aRegistryKeepsItsRowsWhileTheyFitTheLimit() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let vectors: [[Float]]
        let expected: [[IdentifyMatch]]
        do {
            let engine = try Engine(path: directory.path)
            vectors = try await Self.populated(engine)
            let registry = try #require(engine.state[Self.gallery]?.registries.first)
            #expect(registry.rows != nil)
            expected = try await Self.answers(engine, vectors)
            #expect(expected.contains { !$0.isEmpty } && expected.contains { $0.isEmpty })
            engine.close()
        }
        // The store holds 4,910 templates of 512 bytes (and the default gallery none).
        for (limit, resident) in [(4910 * 512, true), (4909 * 512, false), (0, false), (64 << 20, true)] {
            var configuration = EngineConfiguration()
            configuration.residentRowBytes = limit
            let engine = try Engine(path: directory.path, configuration: configuration)
            let registry = try #require(engine.state[Self.gallery]?.registries.first)
            #expect((registry.rows != nil) == resident, "limit \(limit)")
            #expect(try await Self.answers(engine, vectors) == expected, "limit \(limit)")
            #expect(try await engine.verify().problems.isEmpty)
            engine.close()
        }
    }

    /// Identification with every query: noisy copies of registered vectors and strangers.
    static func answers(_ engine: Engine, _ vectors: [[Float]]) async throws -> [[IdentifyMatch]] {
        var result: [[IdentifyMatch]] = []
        for query in Self.queries(vectors) {
            let face = Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: query))
            result.append(try await engine.identify(gallery: Self.gallery, face: face, autoEnrol: false, limit: 10).matches)
        }
        return result
    }
}
