import Glibc
import LMDB
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

@Suite struct AuditTests {
    func entry(_ operation: String, _ identifiers: [String], outcome: AuditOutcome = .ok, time: Int64 = AuditEntry.now(), uid: UInt32 = 1000)
        -> AuditEntry
    {
        AuditEntry(time: time, uid: uid, pid: 42, operation: operation, gallery: "default", identifiers: identifiers, outcome: outcome)
    }

    @Test func entriesAreWrittenWithTheNextCommitAndQueriedByIdentifierOutcomeAndTime() async throws {
        try await withEngine { engine in
            let start = AuditEntry.now()
            engine.recordAudit(self.entry("register", ["alice"]))
            engine.recordAudit(self.entry("identify", ["alice", "bob"], outcome: .match))
            engine.recordAudit(
                AuditEntry(
                    time: AuditEntry.now(), uid: 1001, pid: 43, operation: "delete_identifier", gallery: "default", identifiers: [],
                    outcome: .refused, errorCode: "PERMISSION_DENIED"))
            _ = try await engine.register(identifier: "carol", face: Face(arcface()))  // a later write: the trail is flushed by then
            let all = try await engine.auditEntries(AuditQuery())
            #expect(all.map(\.operation) == ["register", "identify", "delete_identifier"])
            #expect(all.allSatisfy { $0.time >= start })
            #expect(try await engine.auditEntries(AuditQuery(identifier: "bob")).map(\.operation) == ["identify"])
            let refused = try await engine.auditEntries(AuditQuery(outcome: .refused))
            #expect(refused.first?.errorCode == "PERMISSION_DENIED" && refused.first?.uid == 1001 && refused.first?.pid == 43)
            #expect(try await engine.auditEntries(AuditQuery(until: start)).isEmpty)
            #expect(try await engine.auditEntries(AuditQuery(limit: 2)).map(\.operation) == ["identify", "delete_identifier"])
        }
    }

    @Test func retentionTrimsTheOldestEntriesByCountAndByAge() async throws {
        var configuration = EngineConfiguration()
        configuration.auditRetention = AuditRetention(maximumEntries: 5, maximumAgeSeconds: 3600)
        try await withEngine(configuration) { engine in
            let old = AuditEntry.now() - 2 * 3600 * 1_000_000
            engine.recordAudit(self.entry("identify", ["ancient"], time: old))
            for index in 0..<7 { engine.recordAudit(self.entry("identify", ["p\(index)"])) }
            _ = try await engine.register(identifier: "carol", face: Face(arcface()))
            let kept = try await engine.auditEntries(AuditQuery())
            #expect(kept.map(\.identifiers) == (2..<7).map { ["p\($0)"] }, "\(kept.map(\.identifiers))")
        }
    }

    /// A flush whose commit fails on a full disk keeps its entries: once there is room again, the
    /// trail holds them, in the order they were recorded, before those recorded since.
    @Test
    func aFlushThatFailsOnAFullDiskKeepsItsEntriesForTheNext() async throws {
        let mount = try TemporaryMount(options: "size=4m")
        defer { mount.remove() }
        // Ballast that leaves the store about a megabyte, removed later to make room.
        let ballast = mount.path + "/ballast"
        #expect(system("head -c 3000000 /dev/urandom > '\(ballast)'") == 0)
        let engine = try Engine(path: mount.path + "/data")
        defer { engine.close() }
        func importOne(_ index: Int) async throws {
            var vector = [Float](repeating: 0.01, count: 128)
            vector[index % 128] = 1
            _ = try await engine.importTemplates([ImportItem(identifier: "filler-\(index)", template: FaceTemplate(algorithm: 24, vector: vector))])
        }
        var filled = 0
        while true {
            do {
                try await importOne(filled)
                filled += 1
            } catch let error as RegistryError where error.code == .storageFull {
                break
            }
        }
        #expect(filled > 0)
        engine.recordAudit(self.entry("identify", ["before-1"]))
        engine.recordAudit(self.entry("identify", ["before-2"]))
        // Their flush fails with this write (or alone, 0.1 s later): the disk is still full.
        await #expect(throws: RegistryError.self) { try await importOne(filled) }
        try await Task.sleep(for: .milliseconds(300))
        engine.recordAudit(self.entry("identify", ["after"]))
        #expect(unlink(ballast) == 0)
        try await importOne(filled)
        try await Task.sleep(for: .milliseconds(300))  // the flush rode along, or runs on its own
        let kept = try await engine.auditEntries(AuditQuery()).map(\.identifiers)
        #expect(kept == [["before-1"], ["before-2"], ["after"]], "\(kept)")
    }

