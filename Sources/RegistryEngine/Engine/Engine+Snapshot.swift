import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

/// How the index was built at open: from a snapshot, or from every payload in LMDB (and why).
public struct IndexLoad: Sendable, CustomStringConvertible {
    /// Whether the rows came from the index snapshot written at the last clean close.
    public let fromSnapshot: Bool
    /// Why no snapshot was used (nil when one was, or when there was none to use).
    public let reason: String?

    public var description: String {
        if self.fromSnapshot { return "snapshot" }
        return self.reason.map { "full (snapshot not used: \($0))" } ?? "full"
    }
}

/// The snapshot file an open's index was loaded from, under its in-use name, and its token.
struct KeptSnapshot: Sendable {
    var path: String
    var token: [UInt8]
}

extension Engine {
    /// Writes the index snapshot for the next open (see ``IndexSnapshot``): the file first, made
    /// durable, then its token in one LMDB commit. Called by ``close()`` once the writer has stopped,
    /// so nothing changes the index or the store meanwhile. Returns a line for the log; never throws:
    /// a snapshot that cannot be written only means a full load at the next start.
    ///
    /// When the index is still the snapshot it was loaded from (nothing was registered, removed or
    /// reconfigured since), that file is given its name back and its token committed again, instead
    /// of the same bytes being written anew: at 1M × 512 floats, 511 MiB and 1.5–2.1 s at every
    /// stop of a daemon that only identified and authenticated.
    func saveSnapshot() -> String {
        let path = IndexSnapshot.path(in: self.path)
        let temporary = path + ".tmp"
        unlink(temporary)
        guard self.store.cipher.withLock({ $0 == nil }) else {
            self.forgetKeptSnapshot()
            return "no index snapshot: the store is encrypted"
        }
        let started = ContinuousClock.now
        let registries = self.indexLock.withReadLock {
            self.state.values.flatMap(\.registries).sorted { $0.id < $1.id }
        }
        let templates = registries.reduce(0) { $0 + $1.count }
        guard templates >= self.snapshotMinimumTemplates else {
            self.forgetKeptSnapshot()
            return "no index snapshot: \(templates) templates load in full quickly"
        }
        if let kept = self.keptSnapshot.withLock({ $0.take() }) {
            if rename(kept.path, path) == 0 {
                do {
                    try Self.syncDirectory(self.path)
                    try self.store.environment.write { txn in try txn.put(self.store.meta, key: Keys.snapshotToken, value: kept.token) }
                    return "index snapshot kept: \(templates) rows, unchanged since it was loaded"
                } catch {
                    unlink(path)
                    return "no index snapshot (the next start loads every template): \(error)"
                }
            }
            // Renamed away meanwhile, or a file system that refuses: written anew below.
            unlink(kept.path)
        }
        // Leave the store room to grow: a snapshot is worth less than the next registrations.
        let needed = registries.reduce(IndexSnapshot.headerSpace(registries: registries.count)) { total, registry in
            IndexSnapshot.Kind.allCases.reduce(total) { $0 + IndexSnapshot.aligned(registry.snapshotLength($1, rows: registry.count)) }
        }
        var disk = statvfs()
        if statvfs(self.path, &disk) == 0 {
            let free = Int(disk.f_bavail) * Int(disk.f_frsize)
            guard free >= needed + Self.snapshotDiskReserve else {
                let reserve = Self.snapshotDiskReserve >> 20
                return "no index snapshot: it needs \(needed >> 20) MiB and \(reserve) MiB must stay free, but the disk has \(free >> 20) MiB"
            }
        }
        do {
            var generator = SystemRandomNumberGenerator()
            let token = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let writer = try IndexSnapshot.Writer(path: temporary, registries: registries.count)
            var entries: [IndexSnapshot.Registry] = []
            for registry in registries { entries.append(try registry.writeSnapshot(to: writer)) }
            try writer.finish(IndexSnapshot(token: token, registries: entries))
            guard rename(temporary, path) == 0 else {
                throw IndexSnapshot.Unusable("cannot rename it into place: \(String(cString: strerror(errno)))")
            }
            try Self.syncDirectory(self.path)
            try self.store.environment.write { txn in try txn.put(self.store.meta, key: Keys.snapshotToken, value: token) }
            let milliseconds = Int((ContinuousClock.now - started) / .milliseconds(1))
            return "index snapshot written: \(templates) rows, \(writer.offset >> 20) MiB in \(milliseconds) ms"
        } catch {
            unlink(temporary)
            unlink(path)
            return "no index snapshot (the next start loads every template): \(error)"
        }
    }

