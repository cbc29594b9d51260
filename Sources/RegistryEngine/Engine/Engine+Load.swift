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
            for registry in list {
                registry.keepRows(registry.keepsRows(for: total))
                registry.reserve(total)
            }
            for gallery in self.state.values { gallery.reserveIdentifiers(total) }

            // Two passes in lockstep on two threads. Without a snapshot: this one walks the template
            // records in id order, interning identifiers and placing each template's row; the other
            // follows it through the payloads (same id order), copying them from LMDB's memory map into
            // the placed rows. With a snapshot there are no payloads to copy: the other thread decodes
            // the records ahead of this one (about two fifths of the pass), then checks the snapshot
            // against the placements; this one only places.
            let placements = UnsafeMutableBufferPointer<Placement>.allocate(capacity: total)
            defer { placements.deallocate() }
            let progress = LoadProgress()
            let reader = RecordReader(store: self.store, registries: list.map { ($0.id, registries[$0.id]!.0) }, total: total)
            let placer = RecordPlacer(registries: list, galleries: reader.galleries, placements: placements, progress: progress)
            let loader = PayloadLoader(store: self.store, registries: list, placements: placements, progress: progress)
            let mapped: SnapshotLoad? = snapshot.flatMap { snapshot in
                do throws(IndexSnapshot.Unusable) {
                    return try SnapshotLoad(snapshot, registries: list, total: total)
                } catch {
                    reason = error.description
                    return nil
                }
            }
            if let mapped {
                let decoded = DecodedRecords(placements: placements)
                runAlongside({
                    decoded.fill(from: reader)
                    if decoded.error == nil { mapped.check(placements: decoded.placements, progress: progress) }
                }) {
                    var next = 0
                    while decoded.progress.wait(for: next) {
                        let (identifier, hash) = decoded.take(next)
                        placer.add(placements[next], identifier: identifier, hash: hash)
                        next += 1
                    }
                    placer.flush()
                    if decoded.error == nil { progress.finish(placer.placed) } else { progress.fail() }
                }
                if let error = decoded.error { throw error }
                if mapped.failure == nil && mapped.matchesPlacedRows() {
                    mapped.adopt()
                    adopted = true
                    if let snapshot, let inUse = snapshot.inUse, mapped.matchesResidency() {
                        snapshot.keep()
                        self.keptSnapshot.withLock { $0 = KeptSnapshot(path: inUse, token: snapshot.header.token) }
                    }
                    return
                }
                reason = mapped.failure ?? "its templates are not the ones the store holds"
                mapped.discard()
                // The record pass is done: the payload pass runs alone, on this thread.
                loader.run()
            } else {
                try runAlongside({ loader.run() }) {
                    do {
                        try txn.forEach(self.store.templates) { key, value in
                            let (placement, identifier, hash) = try reader.decode(key: key, value: value, index: placer.received)
                            placer.add(placement, identifier: identifier, hash: hash)
                            return .continue
                        }
                        placer.flush()
                        progress.finish(placer.placed)
                        loader.helpFaultIn()
                    } catch {
                        progress.fail()
                        throw error
                    }
                }
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

/// Reads the template records for the load: each record decoded and checked (checksum, registry
/// and gallery), with its identifier's hash for interning. Used by whichever thread walks the records.
struct RecordReader: @unchecked Sendable {
    let store: Store
    /// The gallery of each registry, by position in the load's list.
    let galleries: [GalleryIndex]
    /// The template count the database records: no more records are taken.
    let total: Int
    /// A registry's position in the load's list, by id.
    private let position: [UInt32: Int]

    /// - Parameter registries: the load's list of registries (their ids), each with its gallery.
    init(store: Store, registries: [(id: UInt32, gallery: GalleryIndex)], total: Int) {
        self.store = store
        self.galleries = registries.map(\.gallery)
        self.total = total
        self.position = Dictionary(uniqueKeysWithValues: registries.enumerated().map { ($1.id, $0) })
    }

    /// The placement (without its row) of the `index`th record, its identifier and the identifier's
    /// ``OrdinalTable/hash(_:)``.
    func decode(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, index: Int) throws -> (Placement, String, Int) {
        let id = try Store.templateId(key)
        let record = try TemplateRecord(decoding: value, id: id)
        guard index < self.total else { throw StoreCorruption("more template records than the database counts") }
        guard let registry = self.position[record.registryId], self.galleries[registry].id == record.galleryId else {
            throw StoreCorruption("template \(id) belongs to registry \(record.registryId), which no gallery has")
        }
        let placement = Placement(id: id, registry: registry, row: 0, checksum: record.payloadChecksum)
        return (placement, record.identifier, OrdinalTable.hash(record.identifier))
    }
}

/// Places decoded records in order: each template's row in its registry, its identifier interned.
/// Records are placed in batches: the identifier-table slots of a whole batch are fetched before the
/// first is probed, so their cache misses overlap.
final class RecordPlacer {
    private let registries: [RegistryIndex]
    private let galleries: [GalleryIndex]
    private let placements: UnsafeMutableBufferPointer<Placement>
    private let progress: LoadProgress
    private var batch: [(placement: Placement, identifier: String, hash: Int)] = []
    /// Records placed so far.
    private(set) var placed = 0

    init(registries: [RegistryIndex], galleries: [GalleryIndex], placements: UnsafeMutableBufferPointer<Placement>, progress: LoadProgress) {
        self.registries = registries
        self.galleries = galleries
        self.placements = placements
        self.progress = progress
        self.batch.reserveCapacity(Engine.loadBatch)
    }

    /// Records taken so far, placed or waiting in the batch.
    var received: Int { self.placed + self.batch.count }

    func add(_ placement: Placement, identifier: String, hash: Int) {
        self.batch.append((placement, identifier, hash))
        if self.batch.count == Engine.loadBatch { self.flush() }
    }

    /// Places the records waiting in the batch.
    func flush() {
        for entry in self.batch { self.galleries[entry.placement.registry].prefetchIdentifier(hash: entry.hash) }
        for (placement, identifier, hash) in self.batch {
            let registry = self.registries[placement.registry]
            var placement = placement
            placement.row = registry.count
            self.placements[self.placed] = placement
            self.galleries[placement.registry].add(
                to: registry, templateId: placement.id, identifier: identifier, hash: hash, mask: 0, encodes: false
            ) { _ in }
            self.placed += 1
            // In steps: every store would pull the line from the core following it.
            if self.placed & 63 == 0 { self.progress.publish(self.placed) }
        }
        self.batch.removeAll(keepingCapacity: true)
    }
}

/// The records decoded ahead of the placing thread (snapshot loads): the decoding thread writes each
/// record's placement (without its row) straight into the load's placements and its identifier here;
/// the placing thread takes them in order. Room for every record (24 bytes each), so the decoding
/// thread never waits for the placing one, whatever order the two threads start in.
final class DecodedRecords: @unchecked Sendable {
    let placements: UnsafeMutableBufferPointer<Placement>
    /// How far decoding has got, for the placing thread (which drains what was decoded before a
    /// failure too, so that every identifier here is taken).
    let progress = LoadProgress()
    private let identifiers: UnsafeMutablePointer<(String, Int)>
    /// Identifiers decoded (written by the decoding thread, read once it has ended).
    private var decoded = 0
    /// Identifiers the placing thread has taken (moved out), from the start.
    private var taken = 0
    /// Why decoding stopped early; read only once ``progress`` says it has ended.
    private(set) var error: (any Error)?

    init(placements: UnsafeMutableBufferPointer<Placement>) {
        self.placements = placements
        self.identifiers = .allocate(capacity: max(1, placements.count))
    }

    deinit {
        (self.identifiers + self.taken).deinitialize(count: self.decoded - self.taken)
        self.identifiers.deallocate()
    }

    /// Decodes every template record, in its own read transaction (no writer exists yet: it sees the
    /// same store as the placing thread's).
    func fill(from reader: RecordReader) {
        do {
            try reader.store.environment.read { txn in
                try txn.forEach(reader.store.templates) { key, value in
                    let (placement, identifier, hash) = try reader.decode(key: key, value: value, index: self.decoded)
                    self.placements[self.decoded] = placement
                    (self.identifiers + self.decoded).initialize(to: (identifier, hash))
                    self.decoded += 1
                    if self.decoded & 63 == 0 { self.progress.publish(self.decoded) }
                    return .continue
                }
            }
        } catch {
            self.error = error
        }
        if self.error == nil {
            self.progress.finish(self.decoded)
        } else {
            self.progress.publish(self.decoded)
            self.progress.fail()
        }
    }

    /// The identifier and hash of record `index` (taken in order, once each).
    func take(_ index: Int) -> (String, Int) {
        self.taken = index + 1
        return (self.identifiers + index).move()
    }
}

/// Where a template's row goes: its registry (by position in the load's list) and row.
struct Placement {
    var id: UInt64
    var registry: Int
    var row: Int
    /// The payload checksum of the template's record.
    var checksum: UInt32
}

/// How far one pass of the load has got (the record pass's placements, for the payload pass or the
/// snapshot check following it; the decoded records, for the placing thread).
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

    /// Waits until item `index` (a template placed, a record decoded) is published. Returns false when
    /// there will be no such item. Yields at first (the passes publish every 64), then sleeps in steps of
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
