import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

/// The face template registry: galleries of tagged templates for several algorithms, stored in LMDB,
/// with the register / identify / authenticate semantics of the README's engine behaviour.
///
/// ## Concurrency
/// - **Writes** (register, import, auto-enrolment, deletions, gallery definitions) are queued to one
///   writer thread, which runs them in batches sharing one durable commit. A caller resumes only
///   after the commit holding its write is on disk and the index shows it.
/// - **Reads of templates** (identify, authenticate, migration status) never touch LMDB: they scan
///   the in-memory index under a shared lock, on the caller's thread.
/// - **Admin reads** (identifier pages, an identifier's templates) use short LMDB read transactions.
///
/// `@unchecked Sendable`: `state` is mutated only by the writer thread holding `indexLock` for
/// writing; other threads read it holding `indexLock` for reading; the writer thread reads it without
/// the lock, as no one else mutates it.
public final class Engine: @unchecked Sendable {
    /// The algorithms this engine knows.
    public let catalog: AlgorithmCatalog

    let store: Store
    let indexLock = ReadWriteLock()
    private let commits = Atomic<Int>(0)
    private let committedOperations = Atomic<Int>(0)
    var state: [String: GalleryIndex] = [:]
    private var writer: WriteQueue!
    let auditBuffer = AuditBuffer()
    let auditRetention: AuditRetention

    /// The writer queue (for requests that are not ``write(exclusive:_:)`` calls).
    var writerQueue: WriteQueue { self.writer }

    /// Opens (creating if needed) the store in directory `path` and loads the index.
    /// - Throws: ``RegistryError`` for a configuration the store cannot be opened with (a newer schema,
    ///   an algorithm whose stored registries the configuration no longer defines or changed), for a
    ///   damaged store (an empty or truncated data file, a record or payload failing its checksum: the
    ///   message names it and says to restore from a backup) and for files it may not write; or an
    ///   `LMDBError` when the environment cannot be opened otherwise (e.g. `EBUSY`: already open).
    public init(path: String, configuration: EngineConfiguration = EngineConfiguration()) throws {
        self.catalog = try AlgorithmCatalog(configured: configuration.algorithms)
        self.auditRetention = configuration.auditRetention
        // What liblmdb cannot check (wild page pointers in a damaged file) faults; say what it means.
        let fault = "the store in \(path) is probably damaged: reading it at start-up faulted. \(RegistryError.restoreAdvice)"
        do {
            self.store = try FaultReport.during(fault) { try Store(path: path, configuration: configuration) }
        } catch {
            throw RegistryError.opening(path, error)
        }
        do {
            try FaultReport.during(fault) {
                try self.store.environment.write { txn in
                    try self.store.prepareSchema(txn)
                    try self.checkEncryption(txn, key: configuration.encryptionKey)
                    try self.reconcileAlgorithms(txn)
                    if try txn.get(self.store.galleries, key: Array(GalleryConfiguration.defaultName.utf8)) == nil {
                        _ = try self.writeGallery(txn, configuration.defaultGallery, existing: nil)
                    }
                }
                try self.load()
            }
            // Identification never reads LMDB: the pages the load walked need not stay mapped.
            self.store.environment.releaseResidentPages()
        } catch {
            self.store.close()
            throw RegistryError.opening(path, error)
        }
        self.writer = WriteQueue(maximumBatch: configuration.maximumBatch) { [unowned self] batch in
            self.run(batch)
        }
    }

    deinit {
        self.close()
    }

    /// Finishes the writes already queued, stops the writer and closes the store. Later writes fail
    /// with `SHUTTING_DOWN`. Idempotent.
    public func close() {
        self.writer?.stop()
        self.store.close()
    }

    /// Write transactions committed, and the operations they carried: with concurrent writers,
    /// group commit makes the first smaller than the second.
    public var commitStatistics: (commits: Int, operations: Int) {
        (self.commits.load(ordering: .relaxed), self.committedOperations.load(ordering: .relaxed))
    }

    // MARK: Writes

