import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

// The start-up load: the index built from the store before the engine serves anything.
extension Engine {
    /// Builds the index from the store: galleries first, then the template records and the payloads in
    /// id (registration) order, on two threads in lockstep; payloads are copied straight from LMDB's
    /// memory map into the registries' row buffers, with no per-template intermediate objects.
    ///
    /// With a `snapshot` (``IndexSnapshot``), its rows, codes and terms are mapped in place instead
    /// and checked on the second thread while the record pass runs; they are used only if they check
    /// out and hold exactly the templates the records placed, else the payloads are loaded as above.
    func load(snapshot: IndexSnapshot.Opened? = nil, unusable: String? = nil) throws -> IndexLoad {
        var reason = unusable
        var adopted = false
        try self.store.environment.read { txn in
            var registries: [UInt32: (GalleryIndex, RegistryIndex)] = [:]
            for (name, record) in try self.store.storedGalleries(txn) {
                let gallery = GalleryIndex(id: record.id, name: name, registries: [])
                gallery.define(
                    record, algorithms: try record.registries.map { try self.catalog.algorithm(version: $0.algorithm) }, rows: self.storedRows)
                for registry in gallery.registries { registries[registry.id] = (gallery, registry) }
                self.state[name] = gallery
            }
            // Two records claiming one id would trap `uniqueKeysWithValues`: refuse them instead.
            let galleriesById = try Dictionary(self.state.values.map { ($0.id, $0) }) { first, _ in
                throw StoreCorruption("two galleries have id \(first.id)")
            }
            try txn.forEach(self.store.profiles) { key, value in
                guard key.count > 4, let gallery = galleriesById[key.loadBigEndian(as: UInt32.self)] else { return .continue }
                let identifier = String(decoding: UnsafeRawBufferPointer(rebasing: key[4...]), as: UTF8.self)
                gallery.setProfile(try LivenessProfile(decoding: value), of: identifier)
                return .continue
            }

            // Every registry reserves room for all templates: address space only (the row buffers
            // are mappings whose pages are touched as rows are written), so no buffer regrows. The
            // same bound decides which vector registries keep their rows in memory: one the whole
            // store would fit (so that the record pass, which cannot pass `total`, never lets a
            // registry's rows go while a snapshot may be mapped into them).
            let total = try txn.count(self.store.templates)
            // The count comes from the database's own record: bound it by what the file can hold (a
            // record and its key take more than 32 bytes) before reserving memory for it.
            guard total >= 0, total <= self.store.environment.usedBytes / 32 else {
                throw StoreCorruption("the template database claims \(total) records, more than data.mdb can hold")
            }
            let list = Array(registries.values.map(\.1))
            let position = Dictionary(uniqueKeysWithValues: list.enumerated().map { ($1.id, $0) })
            for registry in list {
                registry.keepRows(registry.keepsRows(for: total))
                registry.reserve(total)
            }
            for gallery in self.state.values { gallery.reserveIdentifiers(total) }

            // Two passes in lockstep on two threads: this one walks the template records in id order,
            // interning identifiers and placing each template's row; the other follows it through the
            // payloads (same id order), copying them from LMDB's memory map into the placed rows.
            let placements = UnsafeMutableBufferPointer<Placement>.allocate(capacity: total)
            defer { placements.deallocate() }
            let progress = LoadProgress()
            let loader = PayloadLoader(store: self.store, registries: list, placements: placements, progress: progress)
            let mapped: SnapshotLoad? = snapshot.flatMap { snapshot in
                do throws(IndexSnapshot.Unusable) {
                    return try SnapshotLoad(snapshot, registries: list, total: total)
                } catch {
                    reason = error.description
                    return nil
                }
            }
            try runAlongside({
                if let mapped { mapped.check(placements: loader.placements, progress: loader.progress) } else { loader.run() }
            }) {
                var placed = 0
                // Records are placed in batches: the identifier-table slots of a whole batch are
                // fetched before the first is probed, so their cache misses overlap.
                var batch: [(id: UInt64, record: TemplateRecord, gallery: GalleryIndex, registry: RegistryIndex, hash: Int)] = []
                batch.reserveCapacity(Self.loadBatch)
                func place() {
                    for entry in batch { entry.gallery.prefetchIdentifier(hash: entry.hash) }
                    for (id, record, gallery, registry, hash) in batch {
                        placements[placed] = Placement(
                            id: id, registry: position[registry.id]!, row: registry.count, checksum: record.payloadChecksum)
                        gallery.add(to: registry, templateId: id, identifier: record.identifier, hash: hash, mask: 0, encodes: false) {
                            _ in
                        }
                        placed += 1
                        // In steps: every store would pull the line from the core following it.
                        if placed & 63 == 0 { progress.publish(placed) }
                    }
                    batch.removeAll(keepingCapacity: true)
                }
                do {
                    try txn.forEach(self.store.templates) { key, value in
                        let id = try Store.templateId(key)
                        let record = try TemplateRecord(decoding: value, id: id)
                        guard placed + batch.count < total else { throw StoreCorruption("more template records than the database counts") }
                        guard let (gallery, registry) = registries[record.registryId], gallery.id == record.galleryId else {
                            throw StoreCorruption("template \(id) belongs to registry \(record.registryId), which no gallery has")
                        }
                        batch.append((id, record, gallery, registry, OrdinalTable.hash(record.identifier)))
                        if batch.count == Self.loadBatch { place() }
                        return .continue
                    }
                    place()
                    progress.finish(placed)
                    if mapped == nil { loader.helpFaultIn() }
                } catch {
                    progress.fail()
                    throw error
                }
            }
            if let mapped {
                if mapped.failure == nil && mapped.matchesPlacedRows() {
                    mapped.adopt()
                    adopted = true
                    return
                }
                reason = mapped.failure ?? "its templates are not the ones the store holds"
                mapped.discard()
                // The record pass is done: the payload pass runs alone, on this thread.
                loader.run()
            }
            if let error = loader.error { throw error }
            for (registry, row, mask) in loader.masks { list[registry].setMask(mask, row: row) }
        }
        return IndexLoad(fromSnapshot: adopted, reason: reason)
    }
}

