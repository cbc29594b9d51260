import CScanKernels
import RegistryModel

/// The comparisons behind register, identify and authenticate, over one registry's index (and, for
/// checks inside a group commit, the batch's uncommitted changes).
///
/// Ties are broken by template id, which is registration order: the earlier template wins.
enum Matching {
    /// A template's score and id, ordered best first: higher score, then earlier registration.
    struct Hit: Sendable {
        var score: Float
        var templateId: UInt64

        @inline(__always)
        func beats(_ other: Hit) -> Bool {
            self.score > other.score || (self.score == other.score && self.templateId < other.templateId)
        }
    }

    /// Whether the calling thread may scan: one of the engine's own (its writer, read pool or scan
    /// helpers), never a caller's. A scan takes milliseconds of CPU and, with rows read from the
    /// store, page faults: on a cooperative thread (two on two cores) it would stall every task, on
    /// an event loop every connection of it. Checked in debug builds, which every test runs.
    static var onEngineThread: Bool { rk_is_engine_thread() != 0 }

    /// Identification: per identifier its best template scoring ≥ `threshold`, sorted best first.
    static func identify(
        _ registry: RegistryIndex,
        in gallery: GalleryIndex,
        query: PreparedTemplate,
        threshold: Float,
        limit: Int?
    ) throws(RowFault) -> [IdentifyMatch] {
        assert(Self.onEngineThread, "identify scans on a thread of the engine's, not the caller's")
        let candidates = try query.row.withUnsafeBufferPointer { q throws(RowFault) in
            try Scan.identify(registry, query: q.baseAddress!, queryMask: query.mask, threshold: threshold, limit: limit)
        }
        let matches = candidates.map { IdentifyMatch(identifier: gallery.name(of: $0.ordinal), score: $0.score, templateId: $0.templateId) }
        return matches
    }

    /// Authentication: the best of one identifier's templates, or nil when it has none here.
    /// Given the query's row and mask rather than its prepared template: the caller reads them in
    /// place instead of copying the whole template out of its array.
    static func best(of ordinal: UInt32, in registry: RegistryIndex, row: [Float], mask: UInt32) throws(RowFault) -> Hit? {
        guard registry.holds(ordinal) else { return nil }
        var best: Hit?
        try row.withUnsafeBufferPointer { q throws(RowFault) in
            try registry.withRows { rows in
                registry.forEachRow(of: ordinal) { index in
                    guard let pointer = rows(index) else { return }
                    let hit = Hit(
                        score: registry.score(row: index, pointer, query: q.baseAddress!, queryMask: mask), templateId: registry.templateIds[index])
                    if best.map({ hit.beats($0) }) ?? true { best = hit }
                }
            }
        }
        return best
    }

    /// What the register checks see in one registry for `identifier`: the best-scoring template of any
    /// *other* identifier, and the best of the identifier's own templates (nil when it has none).
    struct CheckResult {
        var bestOther: (identifier: String, hit: Hit)?
        var bestOwn: Hit?

        /// Applies the README's engine behaviour (1) then (2): similar face wins over mismatch.
        func finding(algorithm: UInt32, thresholds: Thresholds) -> RegistrationFinding? {
            if let other = self.bestOther, other.hit.score >= thresholds.identification {
                return RegistrationFinding(algorithm: algorithm, kind: .similarFace(identifier: other.identifier, score: other.hit.score))
            }
            if let own = self.bestOwn, own.score < thresholds.authentication {
                return RegistrationFinding(algorithm: algorithm, kind: .faceMismatch(bestScore: own.score))
            }
            return nil
        }
    }

    /// The register checks' scan over the committed index minus what the batch removed, plus what it added.
    /// - Parameter precomputed: the same scan of the committed index without exclusions, done for the
    ///   whole batch before it ran; used unless the batch has since removed one of its two rows (the
    ///   best of what remains is then unknown, and the rows are scanned again) or the threshold has
    ///   since been lowered below the floor it looked down to.
    static func check(
        _ registry: RegistryIndex,
        in gallery: GalleryIndex,
        identifier: String,
        query: PreparedTemplate,
        batch: BatchChanges,
        precomputed: Scan.CheckBest? = nil
    ) throws(RowFault) -> CheckResult {
        assert(Self.onEngineThread, "the registration check scans on the writer thread")
        let removed = batch.removed
        // Another identifier's template matters only at or above the identification threshold
        // (``CheckResult/finding(algorithm:thresholds:)``): the scan looks no lower.
        let floor = registry.thresholds.identification
        let committed: Scan.CheckBest
        if let precomputed, precomputed.floor <= floor, !(precomputed.other.map { removed.contains($0.templateId) } ?? false),
            !(precomputed.own.map { removed.contains($0.templateId) } ?? false)
        {
            committed = precomputed
        } else {
            committed = try query.row.withUnsafeBufferPointer { q throws(RowFault) in
                try Scan.check(
                    registry, query: q.baseAddress!, queryMask: query.mask, own: gallery.ordinal(of: identifier), excluded: removed, floor: floor)
            }
        }
        var result = CheckResult(
            bestOther: committed.other.map { (gallery.name(of: $0.ordinal), Hit(score: $0.score, templateId: $0.templateId)) },
            bestOwn: committed.own.map { Hit(score: $0.score, templateId: $0.templateId) })
        // Templates written earlier in this batch: not in the index until the commit.
        batch.forEachAdded(toRegistry: registry.id) { pending in
            let score = pending.row.withUnsafeBufferPointer { row in
                query.row.withUnsafeBufferPointer { q in
                    registry.score(row: row.baseAddress!, rowMask: pending.mask, query: q.baseAddress!, queryMask: query.mask)
                }
            }
            let hit = Hit(score: score, templateId: pending.id)
            if pending.identifier.sameIdentifier(as: identifier) {
                if result.bestOwn.map({ hit.beats($0) }) ?? true { result.bestOwn = hit }
            } else if result.bestOther.map({ hit.beats($0.hit) }) ?? true {
                result.bestOther = (pending.identifier, hit)
            }
        }
        return result
    }

    /// Whether the registry holds the identifier, counting the batch's changes.
    static func holds(
        _ registry: RegistryIndex,
        in gallery: GalleryIndex,
        identifier: String,
        batch: BatchChanges
    ) -> Bool {
        if batch.hasAdded(toRegistry: registry.id, identifier: identifier) { return true }
        guard let ordinal = gallery.ordinal(of: identifier) else { return false }
        return registry.templateIds(of: ordinal).contains { !batch.removed.contains($0) }
    }

    /// Whether any registry of the gallery holds the identifier, counting the batch's changes.
    static func holdsAnywhere(_ gallery: GalleryIndex, identifier: String, batch: BatchChanges) -> Bool {
        gallery.registries.contains { Self.holds($0, in: gallery, identifier: identifier, batch: batch) }
    }
}
