import CLMDB
import Glibc
import TestSupport
import Testing

@testable import LMDB

private func removeDirectory(_ path: String) {
    unlink(path + "/data.mdb")
    unlink(path + "/lock.mdb")
    unlink(path + "/" + Environment.createdMark)
    rmdir(path)
}

private struct Boom: Error {}

@Suite struct EnvironmentTests {
    @Test func aWriteCommitsWhenTheBodyReturns() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        let env = try Environment(path: path)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        try env.write { txn in try txn.put(db, key: [1], value: [42]) }
        let value = try env.read { txn in try txn.get(db, key: [1]).map { Array($0) } }
        #expect(value == [42])
    }

    @Test func aWriteAbortsWhenTheBodyThrows() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        let env = try Environment(path: path)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        #expect(throws: Boom.self) {
            try env.write { txn in
                try txn.put(db, key: [1], value: [42])
                throw Boom()
            }
        }
        let value = try env.read { txn in try txn.get(db, key: [1]).map { Array($0) } }
        #expect(value == nil)
    }

    @Test func aFailedNestedTransactionIsRolledBackAloneAndTheParentCommits() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        let env = try Environment(path: path)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        try env.write { txn in
            try txn.put(db, key: [1], value: [1])
            #expect(throws: Boom.self) {
                try txn.nested { child in
                    try child.put(db, key: [2], value: [2])
                    throw Boom()
                }
            }
            try txn.nested { child in try child.put(db, key: [3], value: [3]) }
        }
        let keys = try env.read { txn in
            var keys: [UInt8] = []
            try txn.forEach(db) { key, _ in
                keys.append(key[0])
                return .continue
            }
            return keys
        }
        #expect(keys == [1, 3])
    }

    @Test func theMapGrowsByItselfAndTheWriteIsRetried() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        var options = Environment.Options()
        options.mapSize = 256 << 10  // 256 KiB: the 4 MiB below cannot fit without growing
        let env = try Environment(path: path, options: options)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        var attempts = 0
        try env.write { txn in
            attempts += 1
            for i in 0..<1024 {
                try txn.put(db, key: [UInt8](String(i).utf8), value: [UInt8](repeating: UInt8(i & 0xFF), count: 4096))
            }
        }
        #expect(attempts > 1, "the body should have been re-run after MDB_MAP_FULL")
        #expect(env.mapSize > 4 << 20)
        let count = try env.read { txn in try txn.count(db) }
        #expect(count == 1024)
    }

    /// Bytes of `path`/data.mdb's mappings resident in this process (/proc/self/smaps).
    private static func residentMapBytes(_ path: String) -> Int {
        guard let text = readFileBytes("/proc/self/smaps").map({ String(decoding: $0, as: UTF8.self) }) else { return -1 }
        var inMap = false
        var bytes = 0
        for line in text.split(separator: "\n") {
            if let first = line.first, first.isHexDigit, line.contains("-") {
                inMap = line.hasSuffix(path + "/data.mdb")
            } else if inMap, line.hasPrefix("Rss:") {
                bytes += (Int(line.split(separator: " ")[1]) ?? 0) * 1024
            }
        }
        return bytes
    }

    /// The map's pages leave the resident set when released, also after the map grew (a new mapping,
    /// elsewhere: the ranges looked up for the old one must not be used), and read back unchanged.
    @Test func releasedMapPagesLeaveTheResidentSetAlsoAfterTheMapGrows() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        var options = Environment.Options()
        options.mapSize = 256 << 10
        let env = try Environment(path: path, options: options)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        func fill(_ range: Range<Int>) throws {
            try env.write { txn in
                for i in range { try txn.put(db, key: [UInt8](String(i).utf8), value: [UInt8](repeating: UInt8(i & 0xFF), count: 4096)) }
            }
        }
        func readAll(_ count: Int) throws -> Bool {
            try env.read { txn in
                (0..<count).allSatisfy { i in
                    (try? txn.get(db, key: [UInt8](String(i).utf8)))??.allSatisfy { $0 == UInt8(i & 0xFF) } ?? false
                }
            }
        }
        try fill(0..<1024)
        // The first growth takes the map to 64 MiB and more: the second fill must outgrow that.
        for (count, grown) in [(1024, 0), (20_000, 1024)] {
            let size = env.mapSize
            if grown > 0 { try fill(grown..<count) }
            #expect(grown == 0 || env.mapSize > size)
            #expect(try readAll(count))
            #expect(Self.residentMapBytes(path) > 2 << 20)
            env.releaseResidentPages()
            #expect(Self.residentMapBytes(path) < 256 << 10, "after \(count) values")
            #expect(try readAll(count))
        }
    }

    @Test func theMapStopsGrowingAtItsMaximumWithMapFull() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        var options = Environment.Options()
        options.mapSize = 256 << 10
        options.maxMapSize = 512 << 10
        let env = try Environment(path: path, options: options)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        let error = #expect(throws: LMDBError.self) {
            try env.write { txn in
                for i in 0..<1024 {
                    try txn.put(db, key: [UInt8](String(i).utf8), value: [UInt8](repeating: 1, count: 4096))
                }
            }
        }
        #expect(error?.isMapFull == true)
        #expect(error?.code == MDB_MAP_FULL)
        #expect(error?.operation.hasPrefix("mdb_put") == true)
        #expect(error?.message.contains("MDB_MAP_FULL") == true)
        #expect(try env.read { txn in try txn.count(db) } == 0)
    }

    @Test func anEnvironmentCannotBeOpenedTwiceInOneProcess() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        let env = try Environment(path: path)
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(error?.code == EBUSY)
        env.close()
        // Once closed, it can be opened again.
        try Environment(path: path).close()
    }

    @Test func errorsCarryTheCodeTheOperationAndLMDBsMessage() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        let env = try Environment(path: path)
        defer { env.close() }
        let error = #expect(throws: LMDBError.self) {
            try env.read { txn in _ = try txn.openDatabase("missing") }
        }
        #expect(error?.isNotFound == true)
        #expect(error?.operation == "mdb_dbi_open(missing)")
        #expect(error?.description.contains("MDB_NOTFOUND") == true)
    }

    @Test func appendRefusesAKeyThatIsNotTheGreatest() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { removeDirectory(path) }
        let env = try Environment(path: path)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        try env.write { txn in
            try txn.put(db, key: [5], value: [5], flags: .append)
            let error = #expect(throws: LMDBError.self) { try txn.put(db, key: [3], value: [3], flags: .append) }
            #expect(error?.isKeyExists == true)
        }
    }

    @Test func aCompactingCopyHoldsTheSameData() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        let copy = TemporaryDirectory("lmdb-tests").path
        defer {
            removeDirectory(path)
            removeDirectory(copy)
        }
        let env = try Environment(path: path)
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        try env.write { txn in try txn.put(db, key: [7], value: [7, 7]) }
        try env.copy(to: copy)
        env.close()
        let copied = try Environment(path: copy)
        defer { copied.close() }
        let value = try copied.read { txn in try txn.get(try txn.openDatabase("t"), key: [7]).map { Array($0) } }
        #expect(value == [7, 7])
    }
}