    @Test("retention by bytes: the trail stays within its bound plus a block, the newest entries kept, its size counted right")
    func retentionByBytes() async throws {
        var configuration = EngineConfiguration()
        configuration.auditRetention = AuditRetention(maximumEntries: nil, maximumAgeSeconds: nil, maximumBytes: 1 << 20)
        try await withEngine(configuration) { engine in
            // 256-byte identifiers, four per entry: about 1 KiB an entry, so 4,000 entries are about 4 MiB.
            for index in 0..<4_000 {
                let digits = String(index)
                let name = String(repeating: "0", count: 6 - digits.count) + digits + String(repeating: "n", count: 250)
                engine.recordAudit(self.entry("identify", [name, name, name, name]))
                if index % 500 == 499 { try await engine.flushAudit() }
            }
            try await engine.flushAudit()
            let (stored, counted) = try await engine.readStore { txn in
                var bytes = 0
                try txn.forEach(engine.store.audit) { _, value in
                    bytes += value.count
                    return .continue
                }
                return (bytes, try engine.store.readUInt64(txn, Keys.auditBytes) ?? 0)
            }
            #expect(stored == Int(counted), "the stored count of bytes is not the blocks' size")
            // Whole blocks at a time: at most one block (256 entries of about 1 KiB) beyond the bound.
            #expect(stored <= (1 << 20) + 300 * 1_100, "\(stored) bytes kept")
            let kept = try await engine.auditEntries(AuditQuery(limit: 100_000))
            #expect(kept.count < 4_000 && kept.count > 700, "\(kept.count) entries kept")
            #expect(kept.last?.identifiers.first?.hasPrefix("003999") == true, "the newest entry is gone")
        }
    }

    @Test("an entry's strings are cut, not trapped on, at 65,535, 65,536 bytes and 1 MiB, and a count rides along")
    func longStringsAreCut() throws {
        for length in [65_535, 65_536, 1 << 20] {
            let long = String(repeating: "é", count: length / 2) + (length % 2 == 1 ? "x" : "")
            let entry = AuditEntry(
                time: 1, uid: 2, pid: 3, operation: long, gallery: long, identifiers: Array(repeating: long, count: 3), outcome: .refused,
                errorCode: "MALFORMED_REQUEST", count: 77)
            let decoded = try entry.encoded().withUnsafeBytes { try AuditEntry(decoding: $0) }
            #expect(decoded.gallery.utf8.count == AuditEntry.maximumStringBytes && long.hasPrefix(decoded.gallery))
            #expect(decoded.identifiers.count == 3 && decoded.identifiers.allSatisfy { $0 == decoded.gallery })
            #expect(decoded.count == 77 && decoded.errorCode == "MALFORMED_REQUEST")
        }
        // A store record's string never traps either: cut at the 16-bit length's limit, at a character boundary.
        var writer = ByteWriter()
        writer.append(string: String(repeating: "é", count: 40_000))
        let read = try writer.bytes.withUnsafeBytes { bytes in
            var reader = ByteReader(bytes)
            return try reader.readString()
        }
        #expect(read.utf8.count == 65_534 && read.unicodeScalars.allSatisfy { $0 == "é" })
        // An entry of one request carries no count, as entries did before the field existed.
        let single = AuditEntry(time: 1, uid: 2, pid: 3, operation: "identify", gallery: "g", identifiers: [], outcome: .ok)
        #expect(try single.encoded().withUnsafeBytes { try AuditEntry(decoding: $0) }.count == 1)
    }

