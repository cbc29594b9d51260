import RegistryModel

/// The exhaustive scans over one registry's rows: identification (per identifier its best template,
/// top k) and the registration check (best template of another identifier, best of one's own).
///
/// Exact by construction: every row is scored with the same float32 kernel whichever thread or chunk
/// scores it, so splitting the rows across cores changes neither scores nor order. Rows are visited
/// in contiguous chunks of the registry's buffer; only rows that can still enter the result are
/// looked at further (their template id and identifier), so the per-identifier reduction hashes
/// candidates, not rows.
enum Scan {
    /// A scored row.
    struct Candidate: Sendable, Equatable {
        var score: Float
        var templateId: UInt64
        var ordinal: UInt32

        /// Higher score first, then the earlier template (registration order).
        @inline(__always)
        func beats(_ other: Candidate) -> Bool {
            self.score > other.score || (self.score == other.score && self.templateId < other.templateId)
        }
    }

    /// Bytes of rows per chunk: large enough that handing a chunk to another core costs little next
    /// to scanning it, small enough that a busy core's share is picked up by the other.
    static let bytesPerChunk = 4 << 20

    /// Splits `rows` rows of `stride` floats into chunks of contiguous rows.
    /// `rowsPerChunk` overrides the size (tests use tiny chunks to exercise the multi-core path).
    static func chunks(rows: Int, stride: Int, rowsPerChunk: Int? = nil) -> (count: Int, rowsPerChunk: Int) {
        guard rows > 0 else { return (0, 0) }
        let rowsPerChunk = rowsPerChunk ?? max(1024, Self.bytesPerChunk / (4 * max(1, stride)))
        return ((rows + rowsPerChunk - 1) / rowsPerChunk, rowsPerChunk)
    }

    /// Scores rows `range` against the query, calling `visit(row, score)` for each. Dispatches on the
    /// algorithm once, outside the loop, and reads the registry's properties once: each read of a
    /// class property inside the loop would be a dynamic exclusivity check per row.
    @inline(__always)
    static func scoreRows(
        _ registry: RegistryIndex,
        _ range: Range<Int>,
        query: UnsafePointer<Float>,
        queryMask: UInt32,
        _ visit: (Int, Float) -> Void
    ) {
        switch registry.algorithm.kind {
        case .vector(let dimension):
            let function = registry.algorithm.scoreFunction
            let rows = UnsafePointer(registry.rows)
            let stride = registry.stride
            // The common lengths as constants: the kernel's loop then unrolls completely (same sums,
            // same bits), which matters most for short rows, where loop overhead is a larger share.
            switch dimension {
            case 128:
                for index in range { visit(index, function.score(dot: Kernels.dot(query, rows + index * 128, count: 128))) }
            case 512:
                for index in range { visit(index, function.score(dot: Kernels.dot(query, rows + index * 512, count: 512))) }
            default:
                for index in range { visit(index, function.score(dot: Kernels.dot(query, rows + index * stride, count: dimension))) }
            }
        case .landmarks:
            let rows = UnsafePointer(registry.rows)
            let stride = registry.stride
            registry.masks.withUnsafeBufferPointer { masks in
                for index in range {
                    visit(index, LandmarkAlgorithm.similarity(queryMask, query, masks[index], rows + index * stride))
                }
            }
        }
    }

    /// Identification: per identifier its best template scoring ≥ `threshold`, best first, at most
    /// `limit` (nil: all).
    /// - Parameters:
    ///   - prefilter: whether vector rows go through the int8 prefilter first (the result is the same).
    ///   - level: the prefilter's kernel level (tests run each one).
    static func identify(
        _ registry: RegistryIndex,
        query: UnsafePointer<Float>,
        queryMask: UInt32,
        threshold: Float,
        limit: Int?,
        pool: ScanPool = .shared,
        rowsPerChunk: Int? = nil,
        prefilter: Bool? = nil,
        level: Int32 = Prefilter.level
    ) -> [Candidate] {
        let (count, rowsPerChunk) = Self.chunks(rows: registry.count, stride: registry.stride, rowsPerChunk: rowsPerChunk)
        var perChunk = [[Candidate]](repeating: [], count: count)
        let coded: Prefilter.Query? =
            if case .vector(let dimension) = registry.algorithm.kind, count > 0, prefilter ?? Prefilter.applies(to: registry) {
                Prefilter.Query(query, dimension: dimension, codeStride: registry.codeStride)
            } else {
                nil
            }
        // With a limit, the chunks share the best k-th score any of them has found.
        let shared = limit == nil ? nil : SharedCutoff(threshold)
        perChunk.withUnsafeMutableBufferPointer { results in
            pool.run(chunks: count) { chunk in
                let range = chunk * rowsPerChunk..<min(registry.count, (chunk + 1) * rowsPerChunk)
                results[chunk] =
                    if let coded {
                        Self.identifyPrefiltered(
                            registry, range, query: query, coded: coded, level: level, threshold: threshold, limit: limit, shared: shared)
                    } else {
                        Self.identify(registry, range, query: query, queryMask: queryMask, threshold: threshold, limit: limit)
                    }
            }
        }
        var merged = perChunk.count == 1 ? perChunk[0] : perChunk.flatMap { $0 }
        if perChunk.count > 1 { Self.reduce(&merged, limit: limit) }
        return merged
    }

