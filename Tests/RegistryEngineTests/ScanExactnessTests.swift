import Glibc
import Synchronization
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// The identification and registration-check scans against a straightforward reference: every row
/// scored in Double, a dictionary of each identifier's best, a full sort. The scans must agree with
/// it on identifiers, order and scores, and the multi-core path must agree with one core bit for bit.
@Suite struct ScanExactnessTests {
    /// A registry of `rows` rows for identifiers 0..<identifiers (several rows each), values from
    /// `value`, with exact duplicate rows.
    static func registry(
        rows: Int, dimension: Int, identifiers: Int, scoreFunction: ScoreFunction = .dot,
        _ value: (inout SeededGenerator, Int, Int) -> Float
    ) -> RegistryIndex {
        let algorithm = Algorithm(
            version: 9001, name: "test\(dimension)", kind: .vector(dimension: dimension), scoreFunction: scoreFunction, defaultThreshold: 0.5)
        let registry = RegistryIndex(
            id: 1, algorithm: algorithm, thresholds: Thresholds(authentication: 0.5, identification: 0.5, autoEnrolment: 0.5))
        var random = SeededGenerator(seed: UInt64(rows * 31 + dimension))
        for row in 0..<rows {
            // Template ids out of row order, as after deletions, so ties must be broken by id.
            let templateId = UInt64((row * 7919) % (rows * 2) + 1)
            registry.append(templateId: templateId, ordinal: UInt32(random.next() % UInt64(identifiers)), mask: 0) { out in
                // Every seventh row repeats the previous one exactly (under whichever identifier):
                // duplicates tie on every query.
                if row % 7 == 6 {
                    out.update(from: out - dimension, count: dimension)
                } else {
                    for i in 0..<dimension { out[i] = value(&random, row, i) }
                }
            }
        }
        return registry
    }

    /// The reference identification.
    static func reference(_ registry: RegistryIndex, query: [Float], threshold: Float, limit: Int?) -> [Scan.Candidate] {
        var best: [UInt32: Scan.Candidate] = [:]
        for row in 0..<registry.count {
            var dot = 0.0
            for i in 0..<registry.stride { dot += Double(query[i]) * Double(registry.row(row)[i]) }
            let score = Float(Self.score(dot, registry.algorithm.scoreFunction))
            guard score >= threshold else { continue }
            let candidate = Scan.Candidate(score: score, templateId: registry.templateIds[row], ordinal: registry.ordinals[row])
            if let current = best[candidate.ordinal], !candidate.beats(current) { continue }
            best[candidate.ordinal] = candidate
        }
        let sorted = best.values.sorted { $0.beats($1) }
        return limit.map { Array(sorted.prefix($0)) } ?? sorted
    }

    static func score(_ dot: Double, _ function: ScoreFunction) -> Double {
        switch function {
        case .cosine, .dot: min(max(dot, 0), 1)
        case .halfCosine: min(max((dot + 1) / 2, 0), 1)
        }
    }

    static func identify(
        _ registry: RegistryIndex, _ query: [Float], threshold: Float, limit: Int?, pool: ScanPool, rowsPerChunk: Int? = nil,
        prefilter: Bool = false, level: Int32 = Prefilter.level
    ) throws -> [Scan.Candidate] {
        try query.withUnsafeBufferPointer {
            try Scan.identify(
                registry, query: $0.baseAddress!, queryMask: 0, threshold: threshold, limit: limit, pool: pool, rowsPerChunk: rowsPerChunk,
                prefilter: prefilter, level: level)
        }
    }

    static let single = ScanPool(helpers: 0)
    static let parallel = ScanPool(helpers: 3)

