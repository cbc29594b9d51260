import RegistryModel

/// The registration check's scans: the best template of another identifier, at or above a floor
/// (the identification threshold: below it, no other identifier can make a registration a similar
/// face), and the best of the identifier's own templates, from its own few rows.
extension Scan {
    /// What the registration check needs from the committed rows: the best template of an identifier
    /// other than `own` scoring at least `floor`, and the best of `own`'s, skipping excluded templates.
    struct CheckBest: Sendable {
        var other: Candidate?
        var own: Candidate?
        /// Rows of other identifiers scoring below this were not looked for: `other` is nil when no
        /// row reaches it.
        var floor: Float = -.infinity

        mutating func merge(_ candidate: Candidate, own ordinal: UInt32?) {
            if candidate.ordinal == ordinal {
                if self.own.map({ candidate.beats($0) }) ?? true { self.own = candidate }
            } else if self.other.map({ candidate.beats($0) }) ?? true {
                self.other = candidate
            }
        }
    }

    /// The best of one identifier's rows, found through its own list rather than a scan (the same
    /// kernel scores it), skipping `excluded`.
    static func bestOwn(
        _ registry: RegistryIndex, query: UnsafePointer<Float>, queryMask: UInt32, own: UInt32?, excluded: Set<UInt64>
    ) throws(RowFault) -> Candidate? {
        guard let own, registry.holds(own) else { return nil }
        var best: Candidate?
        try registry.withRows { row in
            registry.forEachRow(of: own) { index in
                let id = registry.templateIds[index]
                if !excluded.isEmpty && excluded.contains(id) { return }
                guard let pointer = row(index) else { return }
                let score = registry.score(row: index, pointer, query: query, queryMask: queryMask)
                let candidate = Candidate(score: score, templateId: id, ordinal: own)
                if best.map({ candidate.beats($0) }) ?? true { best = candidate }
            }
        }
        return best
    }

    /// The registration check's scan of the committed rows.
    static func check(
        _ registry: RegistryIndex,
        query: UnsafePointer<Float>,
        queryMask: UInt32,
        own: UInt32?,
        excluded: Set<UInt64>,
        floor: Float = -.infinity,
        pool: ScanPool = .shared,
        rowsPerChunk: Int? = nil,
        prefilter: Bool? = nil,
        level: Int32 = Prefilter.level
    ) throws(RowFault) -> CheckBest {
        let (count, rowsPerChunk) = Self.chunks(rows: registry.count, stride: registry.chunkStride, rowsPerChunk: rowsPerChunk)
        let coded = Self.prefilters(registry, chunks: count, prefilter: prefilter) ? Prefilter.Query(query, for: registry) : nil
        var perChunk = [Candidate?](repeating: nil, count: count)
        let faults = ChunkFaults(count)
        perChunk.withUnsafeMutableBufferPointer { results in
            pool.run(chunks: count) { chunk in
                let range = chunk * rowsPerChunk..<min(registry.count, (chunk + 1) * rowsPerChunk)
                var best: Candidate?
                var cutoff = floor
                faults.catching(chunk) { () throws(RowFault) in
                    try registry.templateIds.withUnsafeBufferPointer { ids throws(RowFault) in
                        try registry.ordinals.withUnsafeBufferPointer { ordinals throws(RowFault) in
                            // Only the best other row matters: the cut-off rises to it (ties stay in:
                            // an earlier template wins them).
                            @inline(__always)
                            func consider(_ index: Int, _ score: Float) {
                                guard score >= cutoff, ordinals[index] != own else { return }
                                let id = ids[index]
                                if !excluded.isEmpty && excluded.contains(id) { return }
                                let candidate = Candidate(score: score, templateId: id, ordinal: ordinals[index])
                                if best.map({ candidate.beats($0) }) ?? true {
                                    best = candidate
                                    cutoff = score
                                }
                            }
                            if let coded {
                                var memo = Prefilter.DotCutoff()
                                let rescored = try Self.scoreSurvivors(
                                    registry, range, query: query, coded: coded, level: level, memo: &memo, cutoff: { cutoff }, consider)
                                Prefilter.count(considered: range.count, rescored: rescored)
                            } else {
                                try Self.scoreRows(registry, range, query: query, queryMask: queryMask, floor: { cutoff }, consider)
                            }
                        }
                    }
                }
                results[chunk] = best
            }
        }
        try faults.rethrow()
        var result = CheckBest(floor: floor)
        for candidate in perChunk { if let candidate { result.merge(candidate, own: own) } }
        result.own = try Self.bestOwn(registry, query: query, queryMask: queryMask, own: own, excluded: excluded)
        return result
    }

