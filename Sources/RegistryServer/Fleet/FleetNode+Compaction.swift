import Logging
import RegistryEngine
import RegistryFleet
import RegistryModel
import Synchronization

extension FleetNode {
    // MARK: Compaction and snapshots (docs/fleet.md, "Compaction")

    /// Bytes of a state image per sealed part (one row of `fleet_snapshot_parts`).
    static let snapshotPartBytes = 1 << 20
    /// Entries after the newest snapshot past which another is due.
    static let snapshotEntries: Int64 = 10_000
    /// The newest snapshot's age past which another is due, once anything was written since.
    static let snapshotAge: Duration = .seconds(3600)

    /// Every ``FleetSettings/compactionInterval``: a snapshot of this replica when one is due, then
    /// the log compacted (whichever node gets there first does it; the others find nothing to do).
    func compactRegularly() async {
        var lastFailure: String?
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: self.settings.compactionInterval)
                _ = try await self.compactOnce()
                lastFailure = nil
            } catch is CancellationError {
                return
            } catch {
                let reason = "\(error)"
                if reason != lastFailure {
                    self.logger.warning("the fleet's log could not be compacted", metadata: ["error": "\(reason.prefix(300))"])
                }
                lastFailure = reason
            }
        }
    }

    /// One round: a snapshot when due (a deletion since the newest, or 10,000 entries, or an hour
    /// since it with anything written), then the log trimmed as far as it may be.
    /// - Returns: what the compaction did (nil: this node cannot apply the log now, or another
    ///   node's compaction was under way).
    @discardableResult
    func compactOnce() async throws -> FleetCompaction? {
        let seal = self.state.withLock { state in state.stuck == nil && state.failedHere == nil ? state.seal : nil }
        guard let seal else { return nil }
        let applied = try self.engine.fleetPosition()
        let tail = try await withinDeadline(.seconds(10)) {
            try await self.log.sinceSnapshot(upTo: applied, erasureKind: FleetEntryKind.erasure.rawValue)
        }
        if tail.entries > 0
            && (tail.erasures || tail.entries >= Self.snapshotEntries || tail.snapshotAge.map { $0 >= Self.snapshotAge } ?? true)
        {
            try await self.writeSnapshot(seal)
        }
        let compaction = try await withinDeadline(.seconds(60)) { try await self.log.compact(retention: self.settings.retention) }
        if let compaction, compaction.trimmed > compaction.trimmedBefore {
            self.logger.info(
                "compacted the fleet's log",
                metadata: [
                    "trimmed": "\(compaction.trimmed)", "entries": "\(compaction.entriesRemoved)", "snapshots": "\(compaction.snapshotsRemoved)",
                ])
        }
        return compaction
    }

    /// Writes this replica's state image at its position, sealed in parts, as the fleet's newest
    /// snapshot (unless another node wrote one at or after it meanwhile).
    private func writeSnapshot(_ seal: FleetSeal) async throws {
        let started = ContinuousClock.now
        let (position, image) = try await self.engine.fleetImage()
        let count = max(1, (image.count + Self.snapshotPartBytes - 1) / Self.snapshotPartBytes)
        let parts = try (0..<count).map { index in
            let range = (index * Self.snapshotPartBytes)..<min(image.count, (index + 1) * Self.snapshotPartBytes)
            return try seal.seal(Array(image[range]), context: FleetSeal.snapshotContext(position: position, part: index, parts: count))
        }
        guard try await withinDeadline(.seconds(120), { try await self.log.writeSnapshot(position: position, parts: parts) }) else { return }
        self.logger.info(
            "wrote a snapshot of the fleet's state",
            metadata: ["position": "\(position)", "bytes": "\(image.count)", "milliseconds": "\(Self.milliseconds(since: started))"])
    }

    /// Loads the fleet's newest snapshot in place of this replica's contents: for a node whose
    /// position is behind the log's trimmed start (new, or away longer than the retention time).
    /// - Returns: the snapshot's position, from which the node follows the log.
    func loadSnapshot(trimmed: Int64) async throws -> Int64 {
        guard let seal = self.state.withLock({ $0.seal }) else { throw RegistryError(.internal, "the fleet's seal is not known yet") }
        let started = ContinuousClock.now
        guard let (position, parts) = try await withinDeadline(.seconds(120), { try await self.log.newestSnapshot() }) else {
            throw RegistryError(.internal, "the fleet's log was trimmed up to position \(trimmed) but the database holds no snapshot")
        }
        guard position >= trimmed else {
            throw RegistryError(.internal, "the fleet's newest snapshot (position \(position)) is behind the log's trimmed start (\(trimmed))")
        }
        var image: [UInt8] = []
        for (index, part) in parts.enumerated() {
            image += try seal.open(part, context: FleetSeal.snapshotContext(position: position, part: index, parts: parts.count))
        }
        try await self.engine.loadFleetImage(image)
        self.logger.notice(
            "loaded the fleet's state: the log no longer reached back to this node's position",
            metadata: ["position": "\(position)", "bytes": "\(image.count)", "milliseconds": "\(Self.milliseconds(since: started))"])
        return position
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> Int64 {
        let elapsed = (ContinuousClock.now - start).components
        return elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
    }
}