    /// Unlinks the snapshot the index was loaded from, if still kept: called at the index's first
    /// change (in ``Engine/commitOnce(_:prechecked:nested:)``, before the commit that makes it
    /// worthless), at a close that writes no snapshot, and when an open fails.
    func forgetKeptSnapshot() {
        guard let kept = self.keptSnapshot.withLock({ $0.take() }) else { return }
        unlink(kept.path)
    }

    /// Free space a snapshot must leave on the store's file system.
    static let snapshotDiskReserve = 256 << 20

    private static func syncDirectory(_ directory: String) throws(IndexSnapshot.Unusable) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw IndexSnapshot.Unusable("cannot open \(directory): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw IndexSnapshot.Unusable("cannot sync \(directory): \(String(cString: strerror(errno)))") }
    }
}

/// A snapshot being taken in by the start-up load: its sections mapped where the registries keep
/// rows, codes and terms (read-only), checked on the load's second thread while the record pass runs
/// on the first, then either adopted (made writable: a page is copied only when a later write touches
/// it) or discarded (fresh zero pages mapped back, and the payloads are loaded from LMDB).
final class SnapshotLoad: @unchecked Sendable {
    private let opened: IndexSnapshot.Opened
    /// Per registry of the load's list, its entry in the snapshot.
    private let entries: [IndexSnapshot.Registry]
    private let registries: [RegistryIndex]
    /// The whole file, read-only (for the ids and masks sections).
    private let file: UnsafeRawPointer
    private var mapped: [(address: UnsafeMutableRawPointer, length: Int)] = []
    /// Set by ``check(placements:progress:)``: why the sections cannot be used (nil: they check out).
    private(set) var failure: String?

    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    private static func pages(_ bytes: Int) -> Int { (bytes + Self.pageSize - 1) / Self.pageSize * Self.pageSize }

    /// Maps the snapshot's sections for `registries` (reserved for `total` rows). Throws when the
    /// snapshot does not describe them.
    init(_ opened: IndexSnapshot.Opened, registries: [RegistryIndex], total: Int) throws(IndexSnapshot.Unusable) {
        self.opened = opened
        self.registries = registries
        var entries: [IndexSnapshot.Registry] = []
        for registry in registries {
            guard let entry = opened.header.registries.first(where: { $0.id == registry.id }), registry.fits(entry) else {
                throw IndexSnapshot.Unusable("it does not describe registry \(registry.id) as the store does")
            }
            entries.append(entry)
        }
        guard opened.header.registries.count == registries.count, entries.reduce(0, { $0 + $1.count }) == total else {
            throw IndexSnapshot.Unusable("its registries or row counts are not the store's")
        }
        self.entries = entries
        guard let file = mmap(nil, max(1, opened.size), PROT_READ, MAP_SHARED, opened.fd, 0), file != MAP_FAILED else {
            throw IndexSnapshot.Unusable("cannot map it: \(String(cString: strerror(errno)))")
        }
        self.file = UnsafeRawPointer(file)
        for (registry, entry) in zip(registries, entries) {
            registry.followResidency(of: entry)
            for (kind, target) in registry.snapshotTargets(entry) where entry[kind].length > 0 {
                let length = Self.pages(entry[kind].length)
                // Recorded first: a MAP_FIXED that fails may already have unmapped the range, which
                // discard() then maps afresh with the others.
                self.mapped.append((target, length))
                let address = mmap(target, length, PROT_READ, MAP_PRIVATE | MAP_FIXED, opened.fd, off_t(entry[kind].offset))
                guard address == target else {
                    let reason = String(cString: strerror(errno))
                    self.discard()
                    throw IndexSnapshot.Unusable("cannot map it where the index lives: \(reason)")
                }
            }
        }
    }

    deinit {
        munmap(UnsafeMutableRawPointer(mutating: self.file), max(1, self.opened.size))
    }