/// The data file is checked before LMDB maps it: LMDB itself would fault (SIGBUS) on a truncated file
/// and silently start over on an empty one.
@Suite struct DataFileCheckTests {
    /// An environment holding about 1 MiB, closed.
    private func filledEnvironment() throws -> String {
        let path = TemporaryDirectory("lmdb-tests").path
        let env = try Environment(path: path)
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        try env.write { txn in
            for key in 0..<256 { try txn.put(db, key: [UInt8(key)], value: [UInt8](repeating: UInt8(key), count: 4000)) }
        }
        env.close()
        return path
    }

    /// Raises the last page number both meta pages record by `pages`, as when LMDB allocated pages
    /// at the end that a transaction freed again and so never wrote: the file then ends before them.
    private func recordUnwrittenPages(_ pages: UInt64, in path: String) throws {
        let fd = open(path + "/data.mdb", O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        for meta in 0..<2 {
            let offset = off_t(meta * 4096 + 136)
            var last: UInt64 = 0
            try #require(pread(fd, &last, 8, offset) == 8)
            last += pages
            try #require(pwrite(fd, &last, 8, offset) == 8)
        }
    }

    @Test func aFewUnwrittenPagesAtTheEndAreMadeUpAndTheStoreOpens() throws {
        let path = try self.filledEnvironment()
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        var before = stat()
        #expect(stat(path + "/data.mdb", &before) == 0)
        try self.recordUnwrittenPages(1, in: path)
        let env = try Environment(path: path)
        let value = try env.read { txn in try txn.get(try txn.openDatabase("t"), key: [200]).map { Array($0) } }
        #expect(value == [UInt8](repeating: 200, count: 4000))
        env.close()
        var after = stat()
        #expect(stat(path + "/data.mdb", &after) == 0)
        #expect(after.st_size >= before.st_size + 4096, "the missing page was not made up")
    }

    @Test func moreUnwrittenPagesThanLMDBLeavesAreATruncatedFile() throws {
        let path = try self.filledEnvironment()
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        try self.recordUnwrittenPages(UInt64(DataFile.maximumUnwrittenTailPages) + 1, in: path)
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(error?.message.contains("truncated") == true, "\(String(describing: error))")
    }

    @Test func aTruncatedDataFileIsRefusedBeforeItIsMapped() throws {
        let path = try self.filledEnvironment()
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        let whole = try #require(readFileBytes(path + "/data.mdb"))
        #expect(truncate(path + "/data.mdb", off_t(whole.count / 2)) == 0)
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(error?.isDamaged == true)
        #expect(error?.message.contains("truncated") == true, "\(String(describing: error))")
        // The refusal released the directory: restored, it opens.
        let fd = open(path + "/data.mdb", O_WRONLY)
        #expect(whole.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == whole.count)
        close(fd)
        try Environment(path: path).close()
    }

    @Test func anEmptyDataFileIsRefusedNotMadeANewEnvironment() throws {
        let path = try self.filledEnvironment()
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        #expect(truncate(path + "/data.mdb", 0) == 0)
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(error?.isDamaged == true)
        #expect(error?.message.contains("empty") == true)
    }

    @Test func bothMetaPagesDamagedIsRefused() throws {
        let path = try self.filledEnvironment()
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        let fd = open(path + "/data.mdb", O_WRONLY)
        let zeros = [UInt8](repeating: 0, count: 8192)
        #expect(zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == 8192)
        close(fd)
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(error?.isDamaged == true)
        #expect(error?.message.contains("meta page") == true)
    }

    @Test func lmdbsDamageCodesAreDamage() {
        for code in [MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID, MDB_BAD_TXN] {
            #expect(LMDBError(code: code, operation: "mdb_cursor_get").isDamaged)
        }
        #expect(!LMDBError(code: MDB_NOTFOUND, operation: "mdb_get").isDamaged)
        #expect(LMDBError(code: EIO, operation: "mdb_txn_commit").isDiskFull)
        #expect(LMDBError(code: EROFS, operation: "open").isNotWritable)
    }

    @Test func aNewEnvironmentIsCreatedOnlyInAnEmptyDirectory() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer {
            unlink(path + "/notes.txt")
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        let file = open(path + "/notes.txt", O_WRONLY | O_CREAT, 0o600)
        close(file)
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(error?.code == ENOENT)
        #expect(error?.message.contains("notes.txt") == true)
        unlink(path + "/notes.txt")
        try Environment(path: path).close()
        // Reopening the store it made is not creating one.
        try Environment(path: path).close()
    }
}

/// A power cut or a kill during the very first start leaves what LMDB creates before the first commit
/// (lock.mdb, a data.mdb that is empty, torn, or records no commit); that is started over, since no
/// one was told anything is stored. Once the first commit is durable, a mark says so, and the same
/// damage is refused.
@Suite struct InterruptedCreationTests {
    private func write(_ bytes: [UInt8], to path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        if !bytes.isEmpty { #expect(bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count) }
        close(fd)
    }

    /// What a first start leaves when it is cut before its first commit: `dataFile` nil for none.
    private func interruptedCreation(dataFile: [UInt8]?) -> String {
        let path = TemporaryDirectory("lmdb-tests").path
        self.write([], to: path + "/lock.mdb")
        if let dataFile { self.write(dataFile, to: path + "/data.mdb") }
        return path
    }

    /// Opens `path`, writes and reads back one value: the store works.
    private func expectUsable(_ path: String) throws {
        let env = try Environment(path: path)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        try env.write { txn in try txn.put(db, key: [1], value: [42]) }
        #expect(try env.read { txn in try txn.get(db, key: [1]).map { Array($0) } } == [42])
    }

    /// The meta pages of a new environment that never committed (transaction 0), as LMDB writes them.
    private func uncommittedDataFile() throws -> [UInt8] {
        let path = TemporaryDirectory("lmdb-tests").path
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        try Environment(path: path).close()
        #expect(access(path + "/" + Environment.createdMark, F_OK) != 0, "no commit, so no mark")
        let fd = open(path + "/data.mdb", O_RDONLY)
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 1 << 16)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return Array(bytes.prefix(max(count, 0)))
    }