extension Engine {
    /// Template records the load's record pass places at a time (see its batch).
    static let loadBatch = 32
}

/// Where a template's row goes: its registry (by position in the load's list) and row.
struct Placement {
    var id: UInt64
    var registry: Int
    var row: Int
    /// The payload checksum of the template's record.
    var checksum: UInt32
}

/// How far the record pass has placed templates, for the payload pass following it.
final class LoadProgress: @unchecked Sendable {
    private let placed = Atomic<Int>(0)
    /// −1 while the record pass runs; then the final count, or −2 when it failed.
    private let final = Atomic<Int>(-1)

    func publish(_ count: Int) { self.placed.store(count, ordering: .releasing) }
    func finish(_ count: Int) {
        self.publish(count)
        self.final.store(count, ordering: .releasing)
    }
    func fail() { self.final.store(-2, ordering: .releasing) }

    /// Waits until template `index` is placed. Returns false when there will be no such template.
    /// Yields at first (the record pass publishes every 64 templates), then sleeps in steps of
    /// 50 µs: a follower that is faster than the record pass (the snapshot check, which reads only
    /// ids and row checksums, always is) would otherwise keep a core busy yielding for the whole load.
    func wait(for index: Int) -> Bool {
        var waits = 0
        while self.placed.load(ordering: .acquiring) <= index {
            let final = self.final.load(ordering: .acquiring)
            if final != -1 { return self.placed.load(ordering: .acquiring) > index }
            waits += 1
            if waits < 64 { sched_yield() } else { usleep(50) }
        }
        return true
    }
}

/// The payload pass of the start-up load, run on its own thread in its own read transaction (no
/// writer exists yet, so both transactions see the same snapshot).
private final class PayloadLoader: @unchecked Sendable {
    let store: Store
    let registries: [RegistryIndex]
    let placements: UnsafeMutableBufferPointer<Placement>
    let progress: LoadProgress
    /// Landmark presence masks, applied by the caller after the join (the record pass appends to the
    /// same arrays meanwhile).
    private(set) var masks: [(registry: Int, row: Int, mask: UInt32)] = []
    private(set) var error: (any Error)?
    /// Placements this pass has finished (published every few thousand).
    private let done = Atomic<Int>(0)

    init(store: Store, registries: [RegistryIndex], placements: UnsafeMutableBufferPointer<Placement>, progress: LoadProgress) {
        self.store = store
        self.registries = registries
        self.placements = placements
        self.progress = progress
    }

    func run() {
        do {
            try self.store.environment.read { txn in try self.load(txn) }
        } catch {
            self.error = error
        }
    }

