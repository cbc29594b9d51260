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

    /// Identification: per identifier its best template scoring ≥ `threshold`, sorted best first.
    static func identify(
        _ registry: RegistryIndex,
        in gallery: GalleryIndex,
        query: PreparedTemplate,
        threshold: Float,
        limit: Int?
    ) -> [IdentifyMatch] {
        var best: [UInt32: Hit] = [:]
        query.row.withUnsafeBufferPointer { q in
            for index in 0..<registry.count {
                let score = registry.score(row: index, query: q.baseAddress!, queryMask: query.mask)
                guard score >= threshold else { continue }
                let hit = Hit(score: score, templateId: registry.templateIds[index])
                let ordinal = registry.ordinals[index]
                if let current = best[ordinal], !hit.beats(current) { continue }
                best[ordinal] = hit
            }
        }
        var matches = best.map { IdentifyMatch(identifier: gallery.name(of: $0.key), score: $0.value.score, templateId: $0.value.templateId) }
        matches.sort { Hit(score: $0.score, templateId: $0.templateId).beats(Hit(score: $1.score, templateId: $1.templateId)) }
        if let limit, matches.count > limit { matches.removeLast(matches.count - limit) }
        return matches
    }

    /// Authentication: the best of one identifier's templates, or nil when it has none here.
    static func best(
        of ordinal: UInt32,
        in registry: RegistryIndex,
        query: PreparedTemplate
    ) -> Hit? {
        guard let ids = registry.templatesOfIdentifier[ordinal] else { return nil }
        var best: Hit?
        query.row.withUnsafeBufferPointer { q in
            for id in ids {
                guard let index = registry.row(ofTemplate: id) else { continue }
                let hit = Hit(score: registry.score(row: index, query: q.baseAddress!, queryMask: query.mask), templateId: id)
                if best.map({ hit.beats($0) }) ?? true { best = hit }
            }
        }
        return best
    }

    /// What the register checks see in one registry for `identifier`: the best-scoring template of any
    /// *other* identifier, and the best of the identifier's own templates (nil when it has none).
    struct CheckResult {
        var bestOther: (identifier: String, hit: Hit)?
        var bestOwn: Hit?

        /// Applies DESIGN §4 (1) then (2): similar face wins over mismatch.
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
    static func check(
        _ registry: RegistryIndex,
        in gallery: GalleryIndex,
        identifier: String,
        query: PreparedTemplate,
        batch: BatchChanges
    ) -> CheckResult {
        let own = gallery.ordinal(of: identifier)
        var bestOther: (ordinal: UInt32, hit: Hit)?
        var bestOwn: Hit?
        let removed = batch.removed
        query.row.withUnsafeBufferPointer { q in
            for index in 0..<registry.count {
                let id = registry.templateIds[index]
                if !removed.isEmpty && removed.contains(id) { continue }
                let hit = Hit(score: registry.score(row: index, query: q.baseAddress!, queryMask: query.mask), templateId: id)
                let ordinal = registry.ordinals[index]
                if ordinal == own {
                    if bestOwn.map({ hit.beats($0) }) ?? true { bestOwn = hit }
                } else if bestOther.map({ hit.beats($0.hit) }) ?? true {
                    bestOther = (ordinal, hit)
                }
            }
        }
        var result = CheckResult(bestOther: bestOther.map { (gallery.name(of: $0.ordinal), $0.hit) }, bestOwn: bestOwn)
        // Templates written earlier in this batch: not in the index until the commit.
        for pending in batch.added(toRegistry: registry.id) {
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
        if batch.added(toRegistry: registry.id).contains(where: { $0.identifier.sameIdentifier(as: identifier) }) { return true }
        guard let ordinal = gallery.ordinal(of: identifier), let ids = registry.templatesOfIdentifier[ordinal] else {
            return false
        }
        return ids.contains { !batch.removed.contains($0) }
    }

    /// Whether any registry of the gallery holds the identifier, counting the batch's changes.
    static func holdsAnywhere(_ gallery: GalleryIndex, identifier: String, batch: BatchChanges) -> Bool {
        gallery.registries.contains { Self.holds($0, in: gallery, identifier: identifier, batch: batch) }
    }
}
