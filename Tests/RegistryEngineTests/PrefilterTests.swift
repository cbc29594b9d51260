import CScanKernels
import Glibc
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// The int8 prefilter: its kernels at every level the machine supports against the scalar reference,
/// its bound against the float32 kernel on random and adversarial rows, and its codes through
/// appends and removals. (That scans through it return the same bits as without it is checked in
/// ScanExactnessTests, at every level.)
@Suite struct PrefilterTests {
    /// Rows and query of one shape, encoded.
    struct Coded {
        let dimension: Int
        let codeStride: Int
        var rows: [Float]
        var codes: [Int8]
        var terms: [rk_row_terms]

        init(dimension: Int, rows: [Float]) {
            self.dimension = dimension
            self.codeStride = rk_code_stride(dimension)
            self.rows = rows
            let count = rows.count / dimension
            var codes = [Int8](repeating: 0, count: count * self.codeStride)
            var terms = [rk_row_terms](repeating: rk_row_terms(), count: count)
            let stride = self.codeStride
            rows.withUnsafeBufferPointer { rows in
                codes.withUnsafeMutableBufferPointer { codes in
                    for r in 0..<count {
                        rk_encode_row(rows.baseAddress! + r * dimension, dimension, stride, codes.baseAddress! + r * stride, &terms[r])
                    }
                }
            }
            self.codes = codes
            self.terms = terms
        }

        var count: Int { self.rows.count / self.dimension }

        func dots(_ query: Prefilter.Query, level: Int32) -> [Int32] {
            var dots = [Int32](repeating: 0, count: self.count)
            withUnsafePointer(to: query.encoded) { encoded in
                rk_int8_dots(level, encoded, self.codes, self.terms, self.codeStride, self.count, &dots)
            }
            return dots
        }

        func survivors(_ query: Prefilter.Query, level: Int32, dotCutoff: Double) -> [UInt32] {
            var survivors = [UInt32](repeating: 0, count: self.count)
            let found = withUnsafePointer(to: query.encoded) { encoded in
                rk_prefilter(level, encoded, self.codes, self.terms, self.codeStride, self.count, dotCutoff, &survivors)
            }
            return Array(survivors.prefix(found))
        }

        /// The survivors of prepared blocks (the batched check's way), block by block, of several
        /// queries at once (query q with cut-off `dotCutoffs[q]`).
        func blockSurvivors(_ queries: [Prefilter.Query], level: Int32, dotCutoffs: [Double]) -> [[UInt32]] {
            var all = [[UInt32]](repeating: [], count: queries.count)
            var survivors = [UInt32](repeating: 0, count: queries.count * Prefilter.blockRows)
            var counts = [Int](repeating: 0, count: queries.count)
            let encoded = queries.map(\.encoded)
            let block = UnsafeMutablePointer<rk_block>.allocate(capacity: 1)
            defer { block.deallocate() }
            self.terms.withUnsafeBufferPointer { terms in
                self.codes.withUnsafeBufferPointer { codes in
                    for start in stride(from: 0, to: self.count, by: Prefilter.blockRows) {
                        let rows = min(Prefilter.blockRows, self.count - start)
                        rk_prepare_block(terms.baseAddress! + start, rows, block)
                        rk_prefilter_block(
                            level, encoded, queries.count, dotCutoffs, block, codes.baseAddress! + start * self.codeStride,
                            terms.baseAddress! + start, self.codeStride, &survivors, &counts)
                        for q in queries.indices {
                            all[q] += survivors[(q * Prefilter.blockRows)..<(q * Prefilter.blockRows + counts[q])].map { $0 + UInt32(start) }
                        }
                    }
                }
            }
            return all
        }

        /// The query's five-bit codes (the AVX2 batched check's first test) as a query of their own,
        /// and their exact integer dot products with every row (the scalar level's).
        func coarse(_ query: Prefilter.Query) -> (query: rk_query, dots: [Int32]) {
            var coarse = query.encoded
            coarse.codes = coarse.coarse
            coarse.scale = coarse.coarse_scale
            coarse.residual = coarse.coarse_residual
            var dots = [Int32](repeating: 0, count: self.count)
            rk_int8_dots(Int32(RK_LEVEL_SCALAR), &coarse, self.codes, self.terms, self.codeStride, self.count, &dots)
            return (coarse, dots)
        }

