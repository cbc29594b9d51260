import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel
import Synchronization

/// The one place a commit happens: the writer thread's batches (group commit), each operation of a
/// batch in one write transaction, then the index changes published, then the answers. Every write
/// of the engine is a ``WriteQueue/Request`` submitted through ``Engine/write(exclusive:precheck:flat:useReserve:_:completion:)``.
extension Engine {
    // MARK: Writes

    /// Runs `body` in the next group commit and returns its result once the commit is durable and the
    /// index updated.
    /// `useReserve`: the write frees space or adds next to nothing (a deletion, the audit trail,
    /// verify), so it goes ahead when the file system is down to its reserve (``StorageReserve``).
    /// `local`: the node's own housekeeping (the audit trail, verify, encryption at rest), never
    /// replicated, so allowed on a fleet replica outside the log.
    func write<T: Sendable>(
        exclusive: Bool = false,
        precheck: Precheck? = nil,
        flat: Bool = false,
        useReserve: Bool = false,
        local: Bool = false,
        _ body: @escaping @Sendable (borrowing Transaction, OperationContext) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            self.write(exclusive: exclusive, precheck: precheck, flat: flat, useReserve: useReserve, local: local, body) {
                continuation.resume(with: $0)
            }
        }
    }

    /// ``write(exclusive:precheck:_:)`` without a task: `completion` runs once, on the writer thread
    /// after the commit (or on this thread, at once, when the writer is stopping). For callers that
    /// answer from an event loop, where a suspended task would cost two thread switches per write.
    /// `flat`: see ``WriteQueue/Request/flat``.
    func write<T: Sendable>(
        exclusive: Bool = false,
        precheck: Precheck? = nil,
        flat: Bool = false,
        useReserve: Bool = false,
        local: Bool = false,
        _ body: @escaping @Sendable (borrowing Transaction, OperationContext) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        var request = WriteQueue.Request(
            exclusive: exclusive, precheck: precheck, flat: flat, useReserve: useReserve, body, completion: completion)
        guard let writer = self.writer else {
            return request.fail(RegistryError(.internal, "the store is open read-only"))
        }
        let application = FleetApplication.current
        if let application {
            request.fleetPosition = application.position
            request.fleetPrevious = application.previous
            request.fleetTime = application.committedAt
        } else if !local && self.isReplica.load(ordering: .acquiring) && !Engine.unorderedFleetWritesForTesting {
            // A replica changes only as the log says: a write from anywhere else would make it
            // differ from the others for good.
            return request.fail(RegistryError(.internal, "this fleet node tried to write outside the fleet's log; nothing was written"))
        }
        if !writer.submit(request) {
            request.fail(RegistryError(.shuttingDown, "the registry is shutting down"))
        }
        application?.queued()
    }

    /// Runs one batch on the writer thread: every operation in a nested transaction of one write
    /// transaction (a failed operation is rolled back alone), one durable commit, then the index
    /// changes, then the completions.
    func run(_ batch: [WriteQueue.Request]) {
        var batch = batch
        // Writes that add data are refused, before anything runs, while the file system is down to
        // its reserve; the rest of the batch goes ahead.
        if batch.contains(where: { !$0.useReserve }), let refusal = self.reserve.refusal(environment: self.store.environment) {
            for request in batch where !request.useReserve { request.fail(refusal) }
            batch.removeAll { !$0.useReserve }
            if batch.isEmpty { return }
        }
        let prechecked = self.precheck(batch)
        let started = ContinuousClock.now
        let transactionBefore = self.store.environment.lastCommittedTransaction
        let committed: (results: [Result<WriteQueue.Answer, any Error>], changes: BatchChanges)
        do {
            committed = try self.commit(batch, prechecked: prechecked)
        } catch {
            let failure = (error as? LMDBError).map(RegistryError.storage) ?? error
            for request in batch { request.fail(failure) }
            // A commit that failed part-way may have written pages past the end of the store.
            self.eraseAfterBatch(sync: batch.allSatisfy(\.isLazy), always: true)
            return
        }
        // Operations are the requests of clients; lazy ones (audit flushes, erasure's commits and
        // polls) only ride along, and a batch of them alone that wrote nothing is no commit.
        let operations = batch.count { !$0.isLazy }
        if operations > 0 || self.store.environment.lastCommittedTransaction != transactionBefore {
            self.commits.add(1, ordering: .relaxed)
            self.committedOperations.add(operations, ordering: .relaxed)
            let elapsed = (ContinuousClock.now - started).components
            self.metrics.commitDuration.recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
            self.metrics.batchSize.record(operations)
        }
        if !committed.changes.isEmpty {
            self.publish { self.apply(committed.changes.changes) }
            if committed.changes.changes.contains(where: \.freesPages) { self.reserve.pagesFreed() }
        }
        for (request, result) in zip(batch, committed.results) {
            switch result {
            case .success(let answer): answer.send()
            case .failure(let error): request.fail(error is RegistryError ? error : RegistryError(.internal, "\(error)"))
            }
        }
        // After the replies: erasure never delays one.
        self.eraseAfterBatch(sync: batch.allSatisfy(\.isLazy))
    }

    // MARK: Publishing commits in the index

    /// Runs `body` once the index lock is free, without waiting for it here: right after the
    /// publication under way, on the writer thread, when there is one; else (it ended since the lock
    /// was found taken) at once. The caller's thread then waits only if a new publication began in
    /// the instants between the two looks.
    func afterPublication(_ body: @escaping @Sendable () -> Void) {
        self.metrics.indexLockWaits.increment()
        // The fleet entry being applied goes along (task-locals do not cross to the writer thread).
        let body: @Sendable () -> Void =
            if let application = FleetApplication.current { { FleetApplication.$current.withValue(application, operation: body) } } else { body }
        let deferred = self.publication.withLock { publication in
            guard publication.underWay else { return false }
            publication.waiting.append(body)
            return true
        }
        if !deferred { body() }
    }

    /// The writer's publication of a commit in the index: `change` under the write lock, then what
    /// found the lock taken meanwhile (``afterPublication(_:)``), on this thread.
    func publish(_ change: () -> Void) {
        self.publication.withLock { $0.underWay = true }
        let asked = ContinuousClock.now
        self.indexLock.withWriteLock(change)
        let held = (ContinuousClock.now - asked).components
        self.metrics.indexPublishDuration.recordNanoseconds(held.seconds * 1_000_000_000 + held.attoseconds / 1_000_000_000)
        let waiting = self.publication.withLock { publication in
            publication.underWay = false
            defer { publication.waiting = [] }
            return publication.waiting
        }
        for body in waiting { body() }
    }

    /// Runs a batch's operations in one write transaction and commits it; runs it again, with the
    /// operation nested, when a flat one failed after writing.
    func commit(
        _ batch: [WriteQueue.Request], prechecked: [Int: [UInt32: Scan.CheckBest]]
    ) throws -> (results: [Result<WriteQueue.Answer, any Error>], changes: BatchChanges) {
        var nested: Set<Int> = []
        while true {
            do {
                return try self.commitOnce(batch, prechecked: prechecked, nested: nested)
            } catch let failed as FlatOperationFailed {
                nested.insert(failed.index)
            }
        }
    }

    /// One run of ``commit(_:prechecked:)``: each operation in a nested transaction (a failed one is
    /// rolled back alone) unless it is flat and not in `nested`.
    func commitOnce(
        _ batch: [WriteQueue.Request], prechecked: [Int: [UInt32: Scan.CheckBest]], nested: Set<Int>
    ) throws -> (results: [Result<WriteQueue.Answer, any Error>], changes: BatchChanges) {
        var results: [Result<WriteQueue.Answer, any Error>] = []
        var changes = BatchChanges()
        try self.store.environment.write { txn in
            // Runs again from scratch if the map had to grow.
            results = []
            changes = BatchChanges()
            let firstId = try self.store.readUInt64(txn, Keys.nextTemplateId) ?? 1
            var nextId = firstId
            // Fleet mode: each entry the batch applies follows the store's last, as the log orders them.
            let firstPosition = batch.contains { $0.fleetPosition != nil } ? Int64(try self.store.readUInt64(txn, Keys.fleetPosition) ?? 0) : 0
            var position = firstPosition
            for (index, request) in batch.enumerated() {
                if let entry = request.fleetPosition, request.fleetPrevious != position || entry <= position {
                    // An entry before it failed on this node alone (its disk, its shutdown): the
                    // node applies the log again from its last position.
                    results.append(
                        .failure(
                            RegistryError(
                                .internal,
                                "fleet log entry \(entry) follows \(request.fleetPrevious) in the log, but \(position) was the last applied")))
                    continue
                }
                let context = OperationContext(batch: changes, nextTemplateId: nextId)
                context.time = request.fleetTime
                context.precomputed = prechecked[index] ?? [:]
                let flat = request.flat && !nested.contains(index)
                let changesBefore = txn.changeCount
                do {
                    let answer = try flat ? request.run(txn, context) : txn.nested { child in try request.run(child, context) }
                    changes.append(context.changes)
                    results.append(.success(answer))
                    if let entry = request.fleetPosition { position = entry }
                } catch let error as LMDBError {
                    throw error
                } catch  where flat && txn.changeCount != changesBefore {
                    // Its changes cannot be undone alone: the whole batch runs again.
                    throw FlatOperationFailed(index: index)
                } catch {
                    results.append(.failure(error))
                    // Refused the same way on every replica: applied, as a refusal.
                    if let entry = request.fleetPosition, Engine.failsEverywhere(error) { position = entry }
                }
                nextId = context.nextTemplateId
            }
            // A batch that wrote nothing leaves no dirty page, and LMDB then skips the fsync.
            if nextId != firstId { try self.store.writeInteger(txn, Keys.nextTemplateId, nextId) }
            if position != firstPosition { try self.store.writeInteger(txn, Keys.fleetPosition, UInt64(position)) }
            // The index will no longer be the snapshot it was loaded from. Let the file go before
            // the commit, not after it: a kill between the two must not leave the index's old
            // contents (a template this batch removes, say) in a file of the data directory.
            if !changes.isEmpty { self.forgetKeptSnapshot() }
        }
        return (results, changes)
    }

    /// A flat operation (``WriteQueue/Request/flat``) failed after writing: the batch's transaction is
    /// aborted and the batch runs again with that operation nested.
    struct FlatOperationFailed: Error {
        let index: Int
    }

    /// The announced registration checks of a batch against the committed index, one pass over each
    /// vector registry for all of them: per request (by position), per registry id. On the writer
    /// thread, which alone changes the index, so it needs no lock.
    func precheck(_ batch: [WriteQueue.Request]) -> [Int: [UInt32: Scan.CheckBest]] {
        var queries: [ObjectIdentifier: (registry: RegistryIndex, requests: [Int], rows: [Float], owners: [UInt32?])] = [:]
        for (index, request) in batch.enumerated() {
            guard let precheck = request.precheck, let gallery = self.state[precheck.gallery], gallery.id == precheck.galleryId else {
                continue
            }
            for registry in gallery.registries where !registry.isLandmarks && registry.count > 0 {
                guard let template = precheck.templates[registry.algorithm.version] else { continue }
                // Appended in place, with one lookup: a copy taken out of the dictionary and put back
                // copied the rows gathered so far on every registration of the batch.
                let owner = gallery.ordinal(of: precheck.identifier)
                func add(to entry: inout (registry: RegistryIndex, requests: [Int], rows: [Float], owners: [UInt32?])) {
                    entry.requests.append(index)
                    entry.rows += template.row
                    entry.owners.append(owner)
                }
                add(to: &queries[ObjectIdentifier(registry), default: (registry, [], [], [])])
            }
        }
        var results: [Int: [UInt32: Scan.CheckBest]] = [:]
        for (registry, requests, rows, owners) in queries.values {
            let floors = [Float](repeating: registry.thresholds.identification, count: owners.count)
            // A row that cannot be read leaves these requests without a precomputed check: each
            // scans again in its own body, which then fails with the fault.
            guard
                let found = try? rows.withUnsafeBufferPointer({ rows throws(RowFault) in
                    try Scan.check(registry, queries: rows.baseAddress!, owners: owners, floors: floors)
                })
            else { continue }
            for (request, best) in zip(requests, found) { results[request, default: [:]][registry.id] = best }
        }
        return results
    }

    /// Applies committed changes to the index. Holding the index write lock.
    func apply(_ changes: [IndexChange]) {
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
                let gallery = self.state[name] ?? GalleryIndex(id: record.id, name: name, registries: [])
                gallery.define(record, algorithms: algorithms, rows: self.storedRows)
                self.state[name] = gallery
            case .setCipher(let cipher):
                self.store.cipher.withLock { $0 = cipher }
                self.store.pendingCipher.withLock { $0 = nil }
            case .setProfile(let galleryId, let identifier, let profile):
                self.gallery(id: galleryId)?.setProfile(profile, of: identifier)
            case .deleteGallery(let name):
                self.state[name] = nil
            case .reload:
                self.reloadIndex()
            }
        }
    }
}
