import Glibc
import RegistryModel

/// The in-memory copy of one registry's templates, laid out for scanning.
///
/// All rows sit in one contiguous, page-aligned float32 buffer (`stride` floats each: the prepared
/// vector, or a landmark template's normalised coordinates in vocabulary order), with parallel arrays
/// for template id, identifier ordinal and (landmarks) presence mask. Row order carries no meaning:
/// ties are broken by template id, so a removal moves the last row into the hole.
///
/// Not thread-safe by itself: the engine mutates it only from its writer thread while holding the
/// index write lock, and reads it under the read lock (or from the writer thread itself).
final class RegistryIndex {
    let id: UInt32
    let algorithm: Algorithm
    var thresholds: Thresholds
    /// The capture quality a face must reach to be registered / auto-enrolled here (nil: no gate).
    var minimumQuality: Float?
    var minimumAutoEnrolmentQuality: Float?
    let stride: Int

    private(set) var rows: UnsafeMutablePointer<Float>
    private(set) var capacity: Int
    private(set) var count = 0
    private(set) var templateIds: [UInt64] = []
    private(set) var ordinals: [UInt32] = []
    /// Landmark presence masks, one per row (empty for vector algorithms).
    private(set) var masks: [UInt32] = []
    /// Each identifier's rows as a doubly linked list through the rows: `firstRow[ordinal]` (−1: none
    /// here), then `nextRow` / `previousRow` per row. Flat arrays instead of a dictionary of arrays:
    /// a million identifiers cost two small allocations, not a million.
    private var firstRow: [Int32] = []
    private var nextRow: [Int32] = []
    private var previousRow: [Int32] = []
    /// Row of each template id, built on the first removal (start-up and scans never need it).
    private var rowOfTemplate: [UInt64: Int]?
    /// Distinct identifiers held.
    private(set) var identifierCount = 0

    init(id: UInt32, algorithm: Algorithm, thresholds: Thresholds) {
        self.id = id
        self.algorithm = algorithm
        self.thresholds = thresholds
        self.stride = algorithm.rowStride
        self.capacity = 0
        self.rows = Self.allocate(rows: 0, stride: self.stride)
    }

    deinit {
        Self.release(self.rows, rows: self.capacity, stride: self.stride)
    }

    /// Takes a stored registry definition's thresholds and quality gates.
    func configure(_ entry: GalleryRecord.Registry) {
        self.thresholds = entry.thresholds
        self.minimumQuality = entry.minimumQuality
        self.minimumAutoEnrolmentQuality = entry.minimumAutoEnrolmentQuality
    }

    var isLandmarks: Bool {
        if case .landmarks = self.algorithm.kind { return true }
        return false
    }

    func holds(_ ordinal: UInt32) -> Bool { Int(ordinal) < self.firstRow.count && self.firstRow[Int(ordinal)] >= 0 }

    /// Calls `body` with each row of an identifier (by ordinal), in no particular order; no allocation.
    @inline(__always)
    func forEachRow(of ordinal: UInt32, _ body: (Int) -> Void) {
        guard Int(ordinal) < self.firstRow.count else { return }
        self.nextRow.withUnsafeBufferPointer { next in
            var row = self.firstRow[Int(ordinal)]
            while row >= 0 {
                body(Int(row))
                row = next[Int(row)]
            }
        }
    }

    /// The template ids of an identifier (by ordinal).
    func templateIds(of ordinal: UInt32) -> [UInt64] {
        var ids: [UInt64] = []
        self.forEachRow(of: ordinal) { ids.append(self.templateIds[$0]) }
        return ids
    }

    func row(_ index: Int) -> UnsafePointer<Float> { UnsafePointer(self.rows + index * self.stride) }

    /// Every template's row (a fresh map: for whole-store checks).
    func rowsByTemplate() -> [UInt64: Int] {
        Dictionary(uniqueKeysWithValues: self.templateIds.enumerated().map { ($1, $0) })
    }

    /// Appends a row, letting `fill` write its `stride` floats in place (no intermediate copy).
    func append(templateId: UInt64, ordinal: UInt32, mask: UInt32, fill: (UnsafeMutablePointer<Float>) -> Void) {
        if self.count == self.capacity { self.grow() }
        let row = self.count
        fill(self.rows + row * self.stride)
        self.templateIds.append(templateId)
        self.ordinals.append(ordinal)
        if self.isLandmarks { self.masks.append(mask) }
        self.rowOfTemplate?[templateId] = row
        // Link in at the head of the identifier's list.
        if Int(ordinal) >= self.firstRow.count {
            self.firstRow.append(contentsOf: repeatElement(-1, count: Int(ordinal) + 1 - self.firstRow.count))
        }
        let head = self.firstRow[Int(ordinal)]
        if head < 0 { self.identifierCount += 1 } else { self.previousRow[Int(head)] = Int32(row) }
        self.nextRow.append(head)
        self.previousRow.append(-1)
        self.firstRow[Int(ordinal)] = Int32(row)
        self.count += 1
    }