        /// What prepared blocks keep of a query's survivors `expected` at `level` when `queries` pass
        /// at once: the same, except where the block tests the query's five-bit codes first
        /// (rk_prefilter_block_is_coarse), which keeps only those whose coarse bound also reaches the
        /// cut-off.
        func blockExpected(_ expected: [UInt32], _ query: Prefilter.Query, dotCutoff: Double, level: Int32, queries: Int) -> [UInt32] {
            guard rk_prefilter_block_is_coarse(level, queries, self.codeStride) != 0 else { return expected }
            var (coarse, dots) = self.coarse(query)
            return expected.filter { rk_upper_bound(&coarse, [self.terms[Int($0)]], dots[Int($0)]) >= dotCutoff }
        }

        /// What the float32 kernel returns for row `r`.
        func kernelDot(_ query: [Float], row r: Int) -> Float {
            query.withUnsafeBufferPointer { q in
                self.rows.withUnsafeBufferPointer { rows in Kernels.dot(q.baseAddress!, rows.baseAddress! + r * self.dimension, count: self.dimension)
                }
            }
        }
    }

    static func query(_ values: [Float], codeStride: Int) -> Prefilter.Query {
        values.withUnsafeBufferPointer { Prefilter.Query($0.baseAddress!, dimension: values.count, codeStride: codeStride) }
    }

    static func unit(_ values: [Float]) -> [Float] {
        let norm = values.reduce(Float(0)) { $0 + $1 * $1 }.squareRoot()
        return values.map { $0 / norm }
    }

    /// The integer dot products are exact, so every level returns the scalar level's numbers — at
    /// extreme codes (±127 everywhere), odd dimensions (padding), and row counts that are not
    /// multiples of the kernels' four-row step.
    @Test(arguments: [1, 3, 63, 64, 65, 128, 300, 512, 8192])
    func everyLevelComputesTheScalarDotProducts(dimension: Int) {
        var random = SeededGenerator(seed: UInt64(dimension))
        let count = dimension >= 4096 ? 9 : 203
        var rows: [Float] = []
        for r in 0..<count {
            switch r % 4 {
            case 0: rows += (0..<dimension).map { _ in Float(random.normal()) }
            case 1: rows += (0..<dimension).map { i in i % 2 == 0 ? 1 : -1 }  // codes ±127
            case 2: rows += (0..<dimension).map { _ in Float(random.uniform()) }  // all positive
            default: rows += (0..<dimension).map { i in i == 0 ? 1000 : Float(random.normal()) * 1e-3 }  // one outlier
            }
        }
        let coded = Coded(dimension: dimension, rows: rows)
        for values in [(0..<dimension).map { _ in Float(random.normal()) }, (0..<dimension).map { i in i % 3 == 0 ? -1 : 1 }] {
            let query = Self.query(values, codeStride: coded.codeStride)
            // The reference: plain integer arithmetic on the codes.
            let expected = (0..<count).map { r in
                (0..<coded.codeStride).reduce(Int32(0)) { sum, i in
                    sum + Int32(query.encoded.codes[i]) * Int32(coded.codes[r * coded.codeStride + i])
                }
            }
            for level in Prefilter.supportedLevels {
                #expect(coded.dots(query, level: level) == expected, "level \(Prefilter.name(of: level)), dimension \(dimension)")
            }
        }
    }

