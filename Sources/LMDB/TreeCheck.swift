import CLMDB
import CPrefetch
import Glibc
import Locks
import Synchronization

/// The structural check of `data.mdb`'s B+trees, made before LMDB reads any of them (from
/// ``Environment/init(path:options:)``): liblmdb follows page numbers and node offsets from the file without
/// bounds checks, so a damaged branch or leaf page makes it read a wild address — a fault, or garbage
/// taken for a record. This walks, from the newest meta page, the free-page database, the main one and
/// every named database recorded in it (with their `MDB_DUPSORT` sub-pages and sub-databases, should a
/// database use them), through LMDB's map of the file (or a private read-only map of its own when
/// that is not found), and refuses what LMDB could
/// misread:
///
/// - a page number outside the committed pages or the file, a page whose header names another page,
///   a page reached twice (a cycle, or a page two parents share), a page of the wrong kind for its
///   level (branch pages above `md_depth`, leaf pages at it, overflow pages only from `F_BIGDATA`);
/// - `mp_lower`/`mp_upper` out of order or outside the page, a node offset outside `[mp_upper, page
///   size)`, a node's header, key or data running off its page; an overflow run outside the file or
///   of another length than its value needs;
/// - keys out of order in a page, or outside the range their parent's branch keys give (LMDB's
///   orders: bytes then length, reversed bytes, or native integers, as the database's flags say);
/// - entry and page counts other than the database's `MDB_db` record says;
/// - a free-page list naming a page outside the file, a page in use, or a page twice.
///
/// It reads branch and leaf pages, the first page of each overflow value, and free-page lists; never
/// the body of a stored value (damage there is for the store's own record checks).
///
/// Layout, from mdb.c (LMDB 0.9, 64-bit): a page header is `mp_pgno` (8 bytes), `mp_pad` (2),
/// `mp_flags` (2), `mp_lower` and `mp_upper` (2 each; an overflow page's 4-byte `mp_pages` instead),
/// then `mp_ptrs`, the 2-byte offsets of the nodes from the page start. A node is `mn_lo`, `mn_hi`
/// (the data size, or in a branch the child's page number with `mn_flags` as its top 16 bits),
/// `mn_flags`, `mn_ksize`, then the key and the data. An `MDB_db` record is 48 bytes: `md_pad` (4),
/// `md_flags` (2), `md_depth` (2), then branch, leaf and overflow page counts, entries and root (8 each).
enum TreeCheck {
    /// Checks the trees of the file open as `fd` (`size` bytes), whose newest valid meta page is
    /// `meta`, through a private read-only map of its own. A file so much shorter than its meta says
    /// that ``DataFile`` reports it as truncated is left to it; a few missing pages at the end (which
    /// DataFile makes up with zeros) are fine as long as no tree reaches them.
    /// - Throws: ``LMDBError`` `MDB_CORRUPTED`, saying which page of which database is wrong and how.
    static func check(fd: Int32, size: Int, meta: DataFile.Meta, path: String) throws(LMDBError) {
        guard self.lastPageToWalk(size: size, meta: meta) != nil else { return }
        guard let map = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), map != MAP_FAILED else {
            throw LMDBError(code: errno, operation: "mmap(\(path))")
        }
        defer { munmap(map, size) }
        try self.check(map: UnsafeRawPointer(map), size: size, meta: meta, path: path)
    }

    /// Checks the trees through `map`, a read-only mapping of the file's first `size` bytes made by
    /// someone else: LMDB's own, after `mdb_env_open` and before any transaction has read a tree (see
    /// ``Environment/init(path:options:)``). The pages the check faults in then stay mapped for the
    /// start-up load that reads the records next, and no map of the whole file is torn down.
    static func check(map: UnsafeRawPointer, size: Int, meta: DataFile.Meta, path: String) throws(LMDBError) {
        guard let lastPage = self.lastPageToWalk(size: size, meta: meta) else { return }
        var walker = Walker(base: map, size: size, pageSize: meta.pageSize, lastPage: lastPage, txnid: meta.txnid, path: path)
        try walker.run()
    }

    /// The meta's last page, when the trees are this check's to walk: nil when it lies so far past the
    /// file's end that ``DataFile`` refuses the file as truncated.
    private static func lastPageToWalk(size: Int, meta: DataFile.Meta) -> Int? {
        guard let lastPage = Int(exactly: meta.lastPage), lastPage >= 1, lastPage <= size / meta.pageSize + DataFile.maximumUnwrittenTailPages
        else { return nil }
        return lastPage
    }

    /// How a database orders its keys (mdb.c's `mdb_cmp_memn`, `mdb_cmp_memnr`, `mdb_cmp_cint`).
    enum Order {
        case bytes, reversedBytes, integers
    }

    /// One tree: its `MDB_db` record and what its pages must look like.
    struct Tree {
        var name: String
        var record: Record
        var order: Order
        /// The leaf pages' flags: `P_LEAF`, or `P_LEAF | P_LEAF2` in an `MDB_DUPFIXED` sub-database.
        var leafFlags: UInt16 = pLeaf
        /// Whether leaves hold named databases' records (the main database).
        var isMain = false
        /// Whether leaves hold free-page lists (the free-page database).
        var isFree = false
        /// The order of duplicates, when the database is `MDB_DUPSORT`.
        var duplicates: Order?
        var duplicatesFixed = false
        /// Whether this is the sub-database of one key's duplicates (keys may be empty).
        var isDuplicates = false
    }

    /// An `MDB_db` record.
    struct Record {
        var pad: UInt32
        var flags: UInt16
        var depth: Int
        var branchPages: UInt64
        var leafPages: UInt64
        var overflowPages: UInt64
        var entries: UInt64
        var root: UInt64
    }

    /// What a walk found, to compare with the record.
    struct Counts {
        var branchPages: UInt64 = 0
        var leafPages: UInt64 = 0
        var overflowPages: UInt64 = 0
        var entries: UInt64 = 0

        static func += (counts: inout Counts, other: Counts) {
            counts.branchPages += other.branchPages
            counts.leafPages += other.leafPages
            counts.overflowPages += other.overflowPages
            counts.entries += other.entries
        }
    }

    /// A tree with at least this many leaf pages is walked on two threads: its subtrees (see
    /// ``sharedSubtrees``) are handed out in runs to two walkers, whichever asks first. Reading the pages is
    /// most of an open's time for a large store (a million 512-float templates: about 540,000 leaf
    /// pages, 0.85 s on one thread: 1.6 µs a page). From about 64 pages, some 100 µs of walking, the
    /// work to share is well above the cost of starting a thread.
    static let parallelLeafPages: UInt64 = 64

    /// A split tree is shared out from the first level below its root with at least this many pages
    /// (or its leaves' parents): enough runs that the two walkers finish close together.
    static let sharedSubtrees = 32

    /// Where a key lies in the file.
    struct Key {
        var offset: Int
        var count: Int
    }

    static let pBranch: UInt16 = 0x01
    static let pLeaf: UInt16 = 0x02
    static let pOverflow: UInt16 = 0x04
    static let pLeaf2: UInt16 = 0x20
    static let pSubpage: UInt16 = 0x40
    /// Flags a written page may carry besides its kind (`P_DIRTY`, `P_LOOSE`, `P_KEEP`).
    static let transientFlags: UInt16 = 0x10 | 0x4000 | 0x8000
    static let fBigData: UInt16 = 0x01
    static let fSubData: UInt16 = 0x02
    static let fDupData: UInt16 = 0x04
    static let headerSize = 16
    static let nodeSize = 8
    static let recordSize = 48
    static let invalidPage = UInt64.max
    /// mdb.c's `CURSOR_STACK`: no tree is deeper.
    static let maximumDepth = 32
    /// mdb.c's `MDB_MAXKEYSIZE`.
    static let maximumKeySize = 511
    /// The `md_flags` LMDB keeps in a record (`PERSISTENT_FLAGS` of what `mdb_dbi_open` takes).
    static let knownDatabaseFlags = UInt16(MDB_REVERSEKEY | MDB_DUPSORT | MDB_INTEGERKEY | MDB_DUPFIXED | MDB_INTEGERDUP | MDB_REVERSEDUP)

    /// A page to walk below a split: its number, the key range its parent gives it, and that parent.
    typealias Child = (pgno: UInt64, lower: Key?, upper: Key?, parent: Int)

    /// The subtrees of a split tree, handed out a run at a time to whichever walker asks first: halves
    /// fixed in advance finished up to 60 % apart (a root of three children splits one against two).
    final class SharedWork: @unchecked Sendable {
        let items: [Child]
        let level: Int
        private let next = Atomic<Int>(0)
        private let stopped = Atomic<Bool>(false)
        private let run: Int

        init(items: [Child], level: Int) {
            self.items = items
            self.level = level
            // Runs of consecutive pages keep a walker's reads in page order and its prefetches useful.
            self.run = max(1, items.count / 64)
        }

        /// The next run of items to walk, nil when none is left or a walker has stopped on an error.
        func take() -> Range<Int>? {
            guard !self.stopped.load(ordering: .relaxed) else { return nil }
            let start = self.next.wrappingAdd(self.run, ordering: .relaxed).oldValue
            return start < self.items.count ? start..<min(self.items.count, start + self.run) : nil
        }

        func stop() { self.stopped.store(true, ordering: .relaxed) }
    }

    /// The second walker of a split tree, on its own thread, taking items of the shared work as the
    /// first does; read by the first only after that thread has ended.
    final class SecondWalker: @unchecked Sendable {
        var walker: Walker
        let work: SharedWork
        let tree: Tree
        var counts = Counts()
        var error: LMDBError?

        init(walker: Walker, work: SharedWork, tree: Tree) {
            self.walker = walker
            self.walker.freeLists = []
            self.walker.named = []
            self.work = work
            self.tree = tree
        }

        func run() {
            do throws(LMDBError) {
                try self.walker.walk(self.work, self.tree, &self.counts)
            } catch {
                self.error = error
                self.work.stop()
            }
        }
    }

    struct Walker {
        let base: UnsafeRawPointer
        let size: Int
        let pageSize: Int
        let lastPage: Int
        let txnid: UInt64
        let path: String
        /// One bit per page: reached by a tree or listed as free.
        var seen: [UInt64]
        /// Where the free-page lists are: (offset, bytes, the transaction that freed them).
        var freeLists: [(offset: Int, count: Int, txnid: UInt64)] = []
        /// The named databases recorded in the main one.
        var named: [(name: String, record: Record)] = []

        init(base: UnsafeRawPointer, size: Int, pageSize: Int, lastPage: Int, txnid: UInt64, path: String) {
            self.base = base
            self.size = size
            self.pageSize = pageSize
            self.lastPage = lastPage
            self.txnid = txnid
            self.path = path
            self.seen = [UInt64](repeating: 0, count: lastPage / 64 + 1)
        }

        @inline(__always) func load<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            T(littleEndian: self.base.loadUnaligned(fromByteOffset: offset, as: T.self))
        }

        func damaged(_ detail: String) -> LMDBError {
            LMDBError(code: MDB_CORRUPTED, operation: "open(\(self.path))", detail: "data.mdb is damaged: \(detail) (transaction \(self.txnid))")
        }

        func record(at offset: Int) -> Record {
            Record(
                pad: self.load(offset, UInt32.self), flags: self.load(offset + 4, UInt16.self), depth: Int(self.load(offset + 6, UInt16.self)),
                branchPages: self.load(offset + 8, UInt64.self), leafPages: self.load(offset + 16, UInt64.self),
                overflowPages: self.load(offset + 24, UInt64.self), entries: self.load(offset + 32, UInt64.self),
                root: self.load(offset + 40, UInt64.self))
        }

        mutating func run() throws(LMDBError) {
            // The meta page DataFile chose: the valid one with its txnid (the first, as LMDB, on a tie).
            var metaOffset: Int?
            for offset in [0, self.pageSize] where offset + DataFile.headerBytes <= self.size {
                if self.load(offset + 10, UInt16.self) & 0x08 != 0, self.load(offset + 16, UInt32.self) == DataFile.magic,
                    self.load(offset + 144, UInt64.self) == self.txnid
                {
                    metaOffset = offset
                    break
                }
            }
            guard let metaOffset else { return }
            let free = Tree(name: "the free-page database", record: self.record(at: metaOffset + 40), order: .integers, isFree: true)
            try self.walk(free)
            let mainRecord = self.record(at: metaOffset + 88)
            var main = try self.tree("the main database", mainRecord)
            main.isMain = true
            try self.walk(main)
            for (name, record) in self.named {
                try self.walk(try self.tree("database '\(name)'", record))
            }
            try self.checkFreeLists()
        }

        /// The tree a record describes, its flags checked.
        func tree(_ name: String, _ record: Record) throws(LMDBError) -> Tree {
            guard record.flags & ~TreeCheck.knownDatabaseFlags == 0 else {
                throw self.damaged("\(name) has unknown flags 0x\(String(record.flags, radix: 16))")
            }
            let flags = Int32(record.flags)
            var tree = Tree(
                name: name, record: record,
                order: flags & MDB_REVERSEKEY != 0 ? .reversedBytes : flags & MDB_INTEGERKEY != 0 ? .integers : .bytes)
            if flags & MDB_DUPSORT != 0 {
                tree.duplicates = flags & MDB_INTEGERDUP != 0 ? .integers : flags & MDB_REVERSEDUP != 0 ? .reversedBytes : .bytes
                tree.duplicatesFixed = flags & MDB_DUPFIXED != 0
            }
            return tree
        }

        /// Walks `tree` and compares what it holds with its record; returns its entry count.
        @discardableResult
        mutating func walk(_ tree: Tree) throws(LMDBError) -> UInt64 {
            let record = tree.record
            var counts = Counts()
            if record.root == TreeCheck.invalidPage {
                guard record.depth == 0, record.entries == 0, record.branchPages == 0, record.leafPages == 0, record.overflowPages == 0 else {
                    throw self.damaged("\(tree.name) has no root page but records \(record.entries) entries and a depth of \(record.depth)")
                }
                return 0
            }
            guard (1...TreeCheck.maximumDepth).contains(record.depth) else {
                throw self.damaged("\(tree.name) records a depth of \(record.depth)")
            }
            let split = record.depth >= 2 && record.leafPages >= TreeCheck.parallelLeafPages && !tree.isMain && !tree.isFree
            try self.visit(record.root, level: 1, lower: nil, upper: nil, tree, &counts, parent: nil, split: split)
            func mismatch(_ what: String, _ recorded: UInt64, _ found: UInt64) -> LMDBError {
                self.damaged("\(tree.name) records \(recorded) \(what) but holds \(found)")
            }
            guard counts.entries == record.entries else { throw mismatch("entries", record.entries, counts.entries) }
            guard counts.branchPages == record.branchPages else { throw mismatch("branch pages", record.branchPages, counts.branchPages) }
            guard counts.leafPages == record.leafPages else { throw mismatch("leaf pages", record.leafPages, counts.leafPages) }
            guard counts.overflowPages == record.overflowPages else {
                throw mismatch("overflow pages", record.overflowPages, counts.overflowPages)
            }
            return counts.entries
        }

        /// Claims pages `first ..< first + count` for `tree`: committed, in the file, reached once.
        mutating func claim(_ first: UInt64, count: Int, _ tree: Tree, from parent: Int?) throws(LMDBError) -> Int {
            func source() -> String { parent.map { "page \($0) of \(tree.name)" } ?? tree.name }
            guard first >= 2, first <= UInt64(self.lastPage), UInt64(self.lastPage) - first >= UInt64(count - 1) else {
                let what = count > 1 ? "pages \(first)…\(first &+ UInt64(count - 1))" : "page \(first)"
                throw self.damaged("\(source()) refers to \(what), outside the committed pages 2…\(self.lastPage)")
            }
            let page = Int(first)
            guard (page + count) * self.pageSize <= self.size else {
                throw self.damaged("\(source()) refers to page \(page + count - 1), beyond the end of data.mdb (\(self.size) bytes)")
            }
            for index in page..<(page + count) {
                let (word, bit) = (index >> 6, UInt64(1) << UInt64(index & 63))
                guard self.seen[word] & bit == 0 else {
                    throw self.damaged("page \(index) of \(tree.name) is reached twice (a cycle, or a page in two places)")
                }
                self.seen[word] |= bit
            }
            let offset = page * self.pageSize
            let stored = self.load(offset, UInt64.self)
            guard stored == first else { throw self.damaged("page \(page) of \(tree.name) claims to be page \(stored)") }
            return offset
        }

        /// The number of entries in a page with header at `offset` of `room` bytes, its bounds checked.
        func entries(_ offset: Int, room: Int, _ what: @autoclosure () -> String) throws(LMDBError) -> (count: Int, upper: Int) {
            let lower = Int(self.load(offset + 12, UInt16.self))
            let upper = Int(self.load(offset + 14, UInt16.self))
            guard lower >= TreeCheck.headerSize, (lower - TreeCheck.headerSize) & 1 == 0, lower <= upper, upper <= room else {
                throw self.damaged("\(what()) has mp_lower \(lower) and mp_upper \(upper) (page size \(room))")
            }
            let count = (lower - TreeCheck.headerSize) >> 1
            guard count > 0 else { throw self.damaged("\(what()) holds no entries") }
            return (count, upper)
        }

        /// The node at index `index` of the page at `offset` (`room` bytes, nodes from `upper`): its
        /// offset, after checking that its header and key are in the page.
        func node(_ offset: Int, _ index: Int, room: Int, upper: Int, _ what: @autoclosure () -> String) throws(LMDBError) -> Int {
            let at = Int(self.load(offset + TreeCheck.headerSize + 2 * index, UInt16.self))
            guard at >= upper, at & 1 == 0, at + TreeCheck.nodeSize <= room else {
                throw self.damaged("\(what()) has node \(index) at offset \(at), outside \(upper)..<\(room)")
            }
            let keySize = Int(self.load(offset + at + 6, UInt16.self))
            guard at + TreeCheck.nodeSize + keySize <= room else {
                throw self.damaged("\(what()) has node \(index) with a \(keySize)-byte key running past the page's end")
            }
            return offset + at
        }

        func compare(_ a: Key, _ b: Key, _ order: Order) -> Int {
            switch order {
            case .bytes:
                // Most keys differ in their first 8 bytes (the store's keys begin with big-endian ids).
                if a.count >= 8 && b.count >= 8 {
                    let x = UInt64(bigEndian: self.base.loadUnaligned(fromByteOffset: a.offset, as: UInt64.self))
                    let y = UInt64(bigEndian: self.base.loadUnaligned(fromByteOffset: b.offset, as: UInt64.self))
                    if x != y { return x < y ? -1 : 1 }
                }
                let common = min(a.count, b.count)
                let result = common == 0 ? 0 : Int(memcmp(self.base + a.offset, self.base + b.offset, common))
                return result != 0 ? result : a.count - b.count
            case .reversedBytes:
                var (i, j) = (a.count, b.count)
                while i > 0 && j > 0 {
                    i -= 1
                    j -= 1
                    let x = Int(self.base.load(fromByteOffset: a.offset + i, as: UInt8.self))
                    let y = Int(self.base.load(fromByteOffset: b.offset + j, as: UInt8.self))
                    if x != y { return x - y }
                }
                return a.count - b.count
            case .integers:
                let (x, y) =
                    a.count == 8
                    ? (self.load(a.offset, UInt64.self), self.load(b.offset, UInt64.self))
                    : (UInt64(self.load(a.offset, UInt32.self)), UInt64(self.load(b.offset, UInt32.self)))
                return x < y ? -1 : x > y ? 1 : 0
            }
        }

        /// Checks a page's key against the one before it in the page and the bounds its parent gives.
        func checkKey(
            _ key: Key, index: Int, previous: Key?, lower: Key?, upper: Key?, _ order: Order, _ what: @autoclosure () -> String
        ) throws(LMDBError) {
            if order == .integers {
                // LMDB compares integer keys as of one size: a key of another size is misread.
                let size = key.count
                guard size == 8 || size == 4, (previous?.count ?? size) == size, (lower?.count ?? size) == size, (upper?.count ?? size) == size
                else { throw self.damaged("\(what()) has an integer key of \(size) bytes at node \(index)") }
            }
            if let previous {
                guard self.compare(previous, key, order) < 0 else { throw self.damaged("\(what()) has keys out of order at node \(index)") }
            } else if let lower, self.compare(lower, key, order) > 0 {
                throw self.damaged("\(what()) has a key at node \(index) below its parent's key for it")
            }
            if let upper, self.compare(key, upper, order) >= 0 {
                throw self.damaged("\(what()) has a key at node \(index) not below its parent's key for the next page")
            }
        }

        /// Checks page `pgno` at depth `level` of `tree` and, below it, its children; its keys must lie
        /// in `lower ..< upper`.
        /// With `split`, the subtrees below it are shared with a walker on another thread (see
        /// ``TreeCheck/parallelLeafPages``).
        mutating func visit(
            _ pgno: UInt64, level: Int, lower: Key?, upper: Key?, _ tree: Tree, _ counts: inout Counts, parent: Int?, split: Bool = false
        ) throws(LMDBError) {
            let children = try self.check(pgno, level: level, lower: lower, upper: upper, tree, &counts, parent: parent)
            guard split && children.count >= 2 else {
                for index in children.indices {
                    self.prefetchAhead(children, after: index, until: children.count, leaves: level + 1 == tree.record.depth)
                    let child = children[index]
                    try self.visit(child.pgno, level: level + 1, lower: child.lower, upper: child.upper, tree, &counts, parent: child.parent)
                }
                return
            }
            // Enough subtrees to share evenly: a level down while there are few (those branch pages
            // checked here, on this thread).
            var items = children
            var itemLevel = level + 1
            while items.count < TreeCheck.sharedSubtrees && itemLevel < tree.record.depth {
                var below: [Child] = []
                for item in items {
                    below += try self.check(item.pgno, level: itemLevel, lower: item.lower, upper: item.upper, tree, &counts, parent: item.parent)
                }
                items = below
                itemLevel += 1
            }
            // The second walker knows every page claimed so far; a page both walkers claim is found
            // when their claims are merged.
            let before = self.seen
            let work = SharedWork(items: items, level: itemLevel)
            let second = SecondWalker(walker: self, work: work, tree: tree)
            try runAlongside({ second.run() }) { () throws(LMDBError) in
                do throws(LMDBError) {
                    try self.walk(work, tree, &counts)
                } catch {
                    work.stop()
                    throw error
                }
            }
            // A page both walkers claimed comes before the second one's own error: one walk would have
            // stopped at that claim.
            for word in self.seen.indices {
                let both = self.seen[word] & second.walker.seen[word] & ~before[word]
                guard both == 0 else {
                    throw self.damaged(
                        "page \(word << 6 + both.trailingZeroBitCount) of \(tree.name) is reached twice (a cycle, or a page in two places)")
                }
                self.seen[word] |= second.walker.seen[word]
            }
            if let error = second.error { throw error }
            self.freeLists += second.walker.freeLists
            self.named += second.walker.named
            counts += second.counts
        }

        /// Walks the runs of `work` this walker takes, until none is left.
        mutating func walk(_ work: SharedWork, _ tree: Tree, _ counts: inout Counts) throws(LMDBError) {
            let leaves = work.level == tree.record.depth
            while let run = work.take() {
                for index in run {
                    self.prefetchAhead(work.items, after: index, until: run.upperBound, leaves: leaves)
                    let item = work.items[index]
                    try self.visit(item.pgno, level: work.level, lower: item.lower, upper: item.upper, tree, &counts, parent: item.parent)
                }
            }
        }

        /// Claims and checks page `pgno` at depth `level` of `tree`: a leaf whole, a branch's own keys
        /// (in `lower ..< upper`). Returns a branch's children in page order, none for a leaf.
        mutating func check(
            _ pgno: UInt64, level: Int, lower: Key?, upper: Key?, _ tree: Tree, _ counts: inout Counts, parent: Int?
        ) throws(LMDBError) -> [Child] {
            let offset = try self.claim(pgno, count: 1, tree, from: parent)
            func what() -> String { "page \(pgno) of \(tree.name)" }
            let flags = self.load(offset + 10, UInt16.self) & ~TreeCheck.transientFlags
            let isLeaf = level == tree.record.depth
            let expected = isLeaf ? tree.leafFlags : TreeCheck.pBranch
            guard flags == expected else {
                let kind = isLeaf ? "a leaf page (depth \(level) of \(tree.record.depth))" : "a branch page (depth \(level) of \(tree.record.depth))"
                throw self.damaged("\(what()) has flags 0x\(String(flags, radix: 16)) where \(kind) is expected")
            }
            let (count, upperOffset) = try self.entries(offset, room: self.pageSize, what())
            if isLeaf {
                counts.leafPages += 1
                try self.leaf(offset, count: count, upper: upperOffset, room: self.pageSize, lower: lower, bound: upper, tree, &counts, what: what())
                return []
            }
            counts.branchPages += 1
            var children: [Child] = []
            children.reserveCapacity(count)
            var previous: Key?
            for index in 0..<count {
                let node = try self.node(offset, index, room: self.pageSize, upper: upperOffset, what())
                let child =
                    UInt64(self.load(node, UInt16.self)) | UInt64(self.load(node + 2, UInt16.self)) << 16
                    | UInt64(self.load(node + 4, UInt16.self)) << 32
                let key = Key(offset: node + TreeCheck.nodeSize, count: Int(self.load(node + 6, UInt16.self)))
                // The first key of a branch page is not used (LMDB leaves it empty, or stale).
                if index > 0 {
                    try self.checkKey(key, index: index, previous: previous, lower: lower, upper: upper, tree.order, what())
                    children[index - 1].upper = key
                    previous = key
                }
                children.append((child, index > 0 ? key : lower, upper, Int(pgno)))
            }
            // In page order: a compacted file is then read front to back. (Asking the disk for a branch's
            // leaves ahead, MADV_WILLNEED, made a scattered store slower, not faster: the kernel's own
            // read-around on faults does better.)
            children.sort { $0.pgno < $1.pgno }
            return children
        }

        /// Before leaf `children[index]` is checked, while leaves are walked (up to `end`): asks for the
        /// node headers of the next leaf (its offsets, on its first line, were asked for one leaf earlier)
        /// and for the first line of the one after. ``leaf(_:count:upper:room:lower:bound:_:_:what:)``'s
        /// own prefetch, for the page it is on, leaves the wait for that page's first line and headers
        /// on the path; this takes both off it. At 1M x 512: the check on two threads from 229–272 to
        /// 175–242 ms, start-up from 511–566 to 457–565 ms (median about 535 to 480), alternating.
        /// Only the next leaf's header and offsets are read for that, inside the file; the checks stay
        /// in `check`, `claim` and `leaf`.
        func prefetchAhead(_ children: [Child], after index: Int, until end: Int, leaves: Bool) {
            guard leaves else { return }
            func offset(_ position: Int) -> Int? {
                guard position < end, children[position].pgno <= UInt64(self.lastPage) else { return nil }
                let offset = Int(children[position].pgno) * self.pageSize
                return offset + self.pageSize <= self.size ? offset : nil
            }
            if let far = offset(index + 2) { rk_prefetch(self.base + far) }
            if let near = offset(index + 1) {
                let lower = Int(self.load(near + 12, UInt16.self))
                self.prefetchNodes(near, count: min(max(lower - TreeCheck.headerSize, 0) >> 1, (self.pageSize - TreeCheck.headerSize) >> 1))
            }
        }

        /// Asks for the node headers of the page at `offset` (the first `count`, whose offsets must lie in
        /// the page): each is on its own cache line in a payload leaf, and asked for together their
        /// misses overlap instead of coming one after the other. A node offset is not checked here (a
        /// prefetch never faults); whatever reads the node checks it first.
        func prefetchNodes(_ offset: Int, count: Int) {
            for node in 0..<count {
                rk_prefetch(self.base + offset + Int(self.load(offset + TreeCheck.headerSize + 2 * node, UInt16.self)))
            }
        }

        /// Checks the entries of a leaf page (or a sub-page) at `offset`, `room` bytes long.
        mutating func leaf(
            _ offset: Int, count: Int, upper: Int, room: Int, lower: Key?, bound: Key?, _ tree: Tree, _ counts: inout Counts,
            what: @autoclosure () -> String
        ) throws(LMDBError) {
            if tree.leafFlags & TreeCheck.pLeaf2 != 0 {
                // Fixed-size duplicates, packed after the header without nodes.
                // Their size: a sub-page's mp_pad, or the sub-database's md_pad.
                let keySize = tree.leafFlags & TreeCheck.pSubpage != 0 ? Int(self.load(offset + 8, UInt16.self)) : Int(tree.record.pad)
                guard keySize > 0, TreeCheck.headerSize + count * keySize <= room else {
                    throw self.damaged("\(what()) holds \(count) values of \(keySize) bytes, more than fit")
                }
                var previous: Key?
                for index in 0..<count {
                    let key = Key(offset: offset + TreeCheck.headerSize + index * keySize, count: keySize)
                    try self.checkKey(key, index: index, previous: previous, lower: lower, upper: bound, tree.order, what())
                    previous = key
                }
                counts.entries += UInt64(count)
                return
            }
            // All of the page's node headers before the first is read (``prefetchAhead`` has usually
            // asked already; not for the first leaf of a run, a root leaf or a sub-page). At 1M x 512
            // (540,000 payload leaves) this took the check from 414-418 to 285-290 ms on two threads;
            // prefetching whole pages two ahead instead reached only 348-358 (and together with this, 300).
            self.prefetchNodes(offset, count: count)
            var previous: Key?
            for index in 0..<count {
                let node = try self.node(offset, index, room: room, upper: upper, what())
                let end = offset + room
                let nodeFlags = self.load(node + 4, UInt16.self)
                let key = Key(offset: node + TreeCheck.nodeSize, count: Int(self.load(node + 6, UInt16.self)))
                guard key.count <= TreeCheck.maximumKeySize, key.count > 0 || tree.isDuplicates, key.count == 8 || !tree.isFree else {
                    throw self.damaged("\(what()) has a key of \(key.count) bytes at node \(index)")
                }
                try self.checkKey(key, index: index, previous: previous, lower: lower, upper: bound, tree.order, what())
                previous = key
                let dataSize = Int(self.load(node, UInt16.self)) | Int(self.load(node + 2, UInt16.self)) << 16
                let data = key.offset + key.count
                let allowed: UInt16 =
                    tree.isDuplicates
                    ? 0
                    : tree.duplicates != nil
                        ? TreeCheck.fBigData | TreeCheck.fSubData | TreeCheck.fDupData
                        : tree.isMain ? TreeCheck.fBigData | TreeCheck.fSubData : TreeCheck.fBigData
                guard nodeFlags & ~allowed == 0, nodeFlags & TreeCheck.fBigData == 0 || nodeFlags == TreeCheck.fBigData,
                    nodeFlags & TreeCheck.fSubData == 0 || tree.isMain || nodeFlags & TreeCheck.fDupData != 0
                else {
                    throw self.damaged("\(what()) has node \(index) with flags 0x\(String(nodeFlags, radix: 16))")
                }
                if nodeFlags & TreeCheck.fBigData != 0 {
                    guard data + 8 <= end else { throw self.damaged("\(what()) has node \(index) running past the page's end") }
                    let first = self.load(data, UInt64.self)
                    let pages = (TreeCheck.headerSize - 1 + dataSize) / self.pageSize + 1
                    let at = try self.claim(first, count: pages, tree, from: offset / self.pageSize)
                    let flags = self.load(at + 10, UInt16.self) & ~TreeCheck.transientFlags
                    let stored = Int(self.load(at + 12, UInt32.self))
                    guard flags == TreeCheck.pOverflow, stored == pages else {
                        throw self.damaged(
                            "page \(first) of \(tree.name), the first of a \(dataSize)-byte value of \(pages) pages, has flags 0x\(String(flags, radix: 16)) and a run of \(stored) pages"
                        )
                    }
                    counts.overflowPages += UInt64(pages)
                    counts.entries += 1
                    if tree.isFree { self.freeLists.append((at + TreeCheck.headerSize, dataSize, self.freeListKey(key))) }
                    continue
                }
                guard data + dataSize <= end else {
                    throw self.damaged("\(what()) has node \(index) with \(dataSize) bytes of data running past the page's end")
                }
                if nodeFlags & (TreeCheck.fSubData | TreeCheck.fDupData) == 0 {
                    counts.entries += 1
                    if tree.isFree { self.freeLists.append((data, dataSize, self.freeListKey(key))) }
                    continue
                }
                guard nodeFlags & TreeCheck.fSubData == 0 || dataSize == TreeCheck.recordSize else {
                    throw self.damaged("\(what()) has node \(index) holding a database record of \(dataSize) bytes")
                }
                if nodeFlags & TreeCheck.fDupData == 0 {
                    // A named database's record, in the main database.
                    self.named.append(
                        (
                            String(decoding: UnsafeRawBufferPointer(start: self.base + key.offset, count: key.count), as: UTF8.self),
                            self.record(at: data)
                        ))
                    counts.entries += 1
                    continue
                }
                counts.entries += try self.duplicates(at: data, size: dataSize, nodeFlags, of: tree, node: index, what: what())
            }
        }

        /// Checks the duplicates of one key of a `MDB_DUPSORT` database (a sub-page in the node, or a
        /// sub-database); returns how many there are.
        mutating func duplicates(at data: Int, size: Int, _ nodeFlags: UInt16, of tree: Tree, node index: Int, what: String) throws(LMDBError)
            -> UInt64
        {
            let fixed: UInt16 = tree.duplicatesFixed ? TreeCheck.pLeaf2 : 0
            if nodeFlags & TreeCheck.fSubData != 0 {
                // A sub-database: its record is the node's data (48 bytes, checked).
                return try self.walk(
                    Tree(
                        name: "the sub-database of duplicates at node \(index) of \(what)", record: self.record(at: data),
                        order: tree.duplicates ?? .bytes, leafFlags: TreeCheck.pLeaf | fixed,
                        isDuplicates: true))
            }
            // A sub-page: a page header and nodes, `size` bytes in all, its offsets from its own start.
            let name = "the sub-page of duplicates at node \(index) of \(what)"
            guard size >= TreeCheck.headerSize else { throw self.damaged("\(name) is \(size) bytes long") }
            let flags = self.load(data + 10, UInt16.self) & ~TreeCheck.transientFlags
            let sub = Tree(
                name: name, record: Record(pad: 0, flags: 0, depth: 1, branchPages: 0, leafPages: 0, overflowPages: 0, entries: 0, root: 0),
                order: tree.duplicates ?? .bytes, leafFlags: TreeCheck.pLeaf | TreeCheck.pSubpage | fixed, isDuplicates: true)
            guard flags == sub.leafFlags else { throw self.damaged("\(name) has flags 0x\(String(flags, radix: 16))") }
            var counts = Counts()
            let (count, upper) = try self.entries(data, room: size, name)
            try self.leaf(data, count: count, upper: upper, room: size, lower: nil, bound: nil, sub, &counts, what: name)
            return counts.entries
        }

        func freeListKey(_ key: Key) -> UInt64 { key.count == 8 ? self.load(key.offset, UInt64.self) : 0 }

        /// Checks every free-page list: each a count and that many page numbers, in decreasing order,
        /// none used by a tree or listed twice (LMDB would hand such a page out again and overwrite
        /// what it holds).
        mutating func checkFreeLists() throws(LMDBError) {
            for list in self.freeLists {
                let what = "the free-page list of transaction \(list.txnid)"
                guard list.count >= 8, list.count % 8 == 0 else { throw self.damaged("\(what) is \(list.count) bytes long") }
                let listed = self.load(list.offset, UInt64.self)
                guard listed <= UInt64(list.count / 8 - 1) else {
                    throw self.damaged("\(what) counts \(listed) pages in \(list.count) bytes")
                }
                var previous = UInt64.max
                for index in 0..<Int(listed) {
                    let page = self.load(list.offset + 8 * (index + 1), UInt64.self)
                    guard page >= 2, page <= UInt64(self.lastPage), page < previous else {
                        throw self.damaged("\(what) lists page \(page) after page \(previous) (committed pages 2…\(self.lastPage))")
                    }
                    previous = page
                    let (word, bit) = (Int(page) >> 6, UInt64(1) << (page & 63))
                    guard self.seen[word] & bit == 0 else {
                        throw self.damaged("\(what) lists page \(page), which a database uses or another list holds")
                    }
                    self.seen[word] |= bit
                }
            }
        }
    }
}

