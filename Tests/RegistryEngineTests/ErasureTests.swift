import CScanKernels
import Dispatch
import Glibc
import LMDB
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Erasure: once a removal is answered and no older reader remains, none of the removed template's
/// stored bytes (payload, plaintext or sealed, and its record) is left anywhere in data.mdb, nor in
/// the index's buffers; what is kept is intact. Each case uses random templates, so every run
/// scans for different bytes.
@Suite struct ErasureTests {
    /// What a template leaves in data.mdb: windows of its stored payload (as stored: sealed in an
    /// encrypted store) and of its record, read from the store itself.
    struct Traces {
        var id: UInt64
        var windows: [[UInt8]]
    }

    static func traces(of ids: [UInt64], in engine: Engine) throws -> [Traces] {
        try engine.store.environment.read { txn in
            try ids.map { id in
                var stored: [UInt8] = []
                var part = 0
                while let bytes = try txn.get(engine.store.vectors, key: Keys.vectorPart(id, part: part)) {
                    stored += bytes
                    part += 1
                }
                let record = try #require(try txn.get(engine.store.templates, key: Keys.template(id)).map { Array($0) })
                #expect(stored.count >= 64)
                // The record's first 16 bytes: registry, gallery, registration time (µs): unique.
                return Traces(
                    id: id, windows: [Array(stored[0..<16]), Array(stored[stored.count / 2..<(stored.count / 2 + 16)]), Array(record[0..<16])])
            }
        }
    }

    /// How many of `traces` have any window somewhere in data.mdb.
    static func found(_ traces: [Traces], in path: String) throws -> Int {
        let file = try DataFileScan(directory: path)
        return traces.count { trace in trace.windows.contains { file.contains($0) } }
    }

    /// Waits (up to 2 s) until no erasable free page holds data and no removal waits, as the writer
    /// promises within a second of the reply; returns what it last saw.
    @discardableResult
    static func awaitErasure(_ engine: Engine) async throws -> FreePages {
        var residue = FreePages()
        for _ in 0..<40 {
            residue = try engine.store.environment.freePageResidue()
            if residue.holdingData == 0 && !residue.removalPending { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return residue
    }

    static func randomFace(_ generator: inout some RandomNumberGenerator) -> Face {
        Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: (0..<128).map { _ in Float.random(in: -1...1, using: &generator) }))
    }

    static func configuration(encrypted: Bool) -> EngineConfiguration {
        var configuration = EngineConfiguration()
        if encrypted { configuration.encryptionKey = [UInt8](repeating: 0x5A, count: 32) }
        return configuration
    }