    @Test(arguments: ["lock.mdb alone", "empty data.mdb", "meta pages torn to zeros", "meta pages of transaction 0", "a short data.mdb"])
    func aFirstStartCutBeforeItsFirstCommitIsStartedOver(leftover: String) throws {
        let bytes: [UInt8]? =
            switch leftover {
            case "lock.mdb alone": nil
            case "empty data.mdb": []
            case "meta pages torn to zeros": [UInt8](repeating: 0, count: 8192)
            case "a short data.mdb": [UInt8](repeating: 0xEE, count: 100)
            default: try self.uncommittedDataFile()
            }
        let path = self.interruptedCreation(dataFile: bytes)
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        let env = try Environment(path: path)
        #expect(env.creationNote?.contains("created afresh") == true, "\(String(describing: env.creationNote))")
        env.close()
        try self.expectUsable(path)
        #expect(access(path + "/" + Environment.createdMark, F_OK) == 0, "the first commit marks the store")
        // Reopened, it is an existing store, not a creation.
        let again = try Environment(path: path)
        #expect(again.creationNote == nil)
        again.close()
    }

    @Test func onceMarkedTheSameDamageIsRefused() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        try self.expectUsable(path)
        #expect(access(path + "/" + Environment.createdMark, F_OK) == 0)
        self.write([UInt8](repeating: 0, count: 8192), to: path + "/data.mdb")
        let torn = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(torn?.isDamaged == true, "\(String(describing: torn))")
        #expect(unlink(path + "/data.mdb") == 0)
        let missing = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(missing?.isDamaged == true && missing?.message.contains("data.mdb is missing") == true, "\(String(describing: missing))")
    }