    /// One chunk of an identification. With a limit, candidates are kept only while they can still be
    /// among the best `limit` identifiers: once that many are known, the cut-off rises to the last
    /// one's score.
    private static func identify(
        _ registry: RegistryIndex,
        _ range: Range<Int>,
        query: UnsafePointer<Float>,
        queryMask: UInt32,
        threshold: Float,
        limit: Int?
    ) -> [Candidate] {
        var candidates: [Candidate] = []
        var cutoff = threshold
        let compactAt = limit.map { max(256, 4 * $0) } ?? Int.max
        registry.templateIds.withUnsafeBufferPointer { ids in
            registry.ordinals.withUnsafeBufferPointer { ordinals in
                Self.scoreRows(registry, range, query: query, queryMask: queryMask) { index, score in
                    // NaN never passes (a row cannot hold one: templates are validated finite).
                    guard score >= cutoff else { return }
                    candidates.append(Candidate(score: score, templateId: ids[index], ordinal: ordinals[index]))
                    if candidates.count >= compactAt, let limit { Self.compact(&candidates, limit: limit, cutoff: &cutoff) }
                }
            }
        }
        Self.reduce(&candidates, limit: limit)
        return candidates
    }

    /// One chunk of an identification through the prefilter: block by block, the rows whose bound
    /// reaches the cut-off are scored by the float32 kernel and treated exactly as the plain scan
    /// treats them; the others could not have passed its `score >= cutoff`. The cut-off is the
    /// higher of this chunk's and the one shared by all chunks (a row below either cannot be among
    /// the best `limit` identifiers).
    private static func identifyPrefiltered(
        _ registry: RegistryIndex,
        _ range: Range<Int>,
        query: UnsafePointer<Float>,
        coded: Prefilter.Query,
        level: Int32,
        threshold: Float,
        limit: Int?,
        shared: SharedCutoff?
    ) -> [Candidate] {
        guard case .vector(let dimension) = registry.algorithm.kind else { preconditionFailure("the prefilter is for vector registries") }
        let function = registry.algorithm.scoreFunction
        var candidates: [Candidate] = []
        var cutoff = max(threshold, shared?.value ?? threshold)
        var dotCutoff = Prefilter.dotCutoff(function, score: cutoff)
        var dotCutoffScore = cutoff
        let compactAt = limit.map { max(256, 4 * $0) } ?? Int.max
        var rescored = 0
        var start = range.lowerBound
        let rows = UnsafePointer(registry.rows)
        registry.templateIds.withUnsafeBufferPointer { ids in
            registry.ordinals.withUnsafeBufferPointer { ordinals in
                @inline(__always)
                func consider(_ index: Int, _ score: Float) {
                    guard score >= cutoff else { return }
                    candidates.append(Candidate(score: score, templateId: ids[index], ordinal: ordinals[index]))
                    if candidates.count >= compactAt, let limit {
                        Self.compact(&candidates, limit: limit, cutoff: &cutoff)
                        shared?.raise(to: cutoff)
                    }
                }
                withUnsafeTemporaryAllocation(of: UInt32.self, capacity: Prefilter.blockRows) { survivors in
                    // With the row length a constant (common lengths), the kernel unrolls.
                    @inline(__always)
                    func scan(_ dimension: Int) {
                        while start < range.upperBound {
                            let done = start - range.lowerBound
                            if done >= 2 * Prefilter.blockRows && Double(rescored) > Prefilter.fallbackFraction * Double(done) {
                                // Too many survivors: the rest of the chunk in float32 alone.
                                for index in start..<range.upperBound {
                                    consider(index, function.score(dot: Kernels.dot(query, rows + index * dimension, count: dimension)))
                                }
                                rescored += range.upperBound - start
                                start = range.upperBound
                                return
                            }
                            if let shared { cutoff = max(cutoff, shared.value) }
                            if cutoff != dotCutoffScore {
                                dotCutoff = Prefilter.dotCutoff(function, score: cutoff)
                                dotCutoffScore = cutoff
                            }
                            let block = start..<min(range.upperBound, start + Prefilter.blockRows)
                            let count = coded.survivors(registry, block, dotCutoff: dotCutoff, into: survivors.baseAddress!, level: level)
                            rescored += count
                            for offset in survivors[0..<count] {
                                let index = start + Int(offset)
                                consider(index, function.score(dot: Kernels.dot(query, rows + index * dimension, count: dimension)))
                            }
                            start = block.upperBound
                        }
                    }
                    switch dimension {
                    case 128: scan(128)
                    case 512: scan(512)
                    default: scan(dimension)
                    }
                }
            }
        }
        Prefilter.count(considered: range.count, rescored: rescored)
        Self.reduce(&candidates, limit: limit)
        return candidates
    }