    @Test func theTrailSurvivesAReopen() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        do {
            let engine = try Engine(path: directory.path)
            engine.recordAudit(self.entry("authenticate", ["alice"], outcome: .noMatch))
            engine.close()  // the queued flush runs before the writer stops
        }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        #expect(try await engine.auditEntries(AuditQuery()).map(\.outcome) == [.noMatch])
    }

    /// More entries than a block holds, with retention cutting inside a block: the count bound is
    /// exact, the oldest go first, and the kept ones read back in order.
    @Test func retentionByCountCutsInsideABlockAndKeepsTheNewestInOrder() async throws {
        var configuration = EngineConfiguration()
        let maximum = 2 * AuditBlock.maximumEntries + 37
        configuration.auditRetention = AuditRetention(maximumEntries: maximum, maximumAgeSeconds: nil)
        try await withEngine(configuration) { engine in
            let total = 3 * AuditBlock.maximumEntries + 5
            let start = AuditEntry.now()
            for index in 0..<total { engine.recordAudit(self.entry("identify", ["p\(index)"], time: start + Int64(index))) }
            try await engine.flushAudit()
            let kept = try await engine.auditEntries(AuditQuery(limit: 100_000))
            #expect(kept.count == maximum)
            #expect(kept.map(\.identifiers) == ((total - maximum)..<total).map { ["p\($0)"] })
            let counted = try engine.store.environment.read { txn in try engine.store.readUInt64(txn, Keys.auditEntries) }
            #expect(counted == UInt64(maximum))
            // Queries by time read inside blocks: exactly the entries of the range.
            let range = try await engine.auditEntries(AuditQuery(since: start + 700, until: start + 710, limit: 100))
            #expect(range.map(\.time) == (700..<710).map { start + Int64($0) })
            #expect(try await engine.auditEntries(AuditQuery(limit: 3)).map(\.identifiers) == ((total - 3)..<total).map { ["p\($0)"] })
        }
    }

    /// A schema 3 trail (a record per entry) is gathered into blocks when the store opens: the same
    /// entries, in order, and counted for the retention.
    @Test func aSchema3TrailBecomesBlocksWhenTheStoreOpens() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let start = AuditEntry.now()
        var entries: [AuditEntry] = []
        for index in 0..<(AuditBlock.maximumEntries + 10) {
            let operation = index % 2 == 0 ? "identify" : "authenticate"
            let outcome: AuditOutcome = index % 3 == 0 ? .match : .ok
            entries.append(self.entry(operation, ["p\(index)"], outcome: outcome, time: start + Int64(index)))
        }
        do {
            let engine = try Engine(path: directory.path)
            try engine.store.environment.write { txn in
                for (index, entry) in entries.enumerated() {
                    var key = ByteWriter(capacity: 12)
                    key.appendBigEndian(UInt64(bitPattern: entry.time))
                    key.appendBigEndian(UInt32(index))
                    try txn.put(engine.store.audit, key: key.bytes, value: entry.encoded())
                }
                try engine.store.writeInteger(txn, Keys.schemaVersion, UInt32(3))
            }
            engine.close()
        }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        #expect(try engine.store.environment.read { txn in try engine.store.readUInt32(txn, Keys.schemaVersion) } == Store.schemaVersion)
        #expect(try engine.store.environment.read { txn in try txn.count(engine.store.audit) } == 2)
        #expect(try engine.store.environment.read { txn in try engine.store.readUInt64(txn, Keys.auditEntries) } == UInt64(entries.count))
        #expect(try await engine.auditEntries(AuditQuery(limit: 100_000)) == entries)
        #expect(try await engine.auditEntries(AuditQuery(outcome: .match, limit: 100_000)) == entries.filter { $0.outcome == .match })
    }

    /// A block whose frames do not add up is refused as damage, not read past.
    @Test func aDamagedBlockIsReportedNotReadPast() async throws {
        try await withEngine { engine in
            engine.recordAudit(self.entry("identify", ["alice"]))
            try await engine.flushAudit()
            try engine.store.environment.write { txn in
                var keys: [[UInt8]] = []
                var values: [[UInt8]] = []
                try txn.forEach(engine.store.audit) { key, value in
                    keys.append(Array(key))
                    values.append(Array(value))
                    return .continue
                }
                var value = try #require(values.first)
                value[AuditBlock.headerSize] &+= 200  // the entry's length now runs past the block
                try txn.put(engine.store.audit, key: keys[0], value: value)
            }
            await #expect(throws: StoreCorruption.self) { try await engine.auditEntries(AuditQuery()) }
        }
    }

    /// A stored entry count below the truth (a damaged `meta` record) neither stops the writer nor
    /// keeps expired entries: retention still drops them by age, and the count stays at zero or more.
    @Test func aDamagedEntryCountDoesNotStopRetention() async throws {
        var configuration = EngineConfiguration()
        configuration.auditRetention = AuditRetention(maximumEntries: 100, maximumAgeSeconds: 3600)
        try await withEngine(configuration) { engine in
            // A block of ten entries from two hours ago, and a count that says none.
            let old = AuditEntry.now() - 2 * 3600 * 1_000_000
            var framed = ByteWriter()
            for index in 0..<10 {
                AuditBlock.appendFramed(to: &framed) { self.entry("identify", ["old\(index)"], time: old + Int64(index)).encode(into: &$0) }
            }
            try engine.store.environment.write { txn in
                var key = ByteWriter(capacity: 12)
                key.appendBigEndian(UInt64(bitPattern: old))
                key.appendBigEndian(UInt32.max)
                let block = framed.bytes.withUnsafeBytes { AuditBlock.block(framed: $0) }
                try txn.put(engine.store.audit, key: key.bytes, value: block)
                try engine.store.writeInteger(txn, Keys.auditEntries, UInt64(0))
            }
            engine.recordAudit(self.entry("identify", ["new"]))
            try await engine.flushAudit()
            #expect(try await engine.auditEntries(AuditQuery()).map(\.identifiers) == [["new"]])
            let counted = try engine.store.environment.read { txn in try engine.store.readUInt64(txn, Keys.auditEntries) }
            #expect(counted == 0)
        }
    }
}
