import Glibc

/// The in-memory copy of one registry's templates, laid out for scanning.
///
/// All rows sit in one contiguous, 64-byte-aligned float32 buffer (`stride` floats each: the prepared
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
    private var rowOfTemplate: [UInt64: Int] = [:]
    /// The template ids of each identifier (by ordinal) in this registry.
    private(set) var templatesOfIdentifier: [UInt32: [UInt64]] = [:]

    init(id: UInt32, algorithm: Algorithm, thresholds: Thresholds) {
        self.id = id
        self.algorithm = algorithm
        self.thresholds = thresholds
        self.stride = algorithm.rowStride
        self.capacity = 0
        self.rows = Self.allocate(rows: 0, stride: self.stride)
    }

    deinit {
        free(self.rows)
    }

    /// Takes a stored registry definition's thresholds and quality gates.
    func configure(_ entry: GalleryRecord.Registry) {
        self.thresholds = entry.thresholds
        self.minimumQuality = entry.minimumQuality
        self.minimumAutoEnrolmentQuality = entry.minimumAutoEnrolmentQuality
    }

    /// Distinct identifiers held.
    var identifierCount: Int { self.templatesOfIdentifier.count }

    var isLandmarks: Bool {
        if case .landmarks = self.algorithm.kind { return true }
        return false
    }

    func holds(_ ordinal: UInt32) -> Bool { self.templatesOfIdentifier[ordinal] != nil }

    func row(_ index: Int) -> UnsafePointer<Float> { UnsafePointer(self.rows + index * self.stride) }

    func row(ofTemplate id: UInt64) -> Int? { self.rowOfTemplate[id] }

    /// Appends a row, letting `fill` write its `stride` floats in place (no intermediate copy).
    func append(templateId: UInt64, ordinal: UInt32, mask: UInt32, fill: (UnsafeMutablePointer<Float>) -> Void) {
        if self.count == self.capacity { self.grow() }
        fill(self.rows + self.count * self.stride)
        self.templateIds.append(templateId)
        self.ordinals.append(ordinal)
        if self.isLandmarks { self.masks.append(mask) }
        self.rowOfTemplate[templateId] = self.count
        self.templatesOfIdentifier[ordinal, default: []].append(templateId)
        self.count += 1
    }

    /// Removes a template's row. Returns its identifier ordinal, or nil when it is not here.
    @discardableResult
    func remove(templateId: UInt64) -> UInt32? {
        guard let index = self.rowOfTemplate.removeValue(forKey: templateId) else { return nil }
        let ordinal = self.ordinals[index]
        let last = self.count - 1
        if index != last {
            (self.rows + index * self.stride).update(from: self.rows + last * self.stride, count: self.stride)
            self.templateIds[index] = self.templateIds[last]
            self.ordinals[index] = self.ordinals[last]
            if self.isLandmarks { self.masks[index] = self.masks[last] }
            self.rowOfTemplate[self.templateIds[index]] = index
        }
        self.templateIds.removeLast()
        self.ordinals.removeLast()
        if self.isLandmarks { self.masks.removeLast() }
        self.count = last
        if var ids = self.templatesOfIdentifier[ordinal] {
            ids.removeAll { $0 == templateId }
            self.templatesOfIdentifier[ordinal] = ids.isEmpty ? nil : ids
        }
        return ordinal
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

    /// Sets a landmark row's presence mask (start-up load).
    func setMask(_ mask: UInt32, row index: Int) { self.masks[index] = mask }

    /// Makes room for `rows` rows in all, so that loading a known number does not regrow and copy.
    func reserve(_ rows: Int) {
        guard rows > self.capacity else { return }
        self.resize(to: rows)
        self.rowOfTemplate.reserveCapacity(rows)
    }

    private func grow() {
        self.resize(to: max(64, self.capacity * 2))
    }

    private func resize(to newCapacity: Int) {
        let newRows = Self.allocate(rows: newCapacity, stride: self.stride)
        newRows.update(from: self.rows, count: self.count * self.stride)
        free(self.rows)
        self.rows = newRows
        self.capacity = newCapacity
        self.templateIds.reserveCapacity(newCapacity)
        self.ordinals.reserveCapacity(newCapacity)
    }

    private static func allocate(rows: Int, stride: Int) -> UnsafeMutablePointer<Float> {
        // 64-byte alignment: rows start on cache lines when the stride allows it.
        var raw: UnsafeMutableRawPointer?
        let bytes = max(64, rows * stride * MemoryLayout<Float>.stride)
        precondition(posix_memalign(&raw, 64, bytes) == 0, "out of memory for a registry index of \(rows) rows")
        return raw!.bindMemory(to: Float.self, capacity: rows * stride)
    }
}