extension Environment {
    /// The check at open (``TreeCheck``) on the store as its last commit left it, for a `verify` of an
    /// open store: from inside a write transaction, which holds the writer lock, so no commit moves
    /// the meta pages or reuses a page during the walk.
    /// - Returns: the damage found (an `isDamaged` error naming the page and database, as at open), or
    ///   nil.
    /// - Throws: ``LMDBError`` when the file cannot be read.
    public func treeDamage(within txn: borrowing Transaction) throws(LMDBError) -> LMDBError? {
        precondition(!txn.isReadOnly, "only a write transaction keeps commits out during the walk")
        let descriptor = try self.fileDescriptor()
        let size = try self.fileSize()
        let path = self.path + "/data.mdb"
        let committed = UInt64(self.lastCommittedTransaction)
        let checked = Result { () throws(LMDBError) in
            let meta = try DataFile.newestMeta(fd: descriptor, size: size, path: path)
            guard meta.txnid == committed else {
                throw LMDBError(
                    code: MDB_CORRUPTED, operation: "verify(\(path))",
                    detail: "the newest meta page names transaction \(meta.txnid), but the last commit was \(committed)")
            }
            try TreeCheck.check(fd: descriptor, size: size, meta: meta, path: path)
        }
        guard case .failure(let error) = checked else { return nil }
        guard error.isDamaged else { throw error }
        return error
    }
}
