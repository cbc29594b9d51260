import CScanKernels
import Glibc
import RegistryModel

/// The in-memory copy of one registry's templates, laid out for scanning.
///
/// All rows sit in one contiguous, page-aligned float32 buffer (`stride` floats each: the prepared
/// vector, or a landmark template's normalised coordinates in vocabulary order), with parallel arrays
/// for template id, identifier ordinal and (landmarks) presence mask. Row order carries no meaning:
/// ties are broken by template id, so a removal moves the last row into the hole.
///
/// Vector registries keep beside the float32 rows their int8 codes (`codeStride` bytes a row) and
/// per-row bound terms, for the prefilter (``Prefilter``): they follow every append, removal and load.
/// A vector registry given a ``StoredRows`` keeps its float32 rows in memory only while they fit the
/// source's ``StoredRows/residentBytes`` (``keepsRows(for:)``); beyond, only its codes and terms are
/// resident, and scans read the rows they rescore from the store (``withRows(_:)``). Small registries
/// thus answer authentications from memory, and million-template ones need only their codes. The
/// engine gives every vector registry a source; landmark registries (which have no codes) always
/// keep their rows. The two kinds answer identically (StoredRowsTests compares them).
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

    /// The float32 rows, when resident (nil: read from ``source``).
    private(set) var rows: UnsafeMutablePointer<Float>?
    /// Where the rows are read once they are not resident (nil: they always are).
    let source: StoredRows?
    /// Room for one row being appended while the rows are not resident (writer thread only).
    private let appending: UnsafeMutablePointer<Float>?
    /// Int8 codes, `codeStride` bytes per row, and their bound terms (vector registries; nil for landmarks).
    private(set) var codes: UnsafeMutablePointer<Int8>?
    private(set) var terms: UnsafeMutablePointer<rk_row_terms>?
    let codeStride: Int
    // The properties every append and removal touches skip Swift's dynamic exclusivity checks
    // (`@exclusivity(unchecked)`): they are only changed on the writer thread under the index write
    // lock, or by the start-up load's single record pass, and the checks were about 15 % of that
    // pass (start-up of a million 512-float templates from the snapshot: 998–1,049 ms with them,
    // 841–877 ms without, four starts each, alternating).
    @exclusivity(unchecked) private(set) var capacity: Int
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private(set) var templateIds: [UInt64] = []
    @exclusivity(unchecked) private(set) var ordinals: [UInt32] = []
    /// Landmark presence masks, one per row (empty for vector algorithms).
    @exclusivity(unchecked) private(set) var masks: [UInt32] = []
    /// Each identifier's rows as a doubly linked list through the rows: `firstRow[ordinal]` (−1: none
    /// here), then `nextRow` / `previousRow` per row. Flat arrays instead of a dictionary of arrays:
    /// a million identifiers cost two small allocations, not a million.
    @exclusivity(unchecked) private var firstRow: [Int32] = []
    @exclusivity(unchecked) private var nextRow: [Int32] = []
    @exclusivity(unchecked) private var previousRow: [Int32] = []
    /// Row of each template id, built on the first removal (start-up and scans never need it).
    @exclusivity(unchecked) private var rowOfTemplate: [UInt64: Int]?
    /// Distinct identifiers held.
    @exclusivity(unchecked) private(set) var identifierCount = 0
    /// Whether the row, code or term buffers are partly file mappings (an adopted index snapshot's
    /// sections), until the next resize copies them into anonymous memory. Such a buffer must not be
    /// grown in place: the grown part would map the file beyond the section.
    var holdsFileMappings = false

    /// - Parameter source: where a vector registry reads its rows once they outgrow the source's
    ///   ``StoredRows/residentBytes`` (nil: it always keeps them in memory).
    init(id: UInt32, algorithm: Algorithm, thresholds: Thresholds, source: StoredRows? = nil) {
        self.id = id
        self.algorithm = algorithm
        self.thresholds = thresholds
        self.stride = algorithm.rowStride
        self.capacity = 0
        if case .vector = algorithm.kind, let source {
            self.source = source
            self.appending = .allocate(capacity: self.stride)
        } else {
            self.source = nil
            self.appending = nil
        }
        let keepsRows = self.source?.keepsRows(0, stride: self.stride) ?? true
        self.rows = keepsRows ? Self.remap(nil, capacity: 0, live: 0, to: 0, width: self.stride) : nil
        if case .vector(let dimension) = algorithm.kind {
            self.codeStride = rk_code_stride(dimension)
            self.codes = Self.remap(nil, capacity: 0, live: 0, to: 0, width: self.codeStride)
            self.terms = Self.remap(nil, capacity: 0, live: 0, to: 0, width: 1)
        } else {
            self.codeStride = 0
        }
    }

    deinit {
        if let rows { Self.release(rows, rows: self.capacity, width: self.stride) }
        self.appending?.deallocate()
        if let codes { Self.release(codes, rows: self.capacity, width: self.codeStride) }
        if let terms { Self.release(terms, rows: self.capacity, width: 1) }
    }

    /// Takes a stored registry definition's thresholds and quality gates.
    func configure(_ entry: GalleryRecord.Registry) {
        self.thresholds = entry.thresholds
        self.minimumQuality = entry.minimumQuality
        self.minimumAutoEnrolmentQuality = entry.minimumAutoEnrolmentQuality
    }

    var isLandmarks: Bool { self.landmarkMatcher != nil }

    /// How a landmark registry prepares and compares rows (nil for vectors).
    var landmarkMatcher: LandmarkMatcher? {
        if case .landmarks(let matcher) = self.algorithm.kind { return matcher }
        return nil
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

    /// Whether `count` rows of this registry are kept in memory: always without a source; with one,
    /// as it says (``StoredRows/keepsRows(_:stride:)``).
    func keepsRows(for count: Int) -> Bool { self.source?.keepsRows(count, stride: self.stride) ?? true }

    /// Keeps the float32 rows in memory from now on, or lets them go and reads them from the source
    /// (a registry without one always keeps them). Letting go frees the buffer: the rows stay in the
    /// store, which is where they are read from next. Keeping them makes an empty buffer, so only for
    /// the start-up load, before its payload pass fills the rows in. Writer thread (or the load),
    /// holding the index write lock: no scan may be using the rows.
    func keepRows(_ resident: Bool) {
        guard self.source != nil, resident != (self.rows != nil) else { return }
        if let rows {
            Self.release(rows, rows: self.capacity, width: self.stride)
            self.rows = nil
        } else {
            self.rows = Self.remap(nil, capacity: 0, live: 0, to: self.capacity, width: self.stride)
        }
    }

    /// What a scan streams per row, in floats, for sizing its chunks (``Scan/chunks(rows:stride:rowsPerChunk:)``):
    /// the row itself, or, when the rows are read from the store, only its codes and terms (a chunk
    /// of the same bytes then holds four times the rows, and a scan opens a quarter of the reads).
    var chunkStride: Int {
        self.rows != nil ? self.stride : max(1, (self.codeStride + MemoryLayout<rk_row_terms>.stride) / 4)
    }

    /// Row `index`, of a registry with resident rows.
    func row(_ index: Int) -> UnsafePointer<Float> { UnsafePointer(self.rows! + index * self.stride) }

    /// Calls `body` with a function returning row `index`'s floats (valid until the function is next
    /// called; nil: skip it, the template having been removed from the store after this view of the
    /// index was taken). Resident rows are returned in place; others are read from the store in one
    /// read transaction, so call it under the index read lock, once per stretch of scanning rather
    /// than once per row.
    /// - Throws: ``RowFault`` when a row read from the store is not the row registered
    ///   (``StoredRows/withReader(_:_:)``): the scan's result is then not exact.
    @inline(__always)
    func withRows<T>(_ body: (_ row: (Int) -> UnsafePointer<Float>?) -> T) throws(RowFault) -> T {
        if let rows = self.rows {
            let stride = self.stride
            return body { UnsafePointer(rows + $0 * stride) }
        }
        return try self.source!.withReader(self, body)
    }

    /// Whether `values`, read for row `index`, give back the codes and bound terms held for it
    /// (`scratch`: room for ``codeStride`` bytes). Every kernel level makes the same codes, so a
    /// mismatch means the stored values are not those the row was registered with. True for
    /// registries without codes.
    func codeMatches(row index: Int, values: UnsafePointer<Float>, scratch: UnsafeMutablePointer<Int8>) -> Bool {
        guard case .vector(let dimension) = self.algorithm.kind, let codes, let terms else { return true }
        var made = rk_row_terms()
        rk_encode_row(values, dimension, self.codeStride, scratch, &made)
        let held = terms[index]
        return memcmp(scratch, codes + index * self.codeStride, self.codeStride) == 0
            && withUnsafeBytes(of: made) { mine in withUnsafeBytes(of: held) { theirs in mine.elementsEqual(theirs) } }
    }

    /// Every template's row (a fresh map: for whole-store checks).
    func rowsByTemplate() -> [UInt64: Int] {
        Dictionary(uniqueKeysWithValues: self.templateIds.enumerated().map { ($1, $0) })
    }

    /// Appends a row, letting `fill` write its `stride` floats in place (no intermediate copy).
    /// - Parameter encodes: whether to make the row's codes now; the start-up load fills rows later
    ///   and encodes each as it fills it (``encode(row:)``).
    func append(templateId: UInt64, ordinal: UInt32, mask: UInt32, encodes: Bool = true, fill: (UnsafeMutablePointer<Float>) -> Void) {
        // Outgrowing the resident limit lets the rows go for good (removals do not bring them back:
        // a registry hovering at the limit would copy them in and out).
        if self.rows != nil && !self.keepsRows(for: self.count + 1) { self.keepRows(false) }
        if self.count == self.capacity { self.grow() }
        let row = self.count
        if let rows = self.rows {
            fill(rows + row * self.stride)
            if encodes { self.encode(row: row) }
        } else {
            fill(self.appending!)
            if encodes { self.encode(row: row, from: self.appending!) }
        }
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
            if let rows { (rows + index * self.stride).update(from: rows + last * self.stride, count: self.stride) }
            if let codes, let terms {
                (codes + index * self.codeStride).update(from: codes + last * self.codeStride, count: self.codeStride)
                terms[index] = terms[last]
            }
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
        // The vacated last slot keeps no copy of what was removed or moved (erasure covers memory).
        if let rows { (rows + last * self.stride).update(repeating: 0, count: self.stride) }
        if let codes, let terms {
            (codes + last * self.codeStride).update(repeating: 0, count: self.codeStride)
            terms[last] = rk_row_terms()
        }
        self.templateIds.removeLast()
        self.ordinals.removeLast()
        if self.isLandmarks {
            self.masks[last] = 0
            self.masks.removeLast()
        }
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

    /// The score of row `index` (its floats `row`, from ``withRows(_:)``) against a prepared query
    /// (`stride` floats, and its mask for landmarks).
    @inline(__always)
    func score(row index: Int, _ row: UnsafePointer<Float>, query: UnsafePointer<Float>, queryMask: UInt32) -> Float {
        self.score(row: row, rowMask: self.isLandmarks ? self.masks[index] : 0, query: query, queryMask: queryMask)
    }

    /// The score of any prepared row of this registry's algorithm against a prepared query.
    @inline(__always)
    func score(row: UnsafePointer<Float>, rowMask: UInt32, query: UnsafePointer<Float>, queryMask: UInt32) -> Float {
        switch self.algorithm.kind {
        case .vector(let dimension):
            return self.algorithm.scoreFunction.score(dot: Kernels.dot(query, row, count: dimension))
        case .landmarks(let matcher):
            return matcher.similarity(queryMask, query, rowMask, row)
        }
    }

    /// Makes row `index`'s codes and bound terms from its resident float32 values (vector registries;
    /// no-op for landmarks).
    func encode(row index: Int) {
        guard let rows else { return }
        self.encode(row: index, from: rows + index * self.stride)
    }

    /// Makes row `index`'s codes and bound terms from its float32 values `row` (vector registries;
    /// no-op for landmarks).
    func encode(row index: Int, from row: UnsafePointer<Float>) {
        guard case .vector(let dimension) = self.algorithm.kind, let codes, let terms else { return }
        rk_encode_row(row, dimension, self.codeStride, codes + index * self.codeStride, terms + index)
    }

    /// Row `index`'s codes and bound terms (vector registries).
    func code(row index: Int) -> (codes: UnsafeBufferPointer<Int8>, terms: rk_row_terms)? {
        guard let codes, let terms else { return nil }
        return (UnsafeBufferPointer(start: codes + index * self.codeStride, count: self.codeStride), terms[index])
    }

    /// Row `index` for writing in place (start-up load of resident rows).
    func mutableRow(_ index: Int) -> UnsafeMutablePointer<Float> { self.rows! + index * self.stride }

    /// Faults in the pages of rows `range` without changing their contents (`MADV_POPULATE_WRITE`):
    /// at start-up another thread can take the kernel's page allocation off the thread copying the
    /// rows in. Safe while that thread writes them: populating never writes data. Advice only.
    func populate(rows range: Range<Int>) {
        guard !range.isEmpty else { return }
        let page = 2 << 20
        if let rows {
            let start = Int(bitPattern: rows + range.lowerBound * self.stride) & ~(page - 1)
            let end = Int(bitPattern: rows + range.upperBound * self.stride)
            _ = madvise(UnsafeMutableRawPointer(bitPattern: start), end - start, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */)
        }
        if let codes {
            let start = Int(bitPattern: codes + range.lowerBound * self.codeStride) & ~(page - 1)
            let end = Int(bitPattern: codes + range.upperBound * self.codeStride)
            _ = madvise(UnsafeMutableRawPointer(bitPattern: start), end - start, 23)
        }
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
        let moves = !self.holdsFileMappings
        if let rows {
            self.rows = Self.remap(rows, capacity: self.capacity, live: self.count, to: newCapacity, width: self.stride, moves: moves)
        }
        if let codes {
            self.codes = Self.remap(codes, capacity: self.capacity, live: self.count, to: newCapacity, width: self.codeStride, moves: moves)
        }
        if let terms { self.terms = Self.remap(terms, capacity: self.capacity, live: self.count, to: newCapacity, width: 1, moves: moves) }
        self.holdsFileMappings = false
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

    private static func bytes<T>(_: T.Type, rows: Int, width: Int) -> Int {
        let bytes = max(1, rows * width * MemoryLayout<T>.stride)
        return (bytes + hugePage - 1) / hugePage * hugePage
    }

    /// A mapping for `rows` rows of `width` elements, holding the first `live` rows of `old` (released).
    /// With `moves`, the kernel moves the old mapping's pages (``rk_remap``) instead: growing a
    /// million rows then takes neither a copy under the index write lock nor, for a moment, twice
    /// their memory. Not for a buffer partly mapped from an index snapshot (``holdsFileMappings``),
    /// which is copied; the kernel also refuses a range of several mappings, which is copied too.
    private static func remap<T>(
        _ old: UnsafeMutablePointer<T>?, capacity: Int, live: Int, to rows: Int, width: Int, moves: Bool = false
    ) -> UnsafeMutablePointer<T> {
        let size = Self.bytes(T.self, rows: rows, width: width)
        if moves, let old, let moved = rk_remap(old, Self.bytes(T.self, rows: capacity, width: width), size) {
            return moved.bindMemory(to: T.self, capacity: rows * width)
        }
        let address = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let address, address != MAP_FAILED else {
            fatalError("out of memory for a registry index of \(rows) rows of \(width) \(T.self) (errno \(errno))")
        }
        if let old {
            address.copyMemory(from: old, byteCount: live * width * MemoryLayout<T>.stride)
            Self.release(old, rows: capacity, width: width)
        }
        return address.bindMemory(to: T.self, capacity: rows * width)
    }

    private static func release<T>(_ buffer: UnsafeMutablePointer<T>, rows count: Int, width: Int) {
        munmap(buffer, Self.bytes(T.self, rows: count, width: width))
    }
}