    @Test(arguments: [false, true])
    func deletedIdentifiersTemplatesAndGalleriesLeaveNoBytesInTheDataFile(encrypted: Bool) async throws {
        var generator = SystemRandomNumberGenerator()
        try await withEngine(Self.configuration(encrypted: encrypted)) { engine in
            try await engine.defineGallery(twoRegistryGallery("visitors"))
            var ids: [String: [UInt64]] = [:]
            for person in 0..<30 {
                let name = "p\(person)"
                for _ in 0..<2 {
                    let outcome = try await engine.register(identifier: name, face: Self.randomFace(&generator), force: true)
                    ids[name, default: []] += outcome.stored.map(\.id)
                }
            }
            var visitorIds: [UInt64] = []
            for visitor in 0..<40 {
                let outcome = try await engine.register(
                    gallery: "visitors", identifier: "v\(visitor)", face: Self.randomFace(&generator), force: true)
                visitorIds += outcome.stored.map(\.id)
            }
            // A random sample of each kind of deletion.
            let people = ids.keys.shuffled(using: &generator)
            let deletedPeople = Array(people.prefix(8))
            let templateOwners = Array(people.dropFirst(8).prefix(6))
            var removed: [UInt64] = []
            var kept: [UInt64] = []
            for name in people {
                if deletedPeople.contains(name) {
                    removed += ids[name]!
                } else if templateOwners.contains(name) {
                    removed.append(ids[name]![1])
                    kept.append(ids[name]![0])
                } else {
                    kept += ids[name]!
                }
            }
            let removedTraces = try Self.traces(of: removed + visitorIds, in: engine)
            let keptTraces = try Self.traces(of: kept, in: engine)
            #expect(try Self.found(removedTraces, in: engine.path) == removedTraces.count)

            for name in deletedPeople { #expect(try await engine.deleteIdentifier(identifier: name) == 2) }
            for name in templateOwners { #expect(try await engine.deleteTemplate(id: ids[name]![1])) }
            #expect(try await engine.deleteGallery("visitors") == 40)

            let residue = try await Self.awaitErasure(engine)
            #expect(residue.holdingData == 0)
            #expect(!residue.removalPending)
            #expect(try Self.found(removedTraces, in: engine.path) == 0)
            // What was kept is still there, byte for byte, and the store checks out.
            #expect(try Self.found(keptTraces, in: engine.path) == keptTraces.count)
            let (checked, problems) = try await engine.verify()
            #expect(checked == kept.count)
            #expect(problems.isEmpty)
        }
    }

    @Test func reKeyingLeavesNoPayloadUnderTheOldKeyOrInTheClear() async throws {
        var generator = SystemRandomNumberGenerator()
        try await withEngine(Self.configuration(encrypted: false)) { engine in
            var ids: [UInt64] = []
            for person in 0..<60 {
                ids += try await engine.register(identifier: "p\(person)", face: Self.randomFace(&generator), force: true).stored.map(\.id)
            }
            // Payload windows only: the records stay (their payload checksum changes, not their start).
            let plaintext = try Self.traces(of: ids, in: engine).map { Traces(id: $0.id, windows: Array($0.windows.prefix(2))) }
            #expect(try await engine.setEncryptionKey([UInt8](repeating: 0x33, count: 32)) == ids.count)
            try await Self.awaitErasure(engine)
            #expect(try Self.found(plaintext, in: engine.path) == 0)
            let sealedOnce = try Self.traces(of: ids, in: engine).map { Traces(id: $0.id, windows: Array($0.windows.prefix(2))) }
            #expect(try await engine.setEncryptionKey([UInt8](repeating: 0x44, count: 32)) == ids.count)
            try await Self.awaitErasure(engine)
            #expect(try Self.found(sealedOnce, in: engine.path) == 0)
        }
    }

    /// A reader older than the deletion (a hot backup's) still reads the deleted template whole while
    /// it is open; once it ends, the pages are wiped without any further request.
    @Test func anOlderReaderKeepsItsSnapshotUntilItEndsThenTheBytesGo() async throws {
        var generator = SystemRandomNumberGenerator()
        try await withEngine { engine in
            var ids: [UInt64] = []
            for person in 0..<20 {
                ids += try await engine.register(identifier: "p\(person)", face: Self.randomFace(&generator), force: true).stored.map(\.id)
            }
            let victim = try #require(ids.randomElement(using: &generator))
            let traces = try Self.traces(of: [victim], in: engine)
            let opened = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let readerDone = DispatchSemaphore(value: 0)
            let environment = engine.store.environment
            nonisolated(unsafe) var sameBefore = false
            nonisolated(unsafe) var sameAfter = false
            let store = engine.store
            Thread.detach {
                try? environment.read { txn in
                    let before = try store.payload(txn, id: victim)
                    opened.signal()
                    release.wait()
                    sameAfter = try store.payload(txn, id: victim) == before
                    sameBefore = !before.isEmpty
                }
                readerDone.signal()
            }
            opened.wait()
            #expect(try await engine.deleteTemplate(id: victim))
            // More commits, so that only the reader holds the pages.
            _ = try await engine.register(identifier: "late", face: Self.randomFace(&generator), force: true)
            try await Task.sleep(for: .milliseconds(300))
            let held = try environment.freePageResidue()
            #expect(held.removalPending)
            #expect(try Self.found(traces, in: engine.path) == 1)
            release.signal()
            readerDone.wait()
            #expect(sameBefore && sameAfter)
            let residue = try await Self.awaitErasure(engine)
            #expect(residue.holdingData == 0 && !residue.removalPending)
            #expect(try Self.found(traces, in: engine.path) == 0)
        }
    }

    /// A process that stopped between a deletion's commit and its erasure (here: the deletion written
    /// straight into the store, with no writer to erase after it) leaves the bytes; the next open
    /// erases them before it serves.
    @Test func anOpenFinishesAnErasureTheLastProcessDidNotReach() async throws {
        var generator = SystemRandomNumberGenerator()
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        var ids: [UInt64] = []
        var traces: [Traces] = []
        do {
            let engine = try Engine(path: directory.path)
            for person in 0..<20 {
                ids += try await engine.register(identifier: "p\(person)", face: Self.randomFace(&generator), force: true).stored.map(\.id)
            }
            traces = try Self.traces(of: Array(ids.prefix(5)), in: engine)
            engine.close()
        }
        do {
            let store = try Store(path: directory.path, configuration: EngineConfiguration())
            try store.environment.write { txn in
                for id in ids.prefix(5) { _ = try store.deleteTemplate(txn, id: id) }
            }
            // Another commit: the pages are erasable now, but nothing erases them.
            try store.environment.write { txn in try store.writeInteger(txn, Keys.erasureCommit, UInt64(1)) }
            store.close()
        }
        #expect(try Self.found(traces, in: directory.path) > 0)
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        #expect(try Self.found(traces, in: directory.path) == 0)
        #expect(try engine.store.environment.freePageResidue().holdingData == 0)
        #expect(try await engine.templates(identifier: "p5").count == 1)
    }

    /// Both kinds of vector registry: one keeping its rows in memory (small, the default) and one
    /// reading them from the store (`residentRowBytes` 0, as a million-template one does).
    @Test(arguments: [true, false])
    func aRemovedRowLeavesNoCopyInTheIndexBuffers(resident: Bool) async throws {
        var generator = SystemRandomNumberGenerator()
        var configuration = EngineConfiguration()
        if !resident { configuration.residentRowBytes = 0 }
        try await withEngine(configuration) { engine in
            var ids: [UInt64] = []
            for person in 0..<6 {
                ids += try await engine.register(identifier: "p\(person)", face: Self.randomFace(&generator), force: true).stored.map(\.id)
            }
            for id in [ids[5], ids[1]] { #expect(try await engine.deleteTemplate(id: id)) }
            let registry = try #require(engine.state["default"]?.registries.first)
            #expect(registry.count == 4)
            if let rows = registry.rows {
                #expect(resident)
                // The row slots past the last row (where the removed and moved rows were) hold zeros...
                let rowTail = UnsafeBufferPointer(start: rows + registry.count * registry.stride, count: 2 * registry.stride)
                #expect(rowTail.allSatisfy { $0.bitPattern == 0 })
            } else {
                // ...or the index keeps no float32 row (the store's payload is the only one, erased with it)...
                #expect(!resident)
            }
            // ...and so do the code slots past the last row.
            let codes = try #require(registry.codes)
            let codeTail = UnsafeBufferPointer(start: codes + registry.count * registry.codeStride, count: 2 * registry.codeStride)
            #expect(codeTail.allSatisfy { $0 == 0 })
            let terms = try #require(registry.terms)
            let termTail = UnsafeRawBufferPointer(start: terms + registry.count, count: 2 * MemoryLayout<rk_row_terms>.stride)
            #expect(termTail.allSatisfy { $0 == 0 })
        }
    }
}