    /// Checks the snapshot against the store, on the load's second thread, following the record pass
    /// through `placements`: each row must be the template the records place there (same id), and a
    /// vector row's bytes must match its record's payload checksum (a vector payload is stored as the
    /// row's bytes), so a row is used only if it is what LMDB holds. Landmark rows (normalised from
    /// the stored coordinates), codes, terms and masks are checked against the section checksums
    /// written with them. Sets ``failure`` at the first mismatch.
    func check(placements: UnsafeMutableBufferPointer<Placement>, progress: LoadProgress) {
        var vectorRows: [UnsafeRawPointer?] = []
        for (registry, entry) in zip(self.registries, self.entries) {
            let targets = registry.snapshotTargets(entry)
            for (kind, target) in targets where entry[kind].length > 0 {
                // MADV_POPULATE_READ (Linux 5.14): maps the pages in bulk instead of a fault at a time.
                _ = madvise(target, Self.pages(entry[kind].length), 22)
            }
            // Vector rows are checked one by one against their records below (or not used at all, by a
            // registry that reads them from the store); everything else here.
            let rows = registry.isLandmarks ? nil : targets.first { $0.0 == .rows }.map { UnsafeRawPointer($0.1) }
            vectorRows.append(rows)
            for kind in IndexSnapshot.Kind.allCases where entry[kind].length > 0 && !(kind == .rows && !registry.isLandmarks) {
                let section = entry[kind]
                let bytes = targets.first { $0.0 == kind }.map { UnsafeRawPointer($0.1) } ?? self.file + section.offset
                guard CRC32C.checksum(UnsafeRawBufferPointer(start: bytes, count: section.length)) == section.checksum else {
                    self.failure = "its \(kind) section of registry \(registry.id) fails its checksum"
                    return
                }
            }
        }
        var next = 0
        while progress.wait(for: next) {
            let placement = placements[next]
            next += 1
            let entry = self.entries[placement.registry]
            guard placement.row < entry.count,
                UInt64(littleEndian: self.file.loadUnaligned(fromByteOffset: entry[.ids].offset + 8 * placement.row, as: UInt64.self))
                    == placement.id
            else {
                self.failure = "it does not hold template \(placement.id) where the store places it"
                return
            }
            guard let rows = vectorRows[placement.registry] else { continue }
            let bytes = entry.rowBytes
            guard CRC32C.checksum(UnsafeRawBufferPointer(start: rows + placement.row * bytes, count: bytes)) == placement.checksum else {
                self.failure = "its row of template \(placement.id) does not match the template's payload checksum"
                return
            }
        }
    }

    /// After the record pass: whether each registry holds as many rows as the snapshot (whose ids
    /// ``check(placements:progress:)`` compared one by one).
    func matchesPlacedRows() -> Bool {
        zip(self.registries, self.entries).allSatisfy { $0.count == $1.count }
    }

    /// Whether the snapshot keeps rows exactly where the registries now keep them (a registry that
    /// reads its rows from the store may have been loaded from one written with them in memory), so
    /// that, while nothing changes, it describes this index as a new one would.
    func matchesResidency() -> Bool {
        zip(self.registries, self.entries).allSatisfy { registry, entry in
            entry.count == 0 || (entry[.rows].length > 0) == (registry.rows != nil)
        }
    }

    /// Makes the mapped sections the registries' own (writable, copy-on-write) and takes the masks.
    func adopt() {
        for (address, length) in self.mapped { mprotect(address, length, PROT_READ | PROT_WRITE) }
        for registry in self.registries { registry.holdsFileMappings = true }
        for (registry, entry) in zip(self.registries, self.entries) where entry[.masks].length > 0 {
            registry.adoptSnapshotMasks(UnsafeRawBufferPointer(start: self.file + entry[.masks].offset, count: entry[.masks].length))
        }
        self.mapped = []
    }

    /// Puts fresh zero pages back where sections were mapped, for the full load to fill.
    func discard() {
        for (address, length) in self.mapped {
            let fresh = mmap(address, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0)
            precondition(fresh == address, "cannot restore the index's memory after an unusable snapshot (errno \(errno))")
        }
        self.mapped = []
    }
}
