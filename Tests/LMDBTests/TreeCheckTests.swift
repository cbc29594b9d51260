import CLMDB
import Glibc
import SyntheticFaces
import TestSupport
import Testing

@testable import LMDB

/// The structural check of data.mdb's trees at open (``TreeCheck``): a healthy store with several
/// named databases, trees two levels deep or more, overflow values and a free-page list passes; a
/// page LMDB would misread is refused, naming the page, the database and the fault.
@Suite struct TreeCheckTests {
    /// A store of four named databases: `records` (20,000 small values, a third deleted and some
    /// written again, so that branch keys are stale), `big` (values of 3 to 5 pages), `names` (keys of
    /// many lengths) and `empty`.
    static func makeStore() throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("treecheck")
        let path = directory.path
        var options = Environment.Options()
        options.durable = false
        let env = try Environment(path: path, options: options)
        defer { env.close() }
        var random = SeededRandom(seed: 5)
        let (records, big, names, _) = try env.write { txn in
            (
                try txn.openDatabase("records", create: true), try txn.openDatabase("big", create: true),
                try txn.openDatabase("names", create: true), try txn.openDatabase("empty", create: true)
            )
        }
        let keys = (0..<20_000).map { Self.key(UInt64($0) &* 0x9E37_79B9) }
        try env.write { txn in
            for key in keys { try txn.put(records, key: key, value: [UInt8](repeating: UInt8(key[7]), count: 100)) }
            for index in 0..<30 {
                try txn.put(big, key: Self.key(UInt64(index)), value: [UInt8](repeating: UInt8(index), count: 12_000 + index * 200))
            }
            for index in 0..<2_000 {
                let name = (0..<(1 + index % 40)).map { _ in UInt8.random(in: 97...122, using: &random) }
                try txn.put(names, key: name, value: [UInt8(index & 0xFF)])
            }
        }
        for round in 0..<4 {
            try env.write { txn in
                for key in keys where (Int(key[7]) + round) % 3 == 0 { try txn.delete(records, key: key) }
                for key in keys where (Int(key[6]) + round) % 5 == 0 { try txn.put(records, key: key, value: [UInt8(round)]) }
                try txn.delete(big, key: Self.key(UInt64(round)))
            }
        }
        return directory
    }

    static func key(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    @Test func aHealthyStoreWithSeveralTreesPassesAndReadsBack() throws {
        let directory = try Self.makeStore()
        defer { directory.remove() }
        let path = directory.path
        let file = try DataView(path)
        #expect(file.record("records").depth >= 2)
        // Large enough to be walked on two threads: every test of damage to it goes through the split.
        #expect(file.record("records").leafPages >= TreeCheck.parallelLeafPages)
        #expect(file.record("big").overflowPages > 0)
        #expect(file.record("empty").root == UInt64.max)
        #expect(file.record(free: ()).entries > 0, "the deletions should have left a free-page list")
        // Opened again (the check runs), read-only too, and every tree reads through.
        let env = try Environment(path: path)
        let count = try env.read { txn in
            try ["records", "big", "names", "empty"].map { name in try txn.count(try txn.openDatabase(name, create: false)) }
        }
        env.close()
        #expect(count[1] == 26 && count[2] > 1_000 && count[3] == 0)
        var options = Environment.Options()
        options.readOnly = true
        try Environment(path: path, options: options).close()
    }

    /// A store in the orders and layouts the registry does not use, written with LMDB's own calls:
    /// integer and reversed keys, and duplicates (sorted, fixed-size integers, and reversed) both in
    /// sub-pages (a few per key) and in sub-databases (thousands per key).
    static func makeStoreOfOtherLayouts() throws -> TemporaryDirectory {
        let directory = TemporaryDirectory("treecheck")
        var options = Environment.Options()
        options.durable = false
        let env = try Environment(path: directory.path, options: options)
        defer { env.close() }
        var txn: OpaquePointer?
        #expect(mdb_txn_begin(env.handle, nil, 0, &txn) == 0)
        func database(_ name: String, _ flags: Int32) -> MDB_dbi {
            var dbi: MDB_dbi = 0
            #expect(mdb_dbi_open(txn, name, UInt32(flags | MDB_CREATE), &dbi) == 0)
            return dbi
        }
        func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) {
            var key = key
            var value = value
            key.withUnsafeMutableBytes { k in
                value.withUnsafeMutableBytes { v in
                    var kv = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                    var vv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                    #expect(mdb_put(txn, dbi, &kv, &vv, 0) == 0)
                }
            }
        }
        func bytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        let integers = database("integers", MDB_INTEGERKEY)
        let reversed = database("reversed", MDB_REVERSEKEY)
        let duplicates = database("duplicates", MDB_DUPSORT)
        let fixed = database("fixed", MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP)
        let reversedDuplicates = database("reversed-duplicates", MDB_DUPSORT | MDB_REVERSEDUP)
        var random = SeededRandom(seed: 9)
        for index in 0..<5_000 {
            put(integers, bytes(UInt64(index) &* 7919), [UInt8](repeating: 1, count: 40))
            put(reversed, Array("name-\(random.next() % 100_000)".utf8), [2])
        }
        for key in 0..<300 {
            // Keys 0 and 1 get thousands of duplicates (a sub-database), the others a few (a sub-page).
            let count = key < 2 ? 3_000 : 1 + key % 5
            for _ in 0..<count {
                put(duplicates, Array("key-\(key)".utf8), Array("value-\(random.next() % 1_000_000)".utf8))
                put(fixed, bytes(UInt32(key)), bytes(UInt32(truncatingIfNeeded: random.next())))
                put(reversedDuplicates, bytes(UInt32(key)), Array("\(random.next() % 1_000_000)-x".utf8))
            }
        }
        #expect(mdb_txn_commit(txn) == 0)
        return directory
    }

    @Test func otherKeyOrdersAndDuplicatesPass() throws {
        let directory = try Self.makeStoreOfOtherLayouts()
        defer { directory.remove() }
        let file = try DataView(directory.path)
        #expect(file.record("integers").depth >= 2 && file.record("duplicates").depth >= 2)
        try Environment(path: directory.path).close()
    }

    @Test func duplicatesOutOfOrderInASubPageAreRefused() throws {
        let directory = try Self.makeStoreOfOtherLayouts()
        defer { directory.remove() }
        let file = try DataView(directory.path)
        // The first sub-page (a node with F_DUPDATA alone) holding two duplicates or more: its first
        // two node offsets, counted from the sub-page's start, swapped.
        let nodes = file.leaves(of: "duplicates").flatMap { file.nodes(of: $0) }
        let subPage = nodes.first { node in
            let data = node + 8 + Int(file.u16(node + 6))
            return file.u16(node + 4) == 0x04 && file.u16(data + 12) >= 16 + 4
        }
        let node = try #require(subPage)
        let data = node + 8 + Int(file.u16(node + 6))
        let (first, second) = (file.u16(data + 16), file.u16(data + 18))
        file.write(second, at: data + 16)
        file.write(first, at: data + 18)
        try file.save()
        #expect {
            try Environment(path: directory.path).close()
        } throws: { error in
            let message = (error as? LMDBError)?.message ?? ""
            return message.contains("the sub-page of duplicates at node") && message.contains("database 'duplicates' has keys out of order")
        }
    }

    @Test func aPageThatClaimsToBeAnotherIsRefused() throws {
        try Self.expectRefused("claims to be page 7") { file in
            let leaf = file.leaves(of: "records")[3]
            file.write(UInt64(7), at: leaf * file.pageSize)
            return "page \(leaf) of database 'records' claims to be page 7"
        }
    }

    @Test func aNodeOffsetOutsideItsPageIsRefused() throws {
        try Self.expectRefused("outside") { file in
            let leaf = file.leaves(of: "names")[1]
            file.write(UInt16(file.pageSize - 4), at: leaf * file.pageSize + 16 + 2)
            return "page \(leaf) of database 'names' has node 1 at offset \(file.pageSize - 4)"
        }
    }

    @Test func keysOutOfOrderInALeafAreRefused() throws {
        try Self.expectRefused("out of order") { file in
            let leaf = file.leaves(of: "records")[5]
            let at = leaf * file.pageSize + 16
            let (first, second) = (file.u16(at), file.u16(at + 2))
            file.write(second, at: at)
            file.write(first, at: at + 2)
            return "page \(leaf) of database 'records' has keys out of order at node 1"
        }
    }

    @Test func keysOutsideTheirParentsBoundsAreRefused() throws {
        // The first key of the second leaf made smaller than its parent's key for it.
        try Self.expectRefused("below its parent's key") { file in
            let leaf = file.leaves(of: "records")[1]
            let node = leaf * file.pageSize + Int(file.u16(leaf * file.pageSize + 16))
            file.write(UInt64(0), at: node + 8)
            return "page \(leaf) of database 'records' has a key at node 0 below its parent's key for it"
        }
    }

    @Test func aChildBeyondTheEndIsRefused() throws {
        try Self.expectRefused("outside the committed pages") { file in
            let root = Int(file.record("records").root)
            let node = root * file.pageSize + Int(file.u16(root * file.pageSize + 16 + 2))
            file.write(UInt16(0xFFF0), at: node)
            file.write(UInt16(0x0100), at: node + 2)
            return "page \(root) of database 'records' refers to page \(0x0100_FFF0), outside the committed pages"
        }
    }

    @Test func aCycleIsRefused() throws {
        try Self.expectRefused("reached twice") { file in
            // The root's second child pointed back at the root.
            let root = Int(file.record("records").root)
            let node = root * file.pageSize + Int(file.u16(root * file.pageSize + 16 + 2))
            file.write(UInt16(root & 0xFFFF), at: node)
            file.write(UInt16(root >> 16), at: node + 2)
            return "page \(root) of database 'records' is reached twice"
        }
    }

    @Test func aPageBothHalvesOfASplitWalkReachIsRefused() throws {
        try Self.expectRefused("reached twice") { file in
            // The root's children in page order; the middle one pointed at the one before it. The two
            // walkers take subtrees as they go, so either one meets the page twice itself or each
            // meets it once and merging their claims finds it: refused both ways.
            let root = Int(file.record("records").root)
            let children = file.nodes(of: root).map { node in
                (node: node, pgno: Int(file.u16(node)) | Int(file.u16(node + 2)) << 16 | Int(file.u16(node + 4)) << 32)
            }.sorted { $0.pgno < $1.pgno }
            try #require(children.count >= 2)
            let (last, first) = (children[children.count / 2 - 1], children[children.count / 2])
            file.write(UInt16(last.pgno & 0xFFFF), at: first.node)
            file.write(UInt16(last.pgno >> 16), at: first.node + 2)
            return "page \(last.pgno) of database 'records' is reached twice"
        }
    }

    @Test func anOverflowRunOfTheWrongLengthIsRefused() throws {
        try Self.expectRefused("a run of 9 pages") { file in
            let leaf = file.leaves(of: "big")[0]
            let node = leaf * file.pageSize + Int(file.u16(leaf * file.pageSize + 16))
            let first = Int(file.u64(node + 8 + Int(file.u16(node + 6))))
            file.write(UInt32(9), at: first * file.pageSize + 12)
            return "page \(first) of database 'big'"
        }
    }

    @Test func aCountOtherThanTheRecordsIsRefused() throws {
        try Self.expectRefused("records 5 entries") { file in
            // The `names` record in the main database's leaf says 5 entries.
            let record = file.recordOffset("names")
            file.write(UInt64(5), at: record + 32)
            return "database 'names' records 5 entries but holds"
        }
    }

    @Test func aFreePageListNamingAPageInUseIsRefused() throws {
        try Self.expectRefused("which a database uses") { file in
            // The root of `records` put in the first non-empty free-page list, keeping its order
            // (decreasing): in place of its first page below the root, or of its last.
            let root = file.record("records").root
            let list = try #require(file.freeLists().first { $0.count > 0 }, "the deletions should have left free pages")
            let pages = (0..<list.count).map { file.u64(list.offset + 8 * ($0 + 1)) }
            let index = pages.firstIndex { $0 < root } ?? list.count - 1
            file.write(root, at: list.offset + 8 * (index + 1))
            return "lists page \(root), which a database uses"
        }
    }

    /// The check of an open store (``Environment/treeDamage(within:)``, which `verify` runs) finds
    /// what the next open finds: a random sample of pages, each overwritten whole or in its header only
    /// under an open environment, gives the same damage (or none, for a free page) both ways.
    @Test func anOpenStoreIsCheckedAsTheNextOpenChecksIt() throws {
        var random = SeededRandom(seed: 2806)
        var damaged = 0
        for trial in 0..<12 {
            let directory = try Self.makeStore()
            defer { directory.remove() }
            let env = try Environment(path: directory.path)
            #expect(try env.write { txn in try env.treeDamage(within: txn) } == nil)
            let file = try DataView(directory.path)
            // Two trials in three a page of a tree (most of the file is free pages), the third any page.
            let inUse = file.leaves(of: "records") + file.leaves(of: "names") + [Int(file.record("records").root)]
            let page = trial % 3 == 2 ? Int.random(in: 2..<(file.bytes.count / file.pageSize), using: &random) : inUse.randomElement(using: &random)!
            for offset in 0..<(trial % 2 == 0 ? file.pageSize : 16) {
                file.bytes[page * file.pageSize + offset] = UInt8.random(in: 0...255, using: &random)
            }
            try file.save()
            let online = try env.write { txn in try env.treeDamage(within: txn) }
            env.close()
            var atOpen: LMDBError?
            do { try Environment(path: directory.path).close() } catch { atOpen = error }
            #expect(online?.message == atOpen?.message, "trial \(trial), page \(page)")
            if online != nil { damaged += 1 }
        }
        #expect(damaged >= 8, "every page of a tree, overwritten, is damage")
    }

    /// Builds a store, lets `damage` change it (returning what the refusal must say), and expects the
    /// open to be refused as damaged with that message.
    static func expectRefused(_ words: String, _ damage: (DataView) throws -> String) throws {
        let directory = try Self.makeStore()
        defer { directory.remove() }
        let path = directory.path
        let file = try DataView(path)
        let expected = try damage(file)
        try file.save()
        do {
            try Environment(path: path).close()
            Issue.record("a store with \(words) was opened")
        } catch {
            #expect(error.isDamaged, "\(error)")
            #expect(error.message.contains(words) && error.message.contains(expected), "\(error.message)")
        }
    }
}