    /// Runs `body` in the next group commit and returns its result once the commit is durable and the
    /// index updated.
    func write<T: Sendable>(
        exclusive: Bool = false,
        precheck: Precheck? = nil,
        _ body: @escaping @Sendable (borrowing Transaction, OperationContext) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let request = WriteQueue.Request(
                exclusive: exclusive,
                precheck: precheck,
                body: { txn, context in try body(txn, context) },
                completion: { result in continuation.resume(with: result.map { $0 as! T }) })
            if !self.writer.submit(request) {
                continuation.resume(throwing: RegistryError(.shuttingDown, "the registry is shutting down"))
            }
        }
    }

    /// Runs one batch on the writer thread: every operation in a nested transaction of one write
    /// transaction (a failed operation is rolled back alone), one durable commit, then the index
    /// changes, then the completions.
    private func run(_ batch: [WriteQueue.Request]) {
        var results: [Result<any Sendable, any Error>] = []
        var changes = BatchChanges()
        let prechecked = self.precheck(batch)
        do {
            try self.store.environment.write { txn in
                // Runs again from scratch if the map had to grow.
                results = []
                changes = BatchChanges()
                let firstId = try self.store.readUInt64(txn, Keys.nextTemplateId) ?? 1
                var nextId = firstId
                for (index, request) in batch.enumerated() {
                    let context = OperationContext(batch: changes, nextTemplateId: nextId)
                    context.precomputed = prechecked[index] ?? [:]
                    do {
                        let value = try txn.nested { child in try request.body(child, context) }
                        changes.append(context.changes)
                        results.append(.success(value))
                    } catch let error as LMDBError {
                        throw error
                    } catch {
                        results.append(.failure(error))
                    }
                    nextId = context.nextTemplateId
                }
                // A batch that wrote nothing leaves no dirty page, and LMDB then skips the fsync.
                if nextId != firstId { try self.store.writeInteger(txn, Keys.nextTemplateId, nextId) }
            }
        } catch {
            let failure = (error as? LMDBError).map(RegistryError.storage) ?? error
            for request in batch { request.completion(.failure(failure)) }
            return
        }
        self.commits.add(1, ordering: .relaxed)
        self.committedOperations.add(batch.count, ordering: .relaxed)
        if !changes.isEmpty {
            self.indexLock.withWriteLock { self.apply(changes.changes) }
        }
        for (request, result) in zip(batch, results) {
            request.completion(result.mapError { error in
                error is RegistryError ? error : RegistryError(.internal, "\(error)")
            })
        }
    }

    /// The announced registration checks of a batch against the committed index, one pass over each
    /// vector registry for all of them: per request (by position), per registry id. On the writer
    /// thread, which alone changes the index, so it needs no lock.
    private func precheck(_ batch: [WriteQueue.Request]) -> [Int: [UInt32: Scan.CheckBest]] {
        var queries: [ObjectIdentifier: (registry: RegistryIndex, requests: [Int], rows: [Float], owners: [UInt32?])] = [:]
        for (index, request) in batch.enumerated() {
            guard let precheck = request.precheck, let gallery = self.state[precheck.gallery], gallery.id == precheck.galleryId else {
                continue
            }
            for registry in gallery.registries where !registry.isLandmarks && registry.count > 0 {
                guard let template = precheck.templates[registry.algorithm.version] else { continue }
                let key = ObjectIdentifier(registry)
                var entry = queries[key] ?? (registry, [], [], [])
                entry.requests.append(index)
                entry.rows += template.row
                entry.owners.append(gallery.ordinal(of: precheck.identifier))
                queries[key] = entry
            }
        }
        var results: [Int: [UInt32: Scan.CheckBest]] = [:]
        for (registry, requests, rows, owners) in queries.values {
            let found = rows.withUnsafeBufferPointer { Scan.check(registry, queries: $0.baseAddress!, owners: owners) }
            for (request, best) in zip(requests, found) { results[request, default: [:]][registry.id] = best }
        }
        return results
    }

    /// Applies committed changes to the index. Holding the index write lock.
    private func apply(_ changes: [IndexChange]) {
        for change in changes {
            switch change {
            case .add(let template):
                guard let gallery = self.gallery(id: template.galleryId),
                    let registry = gallery.registry(id: template.registryId)
                else { continue }
                gallery.add(to: registry, templateId: template.id, identifier: template.identifier, mask: template.mask) { row in
                    template.row.withUnsafeBufferPointer { row.update(from: $0.baseAddress!, count: $0.count) }
                }
            case .remove(let id, let galleryId, let registryId):
                guard let gallery = self.gallery(id: galleryId), let registry = gallery.registry(id: registryId) else { continue }
                gallery.remove(templateId: id, from: registry)
            case .defineGallery(let name, let record, let algorithms):
                let existing = self.state[name]
                let registries = zip(record.registries, algorithms).map { entry, algorithm in
                    let registry = existing?.registry(id: entry.id)
                        ?? RegistryIndex(id: entry.id, algorithm: algorithm, thresholds: entry.thresholds)
                    registry.configure(entry)
                    return registry
                }
                let gallery = existing ?? GalleryIndex(id: record.id, name: name, registries: [])
                gallery.registries = registries
                gallery.liveness = record.liveness
                gallery.livenessK = record.livenessK
                self.state[name] = gallery
            case .setCipher(let cipher):
                self.store.cipher.withLock { $0 = cipher }
            case .setProfile(let galleryId, let identifier, let profile):
                self.gallery(id: galleryId)?.setProfile(profile, of: identifier)
            case .deleteGallery(let name):
                self.state[name] = nil
            }
        }
    }

    func gallery(id: UInt32) -> GalleryIndex? {
        self.state.values.first { $0.id == id }
    }

    /// The gallery named `name`; the caller holds the index lock or is the writer thread.
    func gallery(named name: String) throws(RegistryError) -> GalleryIndex {
        guard let gallery = self.state[name] else { throw .unknownGallery(name) }
        return gallery
    }

    // MARK: Galleries and algorithms in the store

    /// Creates or updates a gallery's stored definition. Registries keep their ids (and templates)
    /// when their algorithm stays; a registry dropped from the configuration must be empty.
    func writeGallery(
        _ txn: borrowing Transaction,
        _ configuration: GalleryConfiguration,
        existing: GalleryIndex?
    ) throws -> (record: GalleryRecord, algorithms: [Algorithm]) {
        try Names.validateGallery(configuration.name)
        guard !configuration.registries.isEmpty else {
            throw RegistryError.malformedRequest("gallery '\(configuration.name)' needs at least one registry")
        }
        var seen = Set<UInt32>()
        var registries: [GalleryRecord.Registry] = []
        var algorithms: [Algorithm] = []
        for entry in configuration.registries {
            let algorithm = try self.catalog.algorithm(version: entry.algorithm)
            guard seen.insert(entry.algorithm).inserted else {
                throw RegistryError.malformedRequest("gallery '\(configuration.name)' lists \(algorithm) twice")
            }
            let thresholds = entry.thresholds ?? Thresholds(defaultsFor: algorithm)
            try thresholds.validate(for: algorithm)
            for (name, minimum) in [("minimumQuality", entry.minimumQuality), ("minimumAutoEnrolmentQuality", entry.minimumAutoEnrolmentQuality)] {
                if let minimum, !(0...1).contains(minimum) {
                    throw RegistryError.malformedRequest("\(algorithm.name) \(name) \(minimum) is outside [0, 1]")
                }
            }
            let id = try existing?.registry(algorithm: entry.algorithm)?.id ?? self.store.takeId(txn, Keys.nextRegistryId)
            registries.append(GalleryRecord.Registry(
                id: id, algorithm: entry.algorithm, thresholds: thresholds, minimumQuality: entry.minimumQuality,
                minimumAutoEnrolmentQuality: entry.minimumAutoEnrolmentQuality))
            algorithms.append(algorithm)
            try self.store.putAlgorithm(txn, algorithm)
        }
        for dropped in existing?.registries ?? [] where !seen.contains(dropped.algorithm.version) && dropped.count > 0 {
            throw RegistryError.malformedRequest(
                "the \(dropped.algorithm) registry of gallery '\(configuration.name)' holds \(dropped.count) templates; delete them before removing it")
        }
        guard configuration.livenessK > 0 && configuration.livenessK <= LivenessProfile.maximumK else {
            throw RegistryError.malformedRequest(
                "gallery '\(configuration.name)' liveness k must be within (0, \(LivenessProfile.maximumK)]")
        }
        let id = try existing?.id ?? self.store.takeId(txn, Keys.nextGalleryId)
        let record = GalleryRecord(
            id: id, registries: registries, liveness: configuration.liveness, livenessK: configuration.livenessK)
        try self.store.putGallery(txn, name: configuration.name, record)
        return (record, algorithms)
    }

    /// Opens an encrypted store with its key, or starts encrypting a new store; refuses a missing or
    /// wrong key, and a key for a store that holds unencrypted templates.
    private func checkEncryption(_ txn: borrowing Transaction, key material: [UInt8]?) throws {
        let check = try txn.get(self.store.meta, key: Keys.encryptionCheck).map { Array($0) }
        guard let material else {
            if check != nil {
                throw RegistryError(
                    .internal, "the store is encrypted: start registryd with its key (--key-file, or the store-key credential)")
            }
            return
        }
        let cipher = try PayloadCipher(keyMaterial: material)
        if let check {
            guard (try? cipher.open(check, templateId: 0)) == PayloadCipher.checkPlaintext else {
                throw RegistryError(.internal, "the encryption key given does not open this store")
            }
        } else {
            guard try txn.count(self.store.templates) == 0 else {
                throw RegistryError(
                    .internal,
                    "the store holds unencrypted templates: start registryd without a key and encrypt it (registryctl encrypt)")
            }
            try txn.put(self.store.meta, key: Keys.encryptionCheck, value: try cipher.seal(PayloadCipher.checkPlaintext, templateId: 0))
        }
        self.store.cipher.withLock { $0 = cipher }
    }

    /// Refuses to open a store whose registries use an algorithm the configuration dropped or changed.
    private func reconcileAlgorithms(_ txn: borrowing Transaction) throws {
        for stored in try self.store.storedAlgorithms(txn) {
            let used = try self.store.storedGalleries(txn).contains { $0.record.registries.contains { $0.algorithm == stored.version } }
            guard used else { continue }
            guard let configured = try? self.catalog.algorithm(version: stored.version) else {
                throw RegistryError(
                    .unknownAlgorithm,
                    "the store has registries of algorithm \(stored), which the configuration no longer defines")
            }
            guard AlgorithmRecord.isCompatible(stored: stored, configured: configured) else {
                throw RegistryError(
                    .unknownAlgorithm,
                    "algorithm \(stored.version) is configured as \(configured.kind), \(configured.scoreFunction.rawValue) but the store holds templates of \(stored.kind), \(stored.scoreFunction.rawValue)")
            }
        }
    }

    // MARK: Start-up

    /// Builds the index from the store: galleries first, then the template records and the payloads in
    /// id (registration) order, on two threads in lockstep; payloads are copied straight from LMDB's
    /// memory map into the registries' row buffers, with no per-template intermediate objects.
    private func load() throws {
        try self.store.environment.read { txn in
            var registries: [UInt32: (GalleryIndex, RegistryIndex)] = [:]
            for (name, record) in try self.store.storedGalleries(txn) {
                let gallery = GalleryIndex(id: record.id, name: name, registries: [])
                gallery.liveness = record.liveness
                gallery.livenessK = record.livenessK
                for entry in record.registries {
                    let algorithm = try self.catalog.algorithm(version: entry.algorithm)
                    let registry = RegistryIndex(id: entry.id, algorithm: algorithm, thresholds: entry.thresholds)
                    registry.configure(entry)
                    gallery.registries.append(registry)
                    registries[entry.id] = (gallery, registry)
                }
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
            // are mappings whose pages are touched as rows are written), so no buffer regrows.
            let total = try txn.count(self.store.templates)
            // The count comes from the database's own record: bound it by what the file can hold (a
            // record and its key take more than 32 bytes) before reserving memory for it.
            guard total >= 0, total <= self.store.environment.usedBytes / 32 else {
                throw StoreCorruption("the template database claims \(total) records, more than data.mdb can hold")
            }
            let list = Array(registries.values.map(\.1))
            let position = Dictionary(uniqueKeysWithValues: list.enumerated().map { ($1.id, $0) })
            for registry in list { registry.reserve(total) }
            for gallery in self.state.values { gallery.reserveIdentifiers(total) }

            // Two passes in lockstep on two threads: this one walks the template records in id order,
            // interning identifiers and placing each template's row; the other follows it through the
            // payloads (same id order), copying them from LMDB's memory map into the placed rows.
            let placements = UnsafeMutableBufferPointer<Placement>.allocate(capacity: total)
            defer { placements.deallocate() }
            let progress = LoadProgress()
            let loader = PayloadLoader(store: self.store, registries: list, placements: placements, progress: progress)
            try runAlongside({ loader.run() }) {
                var placed = 0
                do {
                    try txn.forEach(self.store.templates) { key, value in
                        let id = try Store.templateId(key)
                        let record = try TemplateRecord(decoding: value, id: id)
                        guard placed < total else { throw StoreCorruption("more template records than the database counts") }
                        guard let (gallery, registry) = registries[record.registryId], gallery.id == record.galleryId else {
                            throw StoreCorruption("template \(id) belongs to registry \(record.registryId), which no gallery has")
                        }
                        placements[placed] = Placement(
                            id: id, registry: position[registry.id]!, row: registry.count, checksum: record.payloadChecksum)
                        gallery.add(to: registry, templateId: id, identifier: record.identifier, mask: 0) { _ in }
                        placed += 1
                        progress.publish(placed)
                        return .continue
                    }
                    progress.finish(placed)
                    loader.helpFaultIn()
                } catch {
                    progress.fail()
                    throw error
                }
            }
            if let error = loader.error { throw error }
            for (registry, row, mask) in loader.masks { list[registry].setMask(mask, row: row) }
        }
    }
}

