import CScanKernels
import Glibc
import RegistryModel

// A registry's part of the index snapshot (``IndexSnapshot``): written in template-id order, which is
// the order the start-up load places rows in, so that the next load can map the sections where the
// rows, codes and terms live instead of copying them.
extension RegistryIndex {
    /// Writes this registry's sections (rows sorted by template id) and returns its header entry.
    func writeSnapshot(to writer: IndexSnapshot.Writer) throws(IndexSnapshot.Unusable) -> IndexSnapshot.Registry {
        // Removals move the last row into the hole, so rows are in id order only until the first one.
        var order: [Int]? = nil
        if zip(self.templateIds, self.templateIds.dropFirst()).contains(where: { $0 >= $1 }) {
            order = self.templateIds.indices.sorted { self.templateIds[$0] < self.templateIds[$1] }
        }
        var entry = IndexSnapshot.Registry(
            id: self.id, algorithm: self.algorithm.version, rowBytes: 4 * self.stride, codeBytes: self.codeStride, count: self.count)
        let count = self.count
        func rows(_ base: UnsafeRawPointer, bytes: Int) throws(IndexSnapshot.Unusable) -> IndexSnapshot.Section {
            try writer.section { (sink: (UnsafeRawBufferPointer) throws(IndexSnapshot.Unusable) -> Void) throws(IndexSnapshot.Unusable) in
                if let order {
                    for row in order { try sink(UnsafeRawBufferPointer(start: base + row * bytes, count: bytes)) }
                } else {
                    try sink(UnsafeRawBufferPointer(start: base, count: count * bytes))
                }
            }
        }
        func values<T>(_ array: [T]) throws(IndexSnapshot.Unusable) -> IndexSnapshot.Section {
            let sorted = order.map { $0.map { array[$0] } } ?? array
            var result: Result<IndexSnapshot.Section, IndexSnapshot.Unusable> = .failure(IndexSnapshot.Unusable("not written"))
            sorted.withUnsafeBytes { bytes in
                result = Result { () throws(IndexSnapshot.Unusable) in
                    try writer.section { (sink: (UnsafeRawBufferPointer) throws(IndexSnapshot.Unusable) -> Void) throws(IndexSnapshot.Unusable) in
                        try sink(bytes)
                    }
                }
            }
            return try result.get()
        }
        entry[.ids] = try values(self.templateIds.map(\.littleEndian))
        if let resident = self.rows { entry[.rows] = try rows(UnsafeRawPointer(resident), bytes: 4 * self.stride) }
        if let codes, let terms {
            entry[.codes] = try rows(UnsafeRawPointer(codes), bytes: self.codeStride)
            entry[.terms] = try rows(UnsafeRawPointer(terms), bytes: MemoryLayout<rk_row_terms>.stride)
        }
        if self.isLandmarks { entry[.masks] = try values(self.masks.map(\.littleEndian)) }
        return entry
    }

    /// Bytes of a section of this registry's snapshot for `rows` rows (0: the registry has none).
    func snapshotLength(_ kind: IndexSnapshot.Kind, rows: Int) -> Int {
        switch kind {
        case .ids: rows * 8
        case .rows: self.rows == nil ? 0 : rows * 4 * self.stride
        case .codes: self.codes == nil ? 0 : rows * self.codeStride
        case .terms: self.terms == nil ? 0 : rows * MemoryLayout<rk_row_terms>.stride
        case .masks: self.isLandmarks ? rows * 4 : 0
        }
    }

    /// Whether `entry` describes rows of this registry as the load placed them (same id, algorithm
    /// and layout; the count the record pass reached is checked after it). A vector registry that can
    /// read its rows from the store takes a snapshot written either way: with its rows or without
    /// (``followResidency(of:)``).
    func fits(_ entry: IndexSnapshot.Registry) -> Bool {
        entry.id == self.id && entry.algorithm == self.algorithm.version && entry.rowBytes == 4 * self.stride
            && entry.codeBytes == self.codeStride && entry.count <= self.capacity
            && IndexSnapshot.Kind.allCases.allSatisfy { kind in
                entry[kind].length == self.snapshotLength(kind, rows: entry.count)
                    || (kind == .rows && self.source != nil && [0, entry.count * entry.rowBytes].contains(entry[kind].length))
            }
    }

    /// Takes the snapshot's word on whether the rows were resident when it was written, once it fits:
    /// a registry whose snapshot holds no rows reads them from the store (it had outgrown the resident
    /// limit), so that the snapshot is still used; one that reads them from the store leaves a rows
    /// section unused. Before the record pass (the registry is empty).
    func followResidency(of entry: IndexSnapshot.Registry) {
        if entry[.rows].length == 0 { self.keepRows(false) }
    }

    /// The places the rows, codes and terms sections map to (read-only until adopted).
    func snapshotTargets(_ entry: IndexSnapshot.Registry) -> [(IndexSnapshot.Kind, UnsafeMutableRawPointer)] {
        var targets: [(IndexSnapshot.Kind, UnsafeMutableRawPointer)] = self.rows.map { [(.rows, UnsafeMutableRawPointer($0))] } ?? []
        if let codes, let terms {
            targets.append((.codes, UnsafeMutableRawPointer(codes)))
            targets.append((.terms, UnsafeMutableRawPointer(terms)))
        }
        return targets
    }

    /// Takes the masks a snapshot recorded (landmark registries), once its rows are adopted.
    func adoptSnapshotMasks(_ masks: UnsafeRawBufferPointer) {
        for row in 0..<self.count {
            self.setMask(UInt32(littleEndian: masks.loadUnaligned(fromByteOffset: 4 * row, as: UInt32.self)), row: row)
        }
    }
}