/// data.mdb read whole, with the few lookups the damage needs.
final class DataView {
    let path: String
    var bytes: [UInt8]
    let pageSize = 4096
    /// Where the newer meta page is.
    let meta: Int

    init(_ directory: String) throws {
        self.path = directory + "/data.mdb"
        let bytes = try #require(readFileBytes(self.path))
        self.bytes = bytes
        let txnid = { (page: Int) in bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: page + 144, as: UInt64.self) } }
        self.meta = txnid(4096) > txnid(0) ? 4096 : 0
    }

    func u16(_ at: Int) -> UInt16 { self.bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt16.self) } }
    func u64(_ at: Int) -> UInt64 { self.bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt64.self) } }
    func write<T: FixedWidthInteger>(_ value: T, at: Int) {
        withUnsafeBytes(of: value.littleEndian) { source in
            for (index, byte) in source.enumerated() { self.bytes[at + index] = byte }
        }
    }

    func save() throws {
        let fd = open(self.path, O_WRONLY)
        defer { close(fd) }
        #expect(self.bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == self.bytes.count)
    }

    struct Record {
        var depth: Int
        var leafPages: UInt64
        var overflowPages: UInt64
        var entries: UInt64
        var root: UInt64
    }

    func record(at offset: Int) -> Record {
        Record(
            depth: Int(self.u16(offset + 6)), leafPages: self.u64(offset + 16), overflowPages: self.u64(offset + 24), entries: self.u64(offset + 32),
            root: self.u64(offset + 40))
    }

    func record(free: Void) -> Record { self.record(at: self.meta + 40) }

    /// Where the record of named database `name` is in the main database's (one) leaf.
    func recordOffset(_ name: String) -> Int {
        let main = self.record(at: self.meta + 88)
        precondition(main.depth == 1)
        let page = Int(main.root) * self.pageSize
        for index in 0..<((Int(self.u16(page + 12)) - 16) / 2) {
            let node = page + Int(self.u16(page + 16 + 2 * index))
            let size = Int(self.u16(node + 6))
            if String(decoding: self.bytes[(node + 8)..<(node + 8 + size)], as: UTF8.self) == name { return node + 8 + size }
        }
        preconditionFailure("no database \(name)")
    }

    func record(_ name: String) -> Record { self.record(at: self.recordOffset(name)) }

    /// The leaf pages of `name` (the free-page database when nil), in key order.
    func leaves(of name: String?) -> [Int] {
        let record = name.map { self.record($0) } ?? self.record(free: ())
        var level = [Int(record.root)]
        for _ in 1..<record.depth {
            level = level.flatMap { page in
                (0..<((Int(self.u16(page * self.pageSize + 12)) - 16) / 2)).map { index in
                    let node = page * self.pageSize + Int(self.u16(page * self.pageSize + 16 + 2 * index))
                    return Int(self.u16(node)) | Int(self.u16(node + 2)) << 16
                }
            }
        }
        return level
    }

    /// Where the nodes of the page numbered `page` are.
    func nodes(of page: Int) -> [Int] {
        let start = page * self.pageSize
        return (0..<((Int(self.u16(start + 12)) - 16) / 2)).map { start + Int(self.u16(start + 16 + 2 * $0)) }
    }

    /// Where the free-page lists are (in their node, or on their overflow pages), and their lengths.
    func freeLists() -> [(offset: Int, count: Int)] {
        self.leaves(of: nil).flatMap { page in
            (0..<((Int(self.u16(page * self.pageSize + 12)) - 16) / 2)).map { index in
                let node = page * self.pageSize + Int(self.u16(page * self.pageSize + 16 + 2 * index))
                let data = node + 8 + Int(self.u16(node + 6))
                let list = self.u16(node + 4) & 1 != 0 ? Int(self.u64(data)) * self.pageSize + 16 : data
                return (list, Int(self.u64(list)))
            }
        }
    }
}