    /// Called by the record pass once it is done: faults in, from the end backwards, the row pages
    /// this pass has not reached yet, so that the kernel's page allocation (most of a large load's
    /// time) runs on both cores. Only for the common case of one registry holding every template,
    /// where placement n is row n.
    func helpFaultIn() {
        let filled = self.registries.filter { $0.count > 0 }
        guard filled.count == 1, let registry = filled.first else { return }
        let step = max(1, (64 << 20) / (4 * registry.stride))
        var end = registry.count
        while end > self.done.load(ordering: .relaxed) + step {
            let start = end - step
            registry.populate(rows: start..<end)
            end = start
        }
    }

    private func load(_ txn: borrowing Transaction) throws {
        var next = 0
        var filled = 0
        var scratch: [UInt8] = []
        // The checksum of the current template's stored parts, checked against its record's.
        var crc = CRC32C()
        // Plain vector payloads are copied part by part straight into their row (or, for a registry
        // that reads its rows from the store, into `passing`, long enough to make its codes);
        // landmark payloads (normalised on load) and sealed payloads (opened first) are gathered in
        // `scratch`.
        let sealed = self.store.cipher.withLock { $0 != nil }
        let passing = UnsafeMutablePointer<Float>.allocate(capacity: self.registries.map(\.stride).max() ?? 1)
        defer { passing.deallocate() }
        func row(_ registry: RegistryIndex, _ index: Int) -> UnsafeMutablePointer<Float> {
            registry.rows == nil ? passing : registry.mutableRow(index)
        }
        func finish(_ placement: Placement) throws {
            let registry = self.registries[placement.registry]
            let expected = PreparedTemplate.payloadSize(of: registry.algorithm)
            guard crc.value == placement.checksum else {
                throw StoreCorruption("template \(placement.id): its payload does not match its checksum")
            }
            crc = CRC32C()
            if sealed {
                do {
                    scratch = try self.store.openPayload(scratch, id: placement.id)
                } catch {
                    throw StoreCorruption("template \(placement.id) does not open with the store's key")
                }
                if !registry.isLandmarks && scratch.count == expected {
                    scratch.withUnsafeBytes { bytes in
                        UnsafeMutableRawPointer(row(registry, placement.row)).copyMemory(from: bytes.baseAddress!, byteCount: expected)
                    }
                    filled = expected
                }
            }
            if registry.isLandmarks && scratch.count == expected {
                scratch.withUnsafeBytes { bytes in
                    let mask = bytes.loadUnaligned(as: UInt32.self)
                    self.masks.append((placement.registry, placement.row, mask))
                    let raw = (0..<registry.stride).map { bytes.loadUnaligned(fromByteOffset: 4 + 4 * $0, as: Float.self) }
                    registry.landmarkMatcher?.prepare(mask: mask, raw: raw, into: registry.mutableRow(placement.row))
                }
                filled = expected
            }
            guard filled == expected else {
                throw StoreCorruption("template \(placement.id) has \(filled) payload bytes, expected \(expected)")
            }
            // The row is complete (and in cache): its prefilter codes now.
            registry.encode(row: placement.row, from: row(registry, placement.row))
            filled = 0
            scratch.removeAll(keepingCapacity: true)
        }
        try txn.forEach(self.store.vectors) { key, value in
            let (id, _) = try Store.vectorPart(key)
            while self.progress.wait(for: next) && self.placements[next].id < id {
                try finish(self.placements[next])
                next += 1
                if next & 4095 == 0 { self.done.store(next, ordering: .relaxed) }
            }
            guard self.progress.wait(for: next), self.placements[next].id == id else {
                throw StoreCorruption("payload of template \(id) has no metadata")
            }
            let placement = self.placements[next]
            let registry = self.registries[placement.registry]
            crc.update(value)
            if sealed || registry.isLandmarks {
                scratch.append(contentsOf: value)
            } else {
                guard filled + value.count <= 4 * registry.stride else {
                    throw StoreCorruption("template \(id) has too many payload bytes")
                }
                UnsafeMutableRawPointer(row(registry, placement.row)).advanced(by: filled)
                    .copyMemory(from: value.baseAddress!, byteCount: value.count)
                filled += value.count
            }
            return .continue
        }
        while self.progress.wait(for: next) {
            try finish(self.placements[next])
            next += 1
        }
    }
}