    /// Values k/64 with small integer k: every product and sum is exact in float32, so the scan and
    /// the Double reference compute identical scores — including the many exact ties and scores
    /// equal to the threshold that such coarse values produce.
    @Test(arguments: [(rows: 1, dimension: 8), (rows: 700, dimension: 16), (rows: 5_000, dimension: 128), (rows: 3_000, dimension: 512)])
    func exactArithmeticMatchesTheReferenceBitForBit(shape: (rows: Int, dimension: Int)) throws {
        let registry = Self.registry(rows: shape.rows, dimension: shape.dimension, identifiers: max(1, shape.rows / 3)) { random, _, _ in
            Float(Int(random.next() % 5) - 2) / 64
        }
        var random = SeededGenerator(seed: 99)
        for q in 0..<6 {
            let query = (0..<shape.dimension).map { _ in Float(Int(random.next() % 5) - 2) / 4 }
            // Thresholds at exact reachable scores (multiples of 1/256), the smallest allowed one, and 1.
            for threshold: Float in [1.0 / 256, 3.0 / 256, 1e-6, 1] {
                let all = Self.reference(registry, query: query, threshold: threshold, limit: nil)
                for limit in [nil, 1, 3, 10, 10_000] as [Int?] {
                    let expected = limit.map { Array(all.prefix($0)) } ?? all
                    let one = try Self.identify(registry, query, threshold: threshold, limit: limit, pool: Self.single)
                    let many = try Self.identify(registry, query, threshold: threshold, limit: limit, pool: Self.parallel, rowsPerChunk: 64)
                    #expect(one == expected, "query \(q), threshold \(threshold), limit \(String(describing: limit))")
                    #expect(many == one, "the multi-core scan differs (query \(q), threshold \(threshold))")
                    // Through the prefilter, at every kernel level, on one core and many: the same bits.
                    for level in Prefilter.supportedLevels {
                        let filtered = try Self.identify(
                            registry, query, threshold: threshold, limit: limit, pool: Self.single, prefilter: true, level: level)
                        let filteredMany = try Self.identify(
                            registry, query, threshold: threshold, limit: limit, pool: Self.parallel, rowsPerChunk: 64, prefilter: true, level: level)
                        #expect(filtered == one, "prefilter at \(Prefilter.name(of: level)): query \(q), threshold \(threshold)")
                        #expect(filteredMany == one, "prefilter at \(Prefilter.name(of: level)), multi-core: query \(q), threshold \(threshold)")
                    }
                }
            }
        }
    }

