import CScanKernels
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
    /// `floor` is the caller's current cut-off (`visit` drops what scores below it): the aligned
    /// landmark rows certainly below it may be reported as 0 without their exact score.
    @inline(__always)
    static func scoreRows(
        _ registry: RegistryIndex,
        _ range: Range<Int>,
        query: UnsafePointer<Float>,
        queryMask: UInt32,
        floor: () -> Float = { -.infinity },
        _ visit: (Int, Float) -> Void
    ) throws(RowFault) {
        switch registry.algorithm.kind {
        case .vector(let dimension):
            let function = registry.algorithm.scoreFunction
            guard let resident = registry.rows else {
                // Rows read from the store one by one: only for scans told not to prefilter.
                try registry.withRows { row in
                    for index in range {
                        guard let pointer = row(index) else { continue }
                        visit(index, function.score(dot: Kernels.dot(query, pointer, count: dimension)))
                    }
                }
                return
            }
            let rows = UnsafePointer(resident)
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
        case .landmarks(let matcher):
            let rows = UnsafePointer(registry.rows!)
            let stride = registry.stride
            registry.masks.withUnsafeBufferPointer { masks in
                // One loop per matcher, so each inlines its own comparison.
                switch matcher {
                case .coma:
                    for index in range {
                        visit(index, LandmarkAlgorithm.similarity(queryMask, query, masks[index], rows + index * stride))
                    }
                case .aligned:
                    // The query's weighted terms once for the whole range; the rows' moments by the
                    // SIMD kernel (the same bits as the model's reference), a block of rows a call.
                    AlignedLandmarkAlgorithm.withQuery(queryMask, query) { prepared in
                        let perRow = AlignedLandmarkAlgorithm.momentCount
                        let block = 64
                        withUnsafeTemporaryAllocation(of: Double.self, capacity: block * perRow) { buffer in
                            let moments = buffer.baseAddress!
                            var first = range.lowerBound
                            while first < range.upperBound {
                                let count = min(block, range.upperBound - first)
                                rk_landmark_moments(Prefilter.level, prepared.lanes, rows + first * stride, stride, count, moments)
                                // Rows certainly below the caller's cut-off stop early and report 0.
                                let lambdaFloor = AlignedLandmarkAlgorithm.lambdaFloor(score: floor())
                                for offset in 0..<count {
                                    let score = AlignedLandmarkAlgorithm.similarity(
                                        prepared, masks[first + offset], moments: UnsafePointer(moments + offset * perRow),
                                        lambdaFloor: lambdaFloor)
                                    visit(first + offset, score)
                                }
                                first += count
                            }
                        }
                    }
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
    ) throws(RowFault) -> [Candidate] {
        let (count, rowsPerChunk) = Self.chunks(rows: registry.count, stride: registry.chunkStride, rowsPerChunk: rowsPerChunk)
        var perChunk = [[Candidate]](repeating: [], count: count)
        let faults = ChunkFaults(count)
        let coded = Self.prefilters(registry, chunks: count, prefilter: prefilter) ? Prefilter.Query(query, for: registry) : nil
        // With a limit, the chunks share the best k-th score any of them has found.
        let shared = limit == nil ? nil : SharedCutoff(threshold)
        perChunk.withUnsafeMutableBufferPointer { results in
            pool.run(chunks: count) { chunk in
                let range = chunk * rowsPerChunk..<min(registry.count, (chunk + 1) * rowsPerChunk)
                faults.catching(chunk) { () throws(RowFault) in
                    results[chunk] =
                        if let coded {
                            try Self.identifyPrefiltered(
                                registry, range, query: query, coded: coded, level: level, threshold: threshold, limit: limit, shared: shared)
                        } else {
                            try Self.identify(registry, range, query: query, queryMask: queryMask, threshold: threshold, limit: limit)
                        }
                }
            }
        }
        try faults.rethrow()
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
    ) throws(RowFault) -> [Candidate] {
        var candidates: [Candidate] = []
        var cutoff = threshold
        let compactAt = limit.map { max(256, 4 * $0) } ?? Int.max
        try registry.templateIds.withUnsafeBufferPointer { ids throws(RowFault) in
            try registry.ordinals.withUnsafeBufferPointer { ordinals throws(RowFault) in
                try Self.scoreRows(registry, range, query: query, queryMask: queryMask, floor: { cutoff }) { index, score in
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

    /// One chunk of an identification through the prefilter: rows whose bound is below the cut-off
    /// could not have passed the plain scan's `score >= cutoff`; the others are treated exactly as it
    /// treats them. The cut-off is the higher of this chunk's and the one shared by all chunks (a row
    /// below either cannot be among the best `limit` identifiers).
    private static func identifyPrefiltered(
        _ registry: RegistryIndex,
        _ range: Range<Int>,
        query: UnsafePointer<Float>,
        coded: Prefilter.Query,
        level: Int32,
        threshold: Float,
        limit: Int?,
        shared: SharedCutoff?
    ) throws(RowFault) -> [Candidate] {
        var candidates: [Candidate] = []
        var cutoff = threshold
        // Compacts early and often: a tight cut-off is what lets the bound skip rows, and with
        // few survivors reaching it, compactions are rare and small.
        let compactAt = limit.map { max(16, 2 * $0) } ?? Int.max
        try registry.templateIds.withUnsafeBufferPointer { ids throws(RowFault) in
            try registry.ordinals.withUnsafeBufferPointer { ordinals throws(RowFault) in
                var memo = Prefilter.DotCutoff()
                let rescored = try Self.scoreSurvivors(
                    registry, range, query: query, coded: coded, level: level, memo: &memo,
                    cutoff: {
                        if let shared { cutoff = max(cutoff, shared.value) }
                        return cutoff
                    }
                ) { index, score in
                    guard score >= cutoff else { return }
                    candidates.append(Candidate(score: score, templateId: ids[index], ordinal: ordinals[index]))
                    if candidates.count >= compactAt, let limit {
                        Self.compact(&candidates, limit: limit, cutoff: &cutoff)
                        shared?.raise(to: cutoff)
                    }
                }
                Prefilter.count(considered: range.count, rescored: rescored)
            }
        }
        Self.reduce(&candidates, limit: limit)
        if let limit { shared?.pool(candidates, limit: limit) }
        return candidates
    }

    /// Whether a scan of `registry` in `chunks` chunks goes through the prefilter (`prefilter`: the
    /// caller's choice; nil: ``Prefilter/applies(to:)``).
    static func prefilters(_ registry: RegistryIndex, chunks: Int, prefilter: Bool?) -> Bool {
        registry.codes != nil && chunks > 0 && (prefilter ?? Prefilter.applies(to: registry))
    }

    /// Scores with the float32 kernel, in row order, the rows of `range` whose bound reaches
    /// `cutoff()` (asked again before each block, so a raised cut-off takes effect at once), calling
    /// `visit(row, score)`; a caller that keeps only scores ≥ its cut-off sees exactly what the plain
    /// scan would show it. Once too many rows survive, the rest of the range is scored plainly.
    /// Returns how many rows the float32 kernel scored (the caller counts them, once per chunk:
    /// ``Prefilter/count(considered:rescored:)``).
    @inline(__always)
    static func scoreSurvivors(
        _ registry: RegistryIndex,
        _ range: Range<Int>,
        query: UnsafePointer<Float>,
        coded: Prefilter.Query,
        level: Int32,
        memo: inout Prefilter.DotCutoff,
        cutoff: () -> Float,
        _ visit: (Int, Float) -> Void
    ) throws(RowFault) -> Int {
        guard case .vector(let dimension) = registry.algorithm.kind else { preconditionFailure("the prefilter is for vector registries") }
        let function = registry.algorithm.scoreFunction
        // Falling back to scoring every row pays only when the rows are in memory.
        let fallsBack = registry.rows != nil
        var rescored = 0
        var start = range.lowerBound
        try registry.withRows { row in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: Prefilter.blockRows) { survivors in
                withUnsafeTemporaryAllocation(of: rk_ranked.self, capacity: Prefilter.blockRows) { ranked in
                    // With the row length a constant (common lengths), the kernel unrolls.
                    @inline(__always)
                    func scan(_ dimension: Int) {
                        while start < range.upperBound {
                            let done = start - range.lowerBound
                            if fallsBack && done >= 2 * Prefilter.blockRows && Double(rescored) > Prefilter.fallbackFraction * Double(done) {
                                for index in start..<range.upperBound {
                                    visit(index, function.score(dot: Kernels.dot(query, row(index)!, count: dimension)))
                                }
                                rescored += range.upperBound - start
                                return
                            }
                            let dotCutoff = memo.value(function, score: cutoff())
                            let block = start..<min(range.upperBound, start + Prefilter.blockRows)
                            let count = coded.survivors(registry, block, dotCutoff: dotCutoff, into: survivors.baseAddress!, level: level)
                            @inline(__always)
                            func rescore(_ offset: UInt32) {
                                rescored += 1
                                let index = start + Int(offset)
                                guard let pointer = row(index) else { return }
                                visit(index, function.score(dot: Kernels.dot(query, pointer, count: dimension)))
                            }
                            if count < Prefilter.orderedSurvivors {
                                for offset in survivors[0..<count] { rescore(offset) }
                            } else {
                                // Best bound first: `visit` raises the cut-off as it compacts, and the first
                                // bound below it ends the block.
                                coded.rank(
                                    registry, from: start, survivors: survivors.baseAddress!, count: count, into: ranked.baseAddress!, level: level)
                                for survivor in ranked[0..<count] {
                                    guard survivor.bound >= memo.value(function, score: cutoff()) else { break }
                                    rescore(survivor.row)
                                }
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
        return rescored
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
}