    /// The registration checks of many queries against one vector registry in one pass over its rows
    /// (a group commit's registrations): each row, or each block of codes, is read once for all of
    /// them, and the work becomes arithmetic on data in cache instead of one trip through memory per
    /// registration. Each result equals ``check(_:query:queryMask:own:excluded:floor:pool:rowsPerChunk:prefilter:level:)``
    /// with no exclusions, bit for bit (``Kernels/dot4Queries(_:_:_:_:_:count:)`` sums each lane as
    /// `dot` does).
    /// - Parameters:
    ///   - queries: `queries.count` rows of `registry.stride` floats, back to back.
    ///   - floors: per query, the least score of another identifier's row worth finding (default: none).
    static func check(
        _ registry: RegistryIndex,
        queries: UnsafePointer<Float>,
        owners: [UInt32?],
        floors: [Float]? = nil,
        pool: ScanPool = .shared,
        rowsPerChunk: Int? = nil,
        prefilter: Bool? = nil,
        level: Int32 = Prefilter.level
    ) throws(RowFault) -> [CheckBest] {
        guard case .vector(let dimension) = registry.algorithm.kind else {
            preconditionFailure("the batched check is for vector registries")
        }
        let function = registry.algorithm.scoreFunction
        let count = owners.count
        let floors = floors ?? [Float](repeating: -.infinity, count: count)
        let (chunks, rowsPerChunk) = Self.chunks(rows: registry.count, stride: registry.chunkStride, rowsPerChunk: rowsPerChunk)
        let coded =
            Self.prefilters(registry, chunks: chunks, prefilter: prefilter)
            ? (0..<count).map { Prefilter.Query(queries + $0 * dimension, for: registry) } : nil
        var perChunk = [[Candidate?]](repeating: [], count: chunks)
        let faults = ChunkFaults(chunks)
        perChunk.withUnsafeMutableBufferPointer { results in
            pool.run(chunks: chunks) { chunk in
                let range = chunk * rowsPerChunk..<min(registry.count, (chunk + 1) * rowsPerChunk)
                var best = [Candidate?](repeating: nil, count: count)
                // Lowest score that can still change query q's result.
                var cutoffs = floors
                // Buffers rather than captured arrays: no exclusivity checks in the inner loop.
                best.withUnsafeMutableBufferPointer { best in
                    cutoffs.withUnsafeMutableBufferPointer { cutoffs in
                        registry.templateIds.withUnsafeBufferPointer { ids in
                            registry.ordinals.withUnsafeBufferPointer { ordinals in
                                @inline(__always)
                                func consider(_ q: Int, _ score: Float, _ row: Int) {
                                    guard score >= cutoffs[q], ordinals[row] != owners[q] else { return }
                                    let candidate = Candidate(score: score, templateId: ids[row], ordinal: ordinals[row])
                                    if best[q].map({ candidate.beats($0) }) ?? true {
                                        best[q] = candidate
                                        cutoffs[q] = score
                                    }
                                }
                                if let coded {
                                    // Block by block: a block is prepared once (scan_kernels.h, rk_block),
                                    // then every query passes over it while its codes are in cache.
                                    var memos = [Prefilter.DotCutoff](repeating: Prefilter.DotCutoff(), count: count)
                                    var dotCutoffs = [Double](repeating: 0, count: count)
                                    var rescored = 0
                                    var start = range.lowerBound
                                    let prepared = Prefilter.Block(queries: coded)
                                    faults.catching(chunk) { () throws(RowFault) in
                                        try registry.withRows { rows in
                                            while start < range.upperBound {
                                                let block = start..<min(range.upperBound, start + Prefilter.blockRows)
                                                prepared.prepare(registry, block)
                                                for q in 0..<count { dotCutoffs[q] = memos[q].value(function, score: cutoffs[q]) }
                                                prepared.filter(registry, block, dotCutoffs: dotCutoffs, level: level)
                                                for q in 0..<count {
                                                    let found = prepared.counts[q]
                                                    rescored += found
                                                    for offset in prepared.survivors[(q * Prefilter.blockRows)..<(q * Prefilter.blockRows + found)] {
                                                        let row = start + Int(offset)
                                                        guard let pointer = rows(row) else { continue }
                                                        let dot = Kernels.dot(queries + q * dimension, pointer, count: dimension)
                                                        consider(q, function.score(dot: dot), row)
                                                    }
                                                }
                                                start = block.upperBound
                                            }
                                        }
                                    }
                                    Prefilter.count(considered: range.count * count, rescored: rescored)
                                    return
                                }
                                // With the row length a constant (common lengths), the kernels unroll.
                                @inline(__always)
                                func scan(_ dimension: Int, _ rows: (Int) -> UnsafePointer<Float>?) {
                                    for row in range {
                                        guard let pointer = rows(row) else { continue }
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
                                faults.catching(chunk) { () throws(RowFault) in
                                    try registry.withRows { rows in
                                        switch dimension {
                                        case 128: scan(128, rows)
                                        case 512: scan(512, rows)
                                        default: scan(dimension, rows)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                results[chunk] = best
            }
        }
        try faults.rethrow()
        var results: [CheckBest] = []
        results.reserveCapacity(count)
        for q in 0..<count {
            var result = CheckBest(floor: floors[q])
            for chunk in perChunk { if let candidate = chunk[q] { result.merge(candidate, own: owners[q]) } }
            result.own = try Self.bestOwn(registry, query: queries + q * dimension, queryMask: 0, own: owners[q], excluded: [])
            results.append(result)
        }
        return results
    }
}

/// The first ``RowFault`` of a scan's chunks, which run on several threads: each chunk records its
/// own, and the scan throws the first once all have run.
final class ChunkFaults: @unchecked Sendable {
    // Each chunk writes only its own slot, and the scan reads them after ``ScanPool/run(chunks:_:)``
    // has returned (which orders every chunk's writes before it).
    private let faults: UnsafeMutableBufferPointer<RowFault?>

    init(_ count: Int) {
        self.faults = .allocate(capacity: max(1, count))
        self.faults.initialize(repeating: nil)
    }

    deinit {
        self.faults.deinitialize()
        self.faults.deallocate()
    }

    /// Runs chunk `chunk`'s `body`, keeping the fault it throws.
    @inline(__always)
    func catching(_ chunk: Int, _ body: () throws(RowFault) -> Void) {
        do throws(RowFault) {
            try body()
        } catch {
            self.faults[chunk] = error
        }
    }

    /// Throws the first chunk's fault, if any chunk had one.
    func rethrow() throws(RowFault) {
        if let fault = self.faults.lazy.compactMap({ $0 }).first { throw fault }
    }
}