    /// Reduces the candidates to the best `limit` identifiers and raises the cut-off to the last one's
    /// score once that many are known (equal scores stay in: an earlier template may still win the
    /// tie). Out of line: it runs rarely, and inlined it crowded the scan loop's registers.
    @inline(never)
    private static func compact(_ candidates: inout [Candidate], limit: Int, cutoff: inout Float) {
        Self.reduce(&candidates, limit: limit)
        if candidates.count == limit { cutoff = max(cutoff, candidates[limit - 1].score) }
    }

    /// Keeps each identifier's best candidate, sorted best first, at most `limit`.
    static func reduce(_ candidates: inout [Candidate], limit: Int?) {
        var slot: [UInt32: Int] = [:]
        slot.reserveCapacity(candidates.count)
        var best: [Candidate] = []
        best.reserveCapacity(candidates.count)
        for candidate in candidates {
            if let index = slot[candidate.ordinal] {
                if candidate.beats(best[index]) { best[index] = candidate }
            } else {
                slot[candidate.ordinal] = best.count
                best.append(candidate)
            }
        }
        best.sort { $0.beats($1) }
        if let limit, best.count > limit { best.removeLast(best.count - limit) }
        candidates = best
    }

    /// What the registration check needs from the committed rows: the best template of an identifier
    /// other than `own`, and the best of `own`'s, skipping templates in `excluded`.
    struct CheckBest: Sendable {
        var other: Candidate?
        var own: Candidate?

        mutating func merge(_ candidate: Candidate, own ordinal: UInt32?) {
            if candidate.ordinal == ordinal {
                if self.own.map({ candidate.beats($0) }) ?? true { self.own = candidate }
            } else if self.other.map({ candidate.beats($0) }) ?? true {
                self.other = candidate
            }
        }

        mutating func merge(_ other: CheckBest, own ordinal: UInt32?) {
            if let candidate = other.other { self.merge(candidate, own: ordinal) }
            if let candidate = other.own { self.merge(candidate, own: ordinal) }
        }
    }

    /// The registration check's scan of the committed rows.
    static func check(
        _ registry: RegistryIndex,
        query: UnsafePointer<Float>,
        queryMask: UInt32,
        own: UInt32?,
        excluded: Set<UInt64>,
        pool: ScanPool = .shared,
        rowsPerChunk: Int? = nil
    ) -> CheckBest {
        let (count, rowsPerChunk) = Self.chunks(rows: registry.count, stride: registry.stride, rowsPerChunk: rowsPerChunk)
        var perChunk = [CheckBest](repeating: CheckBest(), count: count)
        perChunk.withUnsafeMutableBufferPointer { results in
            pool.run(chunks: count) { chunk in
                let range = chunk * rowsPerChunk..<min(registry.count, (chunk + 1) * rowsPerChunk)
                var best = CheckBest()
                // Best score seen so far over all rows: a row below both bests cannot change either,
                // so only rows reaching the lower of the two are looked up.
                registry.templateIds.withUnsafeBufferPointer { ids in
                    registry.ordinals.withUnsafeBufferPointer { ordinals in
                        Self.scoreRows(registry, range, query: query, queryMask: queryMask) { index, score in
                            let floor =
                                own == nil
                                ? best.other?.score ?? -.infinity : min(best.other?.score ?? -.infinity, best.own?.score ?? -.infinity)
                            guard score >= floor else { return }
                            let id = ids[index]
                            if !excluded.isEmpty && excluded.contains(id) { return }
                            best.merge(Candidate(score: score, templateId: id, ordinal: ordinals[index]), own: own)
                        }
                    }
                }
                results[chunk] = best
            }
        }
        var result = CheckBest()
        for best in perChunk { result.merge(best, own: own) }
        return result
    }