    /// Every level's row encoder makes the scalar one's codes; the terms (sums in another order)
    /// agree to 1e-6 relative and each level's are a bound of their own (checked above and below).
    @Test(arguments: [3, 65, 128, 512])
    func everyLevelEncodesRowsAsTheScalarLevelDoes(dimension: Int) {
        var random = SeededGenerator(seed: UInt64(dimension) + 5)
        let stride = rk_code_stride(dimension)
        for kind in 0..<8 {
            let (rows, _) = Self.family(kind, dimension: dimension, count: 50, random: &random)
            for r in 0..<50 {
                var reference = [Int8](repeating: 0, count: stride)
                var referenceTerms = rk_row_terms()
                rows.withUnsafeBufferPointer {
                    rk_encode_row_at_level(Int32(RK_LEVEL_SCALAR), $0.baseAddress! + r * dimension, dimension, stride, &reference, &referenceTerms)
                }
                for level in Prefilter.supportedLevels {
                    var codes = [Int8](repeating: 1, count: stride)  // padding must be overwritten with zeros
                    var terms = rk_row_terms()
                    rows.withUnsafeBufferPointer { rk_encode_row_at_level(level, $0.baseAddress! + r * dimension, dimension, stride, &codes, &terms) }
                    #expect(codes == reference, "family \(kind), row \(r), \(Prefilter.name(of: level))")
                    #expect(terms.scale == referenceTerms.scale && terms.code_sum == referenceTerms.code_sum)
                    for (a, b) in [(terms.code_norm, referenceTerms.code_norm), (terms.slack, referenceTerms.slack)] {
                        #expect(abs(a - b) <= 1e-6 * max(abs(a), abs(b)), "family \(kind), row \(r)")
                    }
                }
            }
        }
    }