    /// Removes a template's row. Returns its identifier ordinal, or nil when it is not here.
    @discardableResult
    func remove(templateId: UInt64) -> UInt32? {
        if self.rowOfTemplate == nil { self.rowOfTemplate = self.rowsByTemplate() }
        guard let index = self.rowOfTemplate!.removeValue(forKey: templateId) else { return nil }
        let ordinal = self.ordinals[index]
        self.unlink(index)
        let last = self.count - 1
        if index != last {
            // The last row moves into the hole; its neighbours and its identifier's head follow it.
            (self.rows + index * self.stride).update(from: self.rows + last * self.stride, count: self.stride)
            self.templateIds[index] = self.templateIds[last]
            self.ordinals[index] = self.ordinals[last]
            if self.isLandmarks { self.masks[index] = self.masks[last] }
            self.rowOfTemplate![self.templateIds[index]] = index
            let next = self.nextRow[last]
            let previous = self.previousRow[last]
            self.nextRow[index] = next
            self.previousRow[index] = previous
            if next >= 0 { self.previousRow[Int(next)] = Int32(index) }
            if previous >= 0 {
                self.nextRow[Int(previous)] = Int32(index)
            } else {
                self.firstRow[Int(self.ordinals[index])] = Int32(index)
            }
        }
        self.templateIds.removeLast()
        self.ordinals.removeLast()
        if self.isLandmarks { self.masks.removeLast() }
        self.nextRow.removeLast()
        self.previousRow.removeLast()
        self.count = last
        return ordinal
    }

    /// Takes row `index` out of its identifier's list.
    private func unlink(_ index: Int) {
        let next = self.nextRow[index]
        let previous = self.previousRow[index]
        if next >= 0 { self.previousRow[Int(next)] = previous }
        if previous >= 0 {
            self.nextRow[Int(previous)] = next
        } else {
            self.firstRow[Int(self.ordinals[index])] = next
            if next < 0 { self.identifierCount -= 1 }
        }
    }

    /// The score of row `index` against a prepared query (`stride` floats, and its mask for landmarks).
    @inline(__always)
    func score(row index: Int, query: UnsafePointer<Float>, queryMask: UInt32) -> Float {
        self.score(
            row: UnsafePointer(self.rows + index * self.stride), rowMask: self.isLandmarks ? self.masks[index] : 0,
            query: query, queryMask: queryMask)
    }

    /// The score of any prepared row of this registry's algorithm against a prepared query.
    @inline(__always)
    func score(row: UnsafePointer<Float>, rowMask: UInt32, query: UnsafePointer<Float>, queryMask: UInt32) -> Float {
        switch self.algorithm.kind {
        case .vector(let dimension):
            return self.algorithm.scoreFunction.score(dot: Kernels.dot(query, row, count: dimension))
        case .landmarks:
            return LandmarkAlgorithm.similarity(queryMask, query, rowMask, row)
        }
    }

    /// Row `index` for writing in place (start-up load).
    func mutableRow(_ index: Int) -> UnsafeMutablePointer<Float> { self.rows + index * self.stride }

    /// Faults in the pages of rows `range` without changing their contents (`MADV_POPULATE_WRITE`):
    /// at start-up another thread can take the kernel's page allocation off the thread copying the
    /// rows in. Safe while that thread writes them: populating never writes data. Advice only.
    func populate(rows range: Range<Int>) {
        guard !range.isEmpty else { return }
        let page = 2 << 20
        let start = Int(bitPattern: self.rows + range.lowerBound * self.stride) & ~(page - 1)
        let end = Int(bitPattern: self.rows + range.upperBound * self.stride)
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), end - start, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */)
    }

    /// Sets a landmark row's presence mask (start-up load).
    func setMask(_ mask: UInt32, row index: Int) { self.masks[index] = mask }

    /// Makes room for `rows` rows in all, so that loading a known number does not regrow and copy.
    func reserve(_ rows: Int) {
        guard rows > self.capacity else { return }
        self.resize(to: rows)
        self.nextRow.reserveCapacity(rows)
        self.previousRow.reserveCapacity(rows)
    }

    private func grow() {
        self.resize(to: max(64, self.capacity * 2))
    }

    private func resize(to newCapacity: Int) {
        self.rows = Self.reallocate(self.rows, capacity: self.capacity, live: self.count, to: newCapacity, stride: self.stride)
        self.capacity = newCapacity
        self.templateIds.reserveCapacity(newCapacity)
        self.ordinals.reserveCapacity(newCapacity)
    }

    /// Row buffers are anonymous mappings (page-aligned, untouched pages cost nothing), sized in 2 MiB
    /// steps. Not advised for transparent huge pages: measured at start-up with 1M x 512 rows, asking
    /// for them made the kernel compact memory for up to 5 s when the page cache had fragmented it
    /// (the scan itself was only 3-5 % faster with them). Instead the load faults pages in from two
    /// threads (``populate(rows:)``).
    private static let hugePage = 2 << 20

    private static func bytes(rows: Int, stride: Int) -> Int {
        let bytes = max(1, rows * stride * MemoryLayout<Float>.stride)
        return (bytes + hugePage - 1) / hugePage * hugePage
    }

    private static func allocate(rows: Int, stride: Int) -> UnsafeMutablePointer<Float> {
        Self.reallocate(nil, capacity: 0, live: 0, to: rows, stride: stride)
    }

    private static func reallocate(
        _ old: UnsafeMutablePointer<Float>?, capacity: Int, live: Int, to rows: Int, stride: Int
    ) -> UnsafeMutablePointer<Float> {
        let size = Self.bytes(rows: rows, stride: stride)
        let address = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let address, address != MAP_FAILED else {
            fatalError("out of memory for a registry index of \(rows) rows of \(stride) floats (errno \(errno))")
        }
        if let old {
            address.copyMemory(from: old, byteCount: live * stride * MemoryLayout<Float>.stride)
            Self.release(old, rows: capacity, stride: stride)
        }
        return address.bindMemory(to: Float.self, capacity: rows * stride)
    }

    private static func release(_ rows: UnsafeMutablePointer<Float>, rows count: Int, stride: Int) {
        munmap(rows, Self.bytes(rows: count, stride: stride))
    }
}