    @Test func aStoreFromBeforeTheMarkKeepsItsDataAndIsMarked() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer {
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        try self.expectUsable(path)
        #expect(unlink(path + "/" + Environment.createdMark) == 0)
        let env = try Environment(path: path)
        #expect(env.creationNote == nil)
        let db = try env.write { txn in try txn.openDatabase("t", create: false) }
        #expect(try env.read { txn in try txn.get(db, key: [1]).map { Array($0) } } == [42])
        env.close()
        #expect(access(path + "/" + Environment.createdMark, F_OK) == 0)
    }

    @Test func aReadOnlyOpenOfAnInterruptedCreationRefusesAndWritesNothing() throws {
        let path = self.interruptedCreation(dataFile: [])
        defer { removeDirectory(path) }
        var options = Environment.Options()
        options.readOnly = true
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path, options: options) }
        #expect(error?.message.contains("before its first commit") == true, "\(String(describing: error))")
        #expect(access(path + "/data.mdb", F_OK) == 0 && access(path + "/lock.mdb", F_OK) == 0)
    }

    @Test func anInterruptedCreationBesideOtherFilesIsRefusedAndKept() throws {
        let path = self.interruptedCreation(dataFile: [])
        defer {
            unlink(path + "/notes.txt")
            unlink(path + "/exclusive.lock")
            removeDirectory(path)
        }
        self.write([1], to: path + "/notes.txt")
        let error = #expect(throws: LMDBError.self) { _ = try Environment(path: path) }
        #expect(error?.message.contains("notes.txt") == true, "\(String(describing: error))")
        #expect(access(path + "/data.mdb", F_OK) == 0, "nothing is cleared when the directory holds more")
    }
}