/// Where a template's row goes: its registry (by position in the load's list) and row.
private struct Placement {
    var id: UInt64
    var registry: Int
    var row: Int
    /// The payload checksum of the template's record.
    var checksum: UInt32
}

/// How far the record pass has placed templates, for the payload pass following it.
private final class LoadProgress: @unchecked Sendable {
    private let placed = Atomic<Int>(0)
    /// −1 while the record pass runs; then the final count, or −2 when it failed.
    private let final = Atomic<Int>(-1)

    func publish(_ count: Int) { self.placed.store(count, ordering: .releasing) }
    func finish(_ count: Int) { self.final.store(count, ordering: .releasing) }
    func fail() { self.final.store(-2, ordering: .releasing) }

    /// Waits until template `index` is placed. Returns false when there will be no such template.
    func wait(for index: Int) -> Bool {
        while self.placed.load(ordering: .acquiring) <= index {
            let final = self.final.load(ordering: .acquiring)
            if final != -1 { return self.placed.load(ordering: .acquiring) > index }
            sched_yield()
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
        // Plain vector payloads are copied part by part straight into their row; landmark payloads
        // (normalised on load) and sealed payloads (opened first) are gathered in `scratch`.
        let sealed = self.store.cipher.withLock { $0 != nil }
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
                        UnsafeMutableRawPointer(registry.mutableRow(placement.row)).copyMemory(from: bytes.baseAddress!, byteCount: expected)
                    }
                    filled = expected
                }
            }
            if registry.isLandmarks && scratch.count == expected {
                scratch.withUnsafeBytes { bytes in
                    let mask = bytes.loadUnaligned(as: UInt32.self)
                    self.masks.append((placement.registry, placement.row, mask))
                    let raw = (0..<registry.stride).map { bytes.loadUnaligned(fromByteOffset: 4 + 4 * $0, as: Float.self) }
                    LandmarkAlgorithm.normalise(mask: mask, raw: raw, into: registry.mutableRow(placement.row))
                }
                filled = expected
            }
            guard filled == expected else {
                throw StoreCorruption("template \(placement.id) has \(filled) payload bytes, expected \(expected)")
            }
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
                UnsafeMutableRawPointer(registry.mutableRow(placement.row)).advanced(by: filled)
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

/// Runs `background` on a new thread while `body` runs on this one; returns once both are done.
func runAlongside<T>(_ background: @escaping @Sendable () -> Void, _ body: () throws -> T) rethrows -> T {
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { context in
        Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().run()
        return nil
    }, Unmanaged.passRetained(ThreadBody(background)).toOpaque())
    guard rc == 0 else {
        // No second thread: run the background work first, then the body (still correct, slower).
        background()
        return try body()
    }
    defer { pthread_join(thread, nil) }
    return try body()
}

private final class ThreadBody {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