    /// Random unit vectors (scores not exact in float32): identifiers and order agree with the Double
    /// reference wherever consecutive scores are more than 1e-5 apart, and scores agree to 1e-5.
    @Test(arguments: [128, 512], [ScoreFunction.cosine, .halfCosine])
    func randomVectorsAgreeWithTheReferenceTo1e5(dimension: Int, function: ScoreFunction) throws {
        let registry = Self.registry(rows: 4_000, dimension: dimension, identifiers: 1_500, scoreFunction: function) { random, _, _ in
            Float(random.normal())
        }
        for row in 0..<registry.count {
            Self.normalise(registry.mutableRow(row), dimension)
            registry.encode(row: row)
        }
        for q in 0..<5 {
            var query = (0..<dimension).map { i in registry.row(q * 101)[i] }  // a stored row: one clear best
            var random = SeededGenerator(seed: UInt64(q))
            for i in query.indices { query[i] += Float(random.normal()) * 0.05 }
            query.withUnsafeMutableBufferPointer { Self.normalise($0.baseAddress!, dimension) }
            let threshold: Float = function == .cosine ? 0.05 : 0.52
            let expected = Self.reference(registry, query: query, threshold: threshold, limit: 50)
            let found = try Self.identify(registry, query, threshold: threshold, limit: 50, pool: Self.parallel, rowsPerChunk: 100)
            #expect(try found == Self.identify(registry, query, threshold: threshold, limit: 50, pool: Self.single))
            for level in Prefilter.supportedLevels {
                let filtered = try Self.identify(
                    registry, query, threshold: threshold, limit: 50, pool: Self.parallel, rowsPerChunk: 100, prefilter: true, level: level)
                #expect(filtered == found, "prefilter at \(Prefilter.name(of: level))")
            }
            #expect(found.count == expected.count)
            for (index, (a, b)) in zip(found, expected).enumerated() {
                #expect(abs(a.score - b.score) <= 1e-5)
                let separated =
                    (index == 0 || expected[index - 1].score - b.score > 1e-5)
                    && (index + 1 == expected.count || b.score - expected[index + 1].score > 1e-5)
                if separated { #expect(a.templateId == b.templateId && a.ordinal == b.ordinal) }
            }
        }
    }

    /// A top-k scan without a threshold starts from a cut-off every row reaches, so all of its first
    /// block's rows survive the bound. Rescored best bound first, the few best of them raise the
    /// cut-off past the rest before those are read (89 rows of 4,096 at 128 floats, 128 at 512).
    /// Rescored in row order, every one was — about half the block, each a read from the store when
    /// the rows are not in memory — and here that tipped the scan into scoring every row (3,612).
    /// At every level, the same best scores as the float32 kernel over every row.
    @Test(arguments: [128, 512])
    func aBlockWithManySurvivorsIsRescoredBestBoundFirst(dimension: Int) throws {
        let registry = Self.registry(rows: 4_096, dimension: dimension, identifiers: 4_096, scoreFunction: .cosine) { random, _, _ in
            Float(random.normal())
        }
        for row in 0..<registry.count {
            Self.normalise(registry.mutableRow(row), dimension)
            registry.encode(row: row)
        }
        var random = SeededGenerator(seed: 5)
        var query = (0..<dimension).map { _ in Float(random.normal()) }
        query.withUnsafeMutableBufferPointer { Self.normalise($0.baseAddress!, dimension) }
        let limit = 10
        let coded = query.withUnsafeBufferPointer { Prefilter.Query($0.baseAddress!, for: registry) }
        for level in Prefilter.supportedLevels {
            // The identification's own bookkeeping, reduced to scores: keep what reaches the cut-off,
            // and at twice the limit keep the best `limit` and raise the cut-off to the last of them.
            var cutoff: Float = 0
            var kept: [Float] = []
            var memo = Prefilter.DotCutoff()
            let rescored = try query.withUnsafeBufferPointer { query in
                try Scan.scoreSurvivors(
                    registry, 0..<registry.count, query: query.baseAddress!, coded: coded, level: level, memo: &memo, cutoff: { cutoff }
                ) { _, score in
                    guard score >= cutoff else { return }
                    kept.append(score)
                    if kept.count == 2 * limit {
                        kept.sort(by: >)
                        kept.removeLast(limit)
                        cutoff = kept[limit - 1]
                    }
                }
            }
            kept.sort(by: >)
            let expected = query.withUnsafeBufferPointer { query in
                (0..<registry.count).map { row in
                    registry.algorithm.scoreFunction.score(dot: Kernels.dot(query.baseAddress!, registry.row(row), count: dimension))
                }
            }.sorted(by: >).prefix(limit)
            #expect(kept.prefix(limit).elementsEqual(expected), "\(Prefilter.name(of: level))")
            #expect(rescored < registry.count / 16, "\(Prefilter.name(of: level)): \(rescored) of \(registry.count) rows rescored")
        }
    }

    /// The registration check: the best row of any other identifier and the best of one's own,
    /// skipping excluded templates, on one core and many.
    @Test func theCheckScanFindsTheBestOtherAndOwnRows() throws {
        let registry = Self.registry(rows: 2_000, dimension: 32, identifiers: 300) { random, _, _ in
            Float(Int(random.next() % 5) - 2) / 64
        }
        var random = SeededGenerator(seed: 5)
        for _ in 0..<20 {
            let query = (0..<32).map { _ in Float(Int(random.next() % 5) - 2) / 4 }
            let own = UInt32(random.next() % 300)
            let excluded = Set((0..<50).map { _ in registry.templateIds[Int(random.next() % 2_000)] })
            var other: Scan.Candidate?
            var mine: Scan.Candidate?
            for row in 0..<registry.count where !excluded.contains(registry.templateIds[row]) {
                var dot = 0.0
                for i in 0..<32 { dot += Double(query[i]) * Double(registry.row(row)[i]) }
                let candidate = Scan.Candidate(
                    score: Float(Self.score(dot, .dot)), templateId: registry.templateIds[row], ordinal: registry.ordinals[row])
                if candidate.ordinal == own {
                    if mine.map({ candidate.beats($0) }) ?? true { mine = candidate }
                } else if other.map({ candidate.beats($0) }) ?? true {
                    other = candidate
                }
            }
            for (pool, chunk) in [(Self.single, nil), (Self.parallel, 37)] as [(ScanPool, Int?)] {
                let found = try query.withUnsafeBufferPointer {
                    try Scan.check(registry, query: $0.baseAddress!, queryMask: 0, own: own, excluded: excluded, pool: pool, rowsPerChunk: chunk)
                }
                #expect(found.other == other)
                #expect(found.own == mine)
                // With a floor (at, just above and below the best other's exact score), through the
                // prefilter at every level or not: the best other only when it reaches the floor.
                let best = other?.score ?? 0
                for floor in [best, best.nextUp, best / 2] {
                    for level in [nil] + Prefilter.supportedLevels.map(Optional.some) {
                        let floored = try query.withUnsafeBufferPointer {
                            try Scan.check(
                                registry, query: $0.baseAddress!, queryMask: 0, own: own, excluded: excluded, floor: floor, pool: pool,
                                rowsPerChunk: chunk, prefilter: level != nil, level: level ?? Prefilter.level)
                        }
                        #expect(floored.other == (best >= floor ? other : nil), "floor \(floor), level \(String(describing: level))")
                        #expect(floored.own == mine)
                    }
                }
            }
        }
    }

    /// A group commit's checks in one pass equal each registration's own scan, bit for bit, for any
    /// number of queries (the four-at-a-time kernel and its remainder) and chunking.
    @Test(arguments: [1, 4, 7, 64])
    func theBatchedCheckEqualsOneCheckPerQuery(queries: Int) throws {
        let registry = Self.registry(rows: 3_000, dimension: 128, identifiers: 400, scoreFunction: .cosine) { random, _, _ in
            Float(random.normal())
        }
        for row in 0..<registry.count {
            Self.normalise(registry.mutableRow(row), 128)
            registry.encode(row: row)
        }
        var random = SeededGenerator(seed: UInt64(queries))
        var rows: [Float] = []
        for _ in 0..<queries {
            var query = (0..<128).map { _ in Float(random.normal()) }
            query.withUnsafeMutableBufferPointer { Self.normalise($0.baseAddress!, 128) }
            rows += query
        }
        // Some queries belong to an identifier already present, some to new ones.
        let owners: [UInt32?] = (0..<queries).map { $0 % 3 == 0 ? nil : UInt32(random.next() % 400) }
        for (pool, chunk) in [(Self.single, nil), (Self.parallel, 111)] as [(ScanPool, Int?)] {
            let batched = try rows.withUnsafeBufferPointer {
                try Scan.check(registry, queries: $0.baseAddress!, owners: owners, pool: pool, rowsPerChunk: chunk)
            }
            for q in 0..<queries {
                let single = try rows.withUnsafeBufferPointer {
                    try Scan.check(registry, query: $0.baseAddress! + q * 128, queryMask: 0, own: owners[q], excluded: [], pool: Self.single)
                }
                #expect(batched[q].other == single.other && batched[q].own == single.own, "query \(q)")
            }
            // Floors at the identification threshold, through the prefilter at every level: the same
            // as each query's own floored scan without it.
            let floors = (0..<queries).map { Float([0.1, 0.15, 0.2][$0 % 3]) }
            for level in Prefilter.supportedLevels {
                let filtered = try rows.withUnsafeBufferPointer {
                    try Scan.check(
                        registry, queries: $0.baseAddress!, owners: owners, floors: floors, pool: pool, rowsPerChunk: chunk, prefilter: true,
                        level: level)
                }
                for q in 0..<queries {
                    let single = try rows.withUnsafeBufferPointer {
                        try Scan.check(
                            registry, query: $0.baseAddress! + q * 128, queryMask: 0, own: owners[q], excluded: [], floor: floors[q],
                            pool: Self.single, prefilter: false)
                    }
                    #expect(filtered[q].other == single.other && filtered[q].own == single.own, "query \(q), \(Prefilter.name(of: level))")
                }
            }
        }
    }

    /// Many callers sharing the helpers at once: every job gets every chunk exactly once (a helper
    /// that woke for a job another thread had just used up once crashed the daemon).
    @Test func concurrentJobsOnOnePoolEachRunEveryChunkOnce() async {
        let pool = ScanPool(helpers: 2)
        await withTaskGroup(of: Bool.self) { group in
            for caller in 0..<8 {
                group.addTask {
                    for round in 0..<100 {
                        let chunks = 1 + (caller + round) % 9
                        let counts = Mutex([Int](repeating: 0, count: chunks))
                        pool.run(chunks: chunks) { chunk in counts.withLock { $0[chunk] += 1 } }
                        if counts.withLock({ $0.contains { $0 != 1 } }) { return false }
                    }
                    return true
                }
            }
            for await ok in group { #expect(ok) }
        }
    }

    static func normalise(_ row: UnsafeMutablePointer<Float>, _ dimension: Int) {
        var norm: Float = 0
        for i in 0..<dimension { norm += row[i] * row[i] }
        norm = norm.squareRoot()
        for i in 0..<dimension { row[i] /= norm }
    }
}