    /// The registration checks of many queries against one vector registry in one pass over its rows
    /// (a group commit's registrations): each row is read once for all of them, and the work becomes
    /// arithmetic on rows in cache instead of one trip through memory per registration. Each result
    /// equals ``check(_:query:queryMask:own:excluded:pool:rowsPerChunk:)`` with no exclusions, bit
    /// for bit (``Kernels/dot4Queries(_:_:_:_:_:count:)`` sums each lane as `dot` does).
    /// - Parameter queries: `queries.count` rows of `registry.stride` floats, back to back.
    static func check(
        _ registry: RegistryIndex,
        queries: UnsafePointer<Float>,
        owners: [UInt32?],
        pool: ScanPool = .shared,
        rowsPerChunk: Int? = nil
    ) -> [CheckBest] {
        guard case .vector(let dimension) = registry.algorithm.kind else {
            preconditionFailure("the batched check is for vector registries")
        }
        let function = registry.algorithm.scoreFunction
        let stride = registry.stride
        let count = owners.count
        let (chunks, rowsPerChunk) = Self.chunks(rows: registry.count, stride: stride, rowsPerChunk: rowsPerChunk)
        var perChunk = [[CheckBest]](repeating: [], count: chunks)
        perChunk.withUnsafeMutableBufferPointer { results in
            pool.run(chunks: chunks) { chunk in
                var best = [CheckBest](repeating: CheckBest(), count: count)
                // Lowest score that can still change query q's result (see `check` above).
                var floors = [Float](repeating: -.infinity, count: count)
                // Buffers rather than captured arrays: no exclusivity checks in the inner loop.
                best.withUnsafeMutableBufferPointer { best in
                    floors.withUnsafeMutableBufferPointer { floors in
                        registry.templateIds.withUnsafeBufferPointer { ids in
                            registry.ordinals.withUnsafeBufferPointer { ordinals in
                                @inline(__always)
                                func consider(_ q: Int, _ score: Float, _ row: Int) {
                                    guard score >= floors[q] else { return }
                                    best[q].merge(Candidate(score: score, templateId: ids[row], ordinal: ordinals[row]), own: owners[q])
                                    let other = best[q].other?.score ?? -.infinity
                                    floors[q] = owners[q] == nil ? other : min(other, best[q].own?.score ?? -.infinity)
                                }
                                let rows = UnsafePointer(registry.rows)
                                // With the row length a constant (common lengths), the kernels unroll.
                                @inline(__always)
                                func scan(_ dimension: Int) {
                                    for row in chunk * rowsPerChunk..<min(registry.count, (chunk + 1) * rowsPerChunk) {
                                        let pointer = rows + row * dimension
                                        var q = 0
                                        while q + 4 <= count {
                                            let dots = Kernels.dot4Queries(
                                                queries + q * dimension, queries + (q + 1) * dimension, queries + (q + 2) * dimension,
                                                queries + (q + 3) * dimension, pointer, count: dimension)
                                            consider(q, function.score(dot: dots[0]), row)
                                            consider(q + 1, function.score(dot: dots[1]), row)
                                            consider(q + 2, function.score(dot: dots[2]), row)
                                            consider(q + 3, function.score(dot: dots[3]), row)
                                            q += 4
                                        }
                                        while q < count {
                                            consider(q, function.score(dot: Kernels.dot(queries + q * dimension, pointer, count: dimension)), row)
                                            q += 1
                                        }
                                    }
                                }
                                switch dimension {
                                case 128: scan(128)
                                case 512: scan(512)
                                default: scan(dimension)
                                }
                            }
                        }
                    }
                }
                results[chunk] = best
            }
        }
        var merged = [CheckBest](repeating: CheckBest(), count: count)
        for chunk in perChunk {
            for q in 0..<count { merged[q].merge(chunk[q], own: owners[q]) }
        }
        return merged
    }
}