    /// Survivors are exactly the rows whose bound reaches the cut-off, at every level, in order.
    @Test(arguments: [128, 512])
    func everyLevelKeepsTheRowsWhoseBoundReachesTheCutoff(dimension: Int) {
        var random = SeededGenerator(seed: 7)
        let rows = (0..<3_001).flatMap { _ in Self.unit((0..<dimension).map { _ in Float(random.normal()) }) }
        let coded = Coded(dimension: dimension, rows: rows)
        let values = Array(rows[(5 * dimension)..<(6 * dimension)])
        let query = Self.query(values, codeStride: coded.codeStride)
        let dots = coded.dots(query, level: Int32(RK_LEVEL_SCALAR))
        let bounds = withUnsafePointer(to: query.encoded) { encoded in
            (0..<coded.count).map { rk_upper_bound(encoded, [coded.terms[$0]], dots[$0]) }
        }
        // Cut-offs at rows' own bounds too: a kernel whose integer dot product were off by one
        // would move a row across them.
        let atBounds = stride(from: 0, to: coded.count, by: 150).map { bounds[$0] }
        for cutoff in [-Double.infinity, -0.5, 0, 0.05, 0.2, 0.9999, .infinity] + atBounds {
            let expected = (0..<coded.count).filter { bounds[$0] >= cutoff }.map(UInt32.init)
            for level in Prefilter.supportedLevels {
                // (Compared as Bools: a failure should name the level, not print 3,000 numbers.)
                let streamed = coded.survivors(query, level: level, dotCutoff: cutoff) == expected
                #expect(streamed, "level \(Prefilter.name(of: level)), cut-off \(cutoff)")
                // Prepared blocks keep the same (sixteen rows interleaved and tested at once at the
                // AVX-512 level), or at the AVX2 level, where five queries go through the tiled kernel
                // (two at a time, then one), those the coarse bound keeps too; for several queries at
                // once (each its own cut-off: here the same query again, keeping every row or none).
                let blocked = coded.blockSurvivors(
                    [query, query, query, query, query], level: level, dotCutoffs: [cutoff, -.infinity, cutoff, .infinity, cutoff])
                let kept = coded.blockExpected(expected, query, dotCutoff: cutoff, level: level, queries: 5)
                #expect(
                    blocked == [kept, (0..<coded.count).map(UInt32.init), kept, [], kept],
                    "prepared blocks, level \(Prefilter.name(of: level)), cut-off \(cutoff)")
                // The coarse test only ever drops rows the float32 kernel scores below the cut-off.
                let reaching = (0..<coded.count).filter { Double(coded.kernelDot(values, row: $0)) >= cutoff }.map(UInt32.init)
                #expect(Set(reaching).isSubset(of: kept), "level \(Prefilter.name(of: level)), cut-off \(cutoff)")
            }
        }
        // Row 5 is the query itself: it survives a cut-off at its own float32 score.
        let own = Double(coded.kernelDot(values, row: 5))
        #expect(coded.survivors(query, level: Prefilter.level, dotCutoff: own).contains(5))
        // And the bound does its job on unrelated unit vectors: at 0.3, almost every row is dropped.
        #expect(coded.survivors(query, level: Prefilter.level, dotCutoff: 0.3).count < 30)
    }

    /// Many queries over prepared blocks at once (sixteen to a vector at the AVX-512 level, a
    /// remainder of three to eight in eight lanes for rows of up to 256 code bytes, and fewer, or
    /// fewer than eight of longer rows, one by one; at the AVX2 level the tiled kernel, 64 queries a pass,
    /// two at a time and a last one alone, when there are enough queries for the row length, else
    /// query by query, as rows longer than 2,048 bytes of codes): each keeps exactly the rows its own
    /// prefilter keeps (less, through the tiled kernel, those its coarse bound excludes), whatever its
    /// cut-off — none, all, ordinary ones, and a row's own bound, which an integer dot product off by
    /// one would move the row across. 1,301 rows: two whole blocks and a partial one whose second
    /// group is partial too, and whose last sixteen rows are not all there.
    @Test(arguments: [
        (2, 128), (3, 128), (4, 128), (8, 128), (13, 128), (16, 128), (21, 128), (40, 128), (70, 128), (5, 256), (24, 256), (3, 512),
        (6, 512), (8, 512), (37, 512), (70, 512), (9, 1100),
    ])
    func manyQueriesAtOnceKeepEachQuerysOwnSurvivors(count: Int, dimension: Int) {
        var random = SeededGenerator(seed: UInt64(count * dimension))
        let rows = (0..<1_301).flatMap { _ in Self.unit((0..<dimension).map { _ in Float(random.normal()) }) }
        let coded = Coded(dimension: dimension, rows: rows)
        let queries = (0..<count).map { q in
            // Every third query is a stored row (its own score at the top), the others new faces.
            let values =
                q % 3 == 0 ? Array(rows[(q * dimension)..<((q + 1) * dimension)]) : Self.unit((0..<dimension).map { _ in Float(random.normal()) })
            return Self.query(values, codeStride: coded.codeStride)
        }
        let cutoffs: [Double] = queries.indices.map { q in
            switch q % 5 {
            case 0: return -.infinity
            case 1: return .infinity
            case 2: return 0.15
            case 3:
                let row = (q * 97) % coded.count
                let dot = coded.dots(queries[q], level: Int32(RK_LEVEL_SCALAR))[row]
                return withUnsafePointer(to: queries[q].encoded) { rk_upper_bound($0, [coded.terms[row]], dot) }
            default: return 0.05
            }
        }
        let expected = queries.indices.map { q in coded.survivors(queries[q], level: Int32(RK_LEVEL_SCALAR), dotCutoff: cutoffs[q]) }
        for level in Prefilter.supportedLevels {
            let blocked = coded.blockSurvivors(queries, level: level, dotCutoffs: cutoffs)
            for q in queries.indices {
                let kept = coded.blockExpected(expected[q], queries[q], dotCutoff: cutoffs[q], level: level, queries: count)
                // (Compared as Bools: a failure names the query and level, not a thousand rows.)
                let same = blocked[q] == kept
                #expect(same, "query \(q) of \(count), level \(Prefilter.name(of: level))")
            }
        }
        // The cut-offs did select: all rows, none, and (with four queries or more) some in between.
        #expect(expected[0].count == coded.count && expected[1].isEmpty)
        if count >= 4 { #expect(expected[3].count > 0 && expected[3].count < coded.count) }
    }

    /// Families of rows and queries chosen to stress the bound: outlier coordinates (most codes round
    /// to zero), norms far from 1 (large, tiny enough for products to underflow), un-normalised r300
    /// rows, rows equal to the query (its score exactly at the cut-off), sparse and constant rows,
    /// values just off a code, and odd dimensions.
    static func family(_ kind: Int, dimension: Int, count: Int, random: inout SeededGenerator) -> (rows: [Float], queries: [[Float]]) {
        func gaussian(_ random: inout SeededGenerator) -> [Float] { (0..<dimension).map { _ in Float(random.normal()) } }
        var rows: [Float] = []
        var queries: [[Float]] = []
        for _ in 0..<4 { queries.append(Self.unit(gaussian(&random))) }
        for r in 0..<count {
            var row: [Float]
            switch kind {
            case 0: row = Self.unit(gaussian(&random))
            case 1:  // an outlier coordinate hundreds of times the others
                row = gaussian(&random)
                row[Int(random.next() % UInt64(dimension))] = Float(random.normal()) * 500
                row = Self.unit(row)
            case 2:  // norms from 1e-19 (products underflow float32) to 1e15
                let scale = Float([1e-19, 1e-3, 1, 1e3, 1e15][r % 5])
                row = Self.unit(gaussian(&random)).map { $0 * scale }
            case 3:  // r300: not normalised, norm within 1 ± 0.01
                row = Self.unit(gaussian(&random)).map { $0 * Float(1 + (random.uniform() - 0.5) * 0.02) }
            case 4:  // a query itself, or a near copy of it: scores at and near the top
                let base = queries[r % queries.count]
                row = r % 2 == 0 ? base : base.map { $0 + Float(random.normal()) * 1e-4 }
            case 5:  // sparse: a few ±1 among zeros
                row = [Float](repeating: 0, count: dimension)
                for _ in 0..<3 { row[Int(random.next() % UInt64(dimension))] = random.next() % 2 == 0 ? 1 : -1 }
            case 6:  // constant rows: codes exact, no residual
                row = [Float](repeating: Float(random.normal()), count: dimension)
            default:  // values half a code step away from a code: the worst rounding
                let scale = Float(random.uniform() + 0.1)
                row = (0..<dimension).map { i in i == 0 ? scale : scale * (Float(Int(random.next() % 255) - 127) + 0.5) / 127 }
            }
            rows += row
        }
        // Queries of the same shapes as the rows too, and un-normalised ones.
        queries.append(Array(rows[0..<dimension]))
        queries.append(Self.unit(gaussian(&random)).map { $0 * 1e3 })
        var outlier = gaussian(&random)
        outlier[0] = 1e4
        queries.append(Self.unit(outlier))
        return (rows, queries)
    }

    /// The bound is never below what the float32 kernel returns: over every family, many dimensions,
    /// and 7 queries each. `PREFILTER_PROPERTY_ROWS` sets the rows per family and dimension (CI runs
    /// the default; the closing note of the change reports a run with millions).
    @Test func theBoundIsNeverBelowTheFloat32Kernel() {
        let perFamily = getenv("PREFILTER_PROPERTY_ROWS").flatMap { Int(String(cString: $0)) } ?? 2_000
        var random = SeededGenerator(seed: 2024)
        var checked = 0
        var violations: [String] = []
        var tightest = Double.infinity
        for dimension in [3, 65, 128, 512] {
            for kind in 0..<8 {
                let (rows, queries) = Self.family(kind, dimension: dimension, count: perFamily, random: &random)
                let coded = Coded(dimension: dimension, rows: rows)
                for values in queries {
                    let query = Self.query(values, codeStride: coded.codeStride)
                    let dots = coded.dots(query, level: Prefilter.level)
                    // The query's five-bit codes (the AVX2 batched check's first test) bound it too.
                    var (coarse, coarseDots) = coded.coarse(query)
                    withUnsafePointer(to: query.encoded) { encoded in
                        for r in 0..<coded.count {
                            let kernel = Double(coded.kernelDot(values, row: r))
                            let bound = coded.terms.withUnsafeBufferPointer { rk_upper_bound(encoded, $0.baseAddress! + r, dots[r]) }
                            let coarseBound = coded.terms.withUnsafeBufferPointer { rk_upper_bound(&coarse, $0.baseAddress! + r, coarseDots[r]) }
                            if !(kernel <= bound && kernel <= coarseBound), violations.count < 5 {
                                violations.append(
                                    "family \(kind), dimension \(dimension), row \(r): kernel \(kernel) > bound \(bound) or \(coarseBound)")
                            }
                            tightest = min(tightest, bound - kernel, coarseBound - kernel)
                            checked += 1
                        }
                    }
                }
            }
        }
        #expect(violations.isEmpty, "\(violations)")
        #expect(checked == perFamily * 8 * 4 * 7)
        #expect(tightest >= 0)
    }

    /// The AVX2 batched check's coarse integers are exact at every level: over every family, odd
    /// dimensions, a number of rows that leaves a partial tile, one to five queries (its kernel takes
    /// two at a time), and the extreme of its 16-bit partial sums (rows of +127 and −127 codes against
    /// queries of ±15: four steps of 2 · 255 · 15 reach 30,600).
    @Test func theCoarseIntegersAreExactAtEveryLevel() {
        var random = SeededGenerator(seed: 77)
        for dimension in [3, 65, 128, 512, 1100] {
            var sets = (0..<8).map { Self.family($0, dimension: dimension, count: 37, random: &random) }
            let extreme = (0..<dimension).map { Float($0 % 2 == 0 ? 1 : -1) }
            let ones = [Float](repeating: 1, count: dimension)
            sets.append((rows: ones + extreme + extreme.map { -$0 }, queries: [ones, extreme, extreme.map { -$0 }]))
            for (rows, queryValues) in sets {
                let coded = Coded(dimension: dimension, rows: rows)
                for count in 1...5 {
                    let queries = (0..<count).map { Self.query(queryValues[$0 % queryValues.count], codeStride: coded.codeStride) }
                    let expected = queries.flatMap { coded.coarse($0).dots }
                    for level in Prefilter.supportedLevels {
                        var dots = [Int32](repeating: 0, count: count * coded.count)
                        rk_coarse_dots(level, queries.map(\.encoded), count, coded.codes, coded.codeStride, coded.count, &dots)
                        #expect(dots == expected, "dimension \(dimension), \(count) queries, level \(Prefilter.name(of: level))")
                    }
                }
            }
        }
    }

    /// The cut-off in dot-product terms is the smallest float whose score reaches the score cut-off,
    /// for every score function (half-cosine rounds), at the clamps too.
    @Test(arguments: ScoreFunction.allCases)
    func theDotCutoffIsTheSmallestDotReachingTheScore(function: ScoreFunction) {
        var random = SeededGenerator(seed: 3)
        var cutoffs: [Float] = [0, 1e-6, 0.5, 0.6, 1, 1.5, -1, Float(1).nextDown, Float(0.5).nextUp]
        for _ in 0..<200 { cutoffs.append(Float(random.uniform())) }
        for cutoff in cutoffs {
            let dot = Prefilter.dotCutoff(function, score: cutoff)
            if dot == -.infinity {
                #expect(function.score(dot: -.greatestFiniteMagnitude) >= cutoff)
            } else if dot == .infinity {
                #expect(function.score(dot: .greatestFiniteMagnitude) < cutoff)
            } else {
                let value = Float(dot)
                #expect(function.score(dot: value) >= cutoff, "\(function) \(cutoff)")
                #expect(function.score(dot: value.nextDown) < cutoff, "\(function) \(cutoff)")
            }
        }
    }

    /// Codes follow the rows through appends and removals (the last row moves into a hole): every
    /// row's codes and terms equal a fresh encoding of its values.
    @Test func codesFollowAppendsAndRemovals() {
        let algorithm = Algorithm(version: 9002, name: "codes", kind: .vector(dimension: 100), scoreFunction: .cosine, defaultThreshold: 0.5)
        let registry = RegistryIndex(
            id: 1, algorithm: algorithm, thresholds: Thresholds(authentication: 0.5, identification: 0.5, autoEnrolment: 0.5))
        var random = SeededGenerator(seed: 11)
        var nextId: UInt64 = 1
        for round in 0..<6 {
            for _ in 0..<300 {
                let values = Self.unit((0..<100).map { _ in Float(random.normal()) })
                registry.append(templateId: nextId, ordinal: UInt32(nextId % 17), mask: 0) { $0.update(from: values, count: 100) }
                nextId += 1
            }
            for _ in 0..<(100 + round * 20) { registry.remove(templateId: 1 + random.next() % nextId) }
        }
        #expect(registry.count > 500)
        let stride = registry.codeStride
        var codes = [Int8](repeating: 0, count: stride)
        for row in 0..<registry.count {
            var terms = rk_row_terms()
            rk_encode_row(registry.row(row), 100, stride, &codes, &terms)
            let stored = UnsafeBufferPointer(start: registry.codes! + row * stride, count: stride)
            #expect(Array(stored) == codes, "row \(row)")
            let held = registry.terms![row]
            #expect(held.scale == terms.scale && held.code_norm == terms.code_norm && held.slack == terms.slack && held.code_sum == terms.code_sum)
        }
    }
}
