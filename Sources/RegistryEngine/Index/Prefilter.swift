import CScanKernels
import Glibc
import RegistryModel
import Synchronization

/// The int8 prefilter of vector scans: a first pass over each row's int8 codes computes an upper
/// bound of the score the float32 kernel would give it, and only rows whose bound reaches the current
/// cut-off are scored by the float32 kernel. Every reported, compared or tie-broken score still comes
/// from that kernel, so results are bit-identical to a plain scan; the prefilter only decides which
/// rows cannot matter. The bound and its proof are in `CScanKernels/scan_kernels.c`.
enum Prefilter {
    /// The kernel level in use (chosen once from the CPU; `REGISTRY_KERNELS` can lower it).
    static let level = rk_active_level()

    /// The level's name: "scalar", "avx2" or "avx512-vnni".
    static var levelName: String { Self.name(of: Self.level) }

    static func name(of level: Int32) -> String { rk_level_name(level).map { String(cString: $0) } ?? "level \(level)" }

    /// Every level this machine can run, lowest first (tests compare each with the scalar one).
    static var supportedLevels: [Int32] { Array(Int32(RK_LEVEL_SCALAR)...rk_supported_level()) }

    /// Whether scans use the prefilter. `REGISTRY_PREFILTER=off` turns it off (benchmarks compare
    /// both; results are the same either way).
    static let isEnabled: Bool = getenv("REGISTRY_PREFILTER").map { String(cString: $0) != "off" } ?? true

    /// Below this many rows a registry is scanned in float32 alone: the whole scan costs less than
    /// preparing the query's codes would save.
    static let minimumRows = 2048

    /// Rows handed to the kernel at once; between blocks the scan takes up a raised cut-off.
    static let blockRows = Int(RK_BLOCK_ROWS)

    /// Once this fraction of a chunk's rows has survived the bound (low thresholds, near-duplicate
    /// galleries), the rest of the chunk is scanned in float32 alone: rescoring most rows costs
    /// more than reading them all.
    static let fallbackFraction = 0.4

    /// From this many survivors in a block, a scan rescores them best bound first and stops at the
    /// first bound below its cut-off, which rescoring raises: with a low cut-off (top k without a
    /// threshold, before the k best are known) nearly every row of a chunk's first block survives,
    /// and a handful of them settle the cut-off that excludes the rest.
    static let orderedSurvivors = 32

    /// Whether a scan of `registry` uses the prefilter by default: always when its rows are read
    /// from the store (reading every row costs far more than its codes).
    static func applies(to registry: RegistryIndex) -> Bool {
        Self.isEnabled && registry.codes != nil && (registry.count >= Self.minimumRows || registry.rows == nil)
    }

    /// Rows considered by prefiltered scans, and how many of them the float32 kernel scored, since
    /// start (for benchmarks and `stats`: the fraction rescored).
    private static let rowsConsidered = Atomic<Int>(0)
    private static let rowsRescored = Atomic<Int>(0)

    static func count(considered: Int, rescored: Int) {
        Self.rowsConsidered.add(considered, ordering: .relaxed)
        Self.rowsRescored.add(rescored, ordering: .relaxed)
    }

    /// Rows considered and rescored by prefiltered scans so far.
    package static var counts: (considered: Int, rescored: Int) {
        (Self.rowsConsidered.load(ordering: .relaxed), Self.rowsRescored.load(ordering: .relaxed))
    }

    /// A query's codes and terms, for the life of one scan.
    final class Query {
        private let codes: UnsafeMutablePointer<Int8>
        private let biased: UnsafeMutablePointer<UInt8>
        private let coarse: UnsafeMutablePointer<Int8>
        private(set) var encoded: rk_query

        init(_ query: UnsafePointer<Float>, dimension: Int, codeStride: Int) {
            self.codes = .allocate(capacity: codeStride)
            self.biased = .allocate(capacity: codeStride)
            self.coarse = .allocate(capacity: codeStride)
            self.encoded = rk_query(
                codes: self.codes, biased: self.biased, scale: 0, residual: 0, norm: 0, coarse: self.coarse, coarse_scale: 0, coarse_residual: 0,
                coarse_sum: 0)
            rk_encode_query(query, dimension, codeStride, &self.encoded)
        }

        /// The codes of a query for a scan of `registry` (a vector registry).
        convenience init(_ query: UnsafePointer<Float>, for registry: RegistryIndex) {
            guard case .vector(let dimension) = registry.algorithm.kind else { preconditionFailure("the prefilter is for vector registries") }
            self.init(query, dimension: dimension, codeStride: registry.codeStride)
        }

        deinit {
            self.codes.deallocate()
            self.biased.deallocate()
            self.coarse.deallocate()
        }

        /// The rows of `range` (of `registry`) whose bound reaches `dotCutoff`, as offsets from
        /// `range.lowerBound`, written to `survivors`; returns how many.
        @inline(__always)
        func survivors(
            _ registry: RegistryIndex, _ range: Range<Int>, dotCutoff: Double, into survivors: UnsafeMutablePointer<UInt32>,
            level: Int32 = Prefilter.level
        ) -> Int {
            withUnsafePointer(to: &self.encoded) { encoded in
                let codes = registry.codes! + range.lowerBound * registry.codeStride
                let terms = registry.terms! + range.lowerBound
                return rk_prefilter(level, encoded, codes, terms, registry.codeStride, range.count, dotCutoff, survivors)
            }
        }

        /// `count` survivors of the block starting at `start` (offsets from it), highest bound first,
        /// with their bounds.
        func rank(
            _ registry: RegistryIndex, from start: Int, survivors: UnsafePointer<UInt32>, count: Int, into ranked: UnsafeMutablePointer<rk_ranked>,
            level: Int32 = Prefilter.level
        ) {
            withUnsafePointer(to: &self.encoded) { encoded in
                rk_rank_survivors(
                    level, encoded, registry.codes! + start * registry.codeStride, registry.terms! + start, registry.codeStride, survivors,
                    count, ranked)
            }
        }
    }

    /// A block of rows prepared once for the many queries that pass over it (the batched registration
    /// check): its code sums side by side and its largest bound terms (scan_kernels.h), which the
    /// prefilter otherwise gathers again for every query; and every query's survivors. Reused block
    /// after block.
    final class Block {
        let prepared: UnsafeMutablePointer<rk_block>
        /// Per query, ``blockRows`` slots for its survivors, and their number.
        let survivors: UnsafeMutableBufferPointer<UInt32>
        let counts: UnsafeMutableBufferPointer<Int>
        private let queries: [rk_query]

        /// - Parameter queries: the queries that will pass over each block (kept alive by the caller).
        init(queries: [Query]) {
            self.prepared = .allocate(capacity: 1)
            self.prepared.initialize(to: rk_block())
            self.queries = queries.map(\.encoded)
            self.survivors = .allocate(capacity: max(1, queries.count) * Prefilter.blockRows)
            self.counts = .allocate(capacity: max(1, queries.count))
        }

        deinit {
            self.prepared.deallocate()
            self.survivors.deallocate()
            self.counts.deallocate()
        }

        /// Prepares the rows of `range` of `registry` (at most ``Prefilter/blockRows``).
        func prepare(_ registry: RegistryIndex, _ range: Range<Int>) {
            precondition(range.count <= Prefilter.blockRows)
            rk_prepare_block(registry.terms! + range.lowerBound, range.count, self.prepared)
        }

        /// Finds every query's survivors among the prepared rows of `range` (query q's cut-off
        /// `dotCutoffs[q]`): query q's are `survivors[q · blockRows ..< q · blockRows + counts[q]]`,
        /// offsets from `range.lowerBound`.
        func filter(_ registry: RegistryIndex, _ range: Range<Int>, dotCutoffs: UnsafePointer<Double>, level: Int32 = Prefilter.level) {
            precondition(self.prepared.pointee.rows == range.count)
            rk_prefilter_block(
                level, self.queries, self.queries.count, dotCutoffs, self.prepared, registry.codes! + range.lowerBound * registry.codeStride,
                registry.terms! + range.lowerBound, registry.codeStride, self.survivors.baseAddress!, self.counts.baseAddress!)
        }
    }

    /// ``dotCutoff(_:score:)`` remembered for the last score asked (a scan asks before every block;
    /// the cut-off rarely changes).
    struct DotCutoff {
        private var score = Float.nan
        private var dot = -Double.infinity

        mutating func value(_ function: ScoreFunction, score: Float) -> Double {
            if score != self.score {
                self.dot = Prefilter.dotCutoff(function, score: score)
                self.score = score
            }
            return self.dot
        }
    }

    /// The smallest float32 dot product whose score reaches `cutoff`, as a double: −∞ when every
    /// dot product does, +∞ when none does. A row whose bound is below it cannot score `cutoff`.
    /// Found by bisection over the ordered float32 values (score functions are monotone: clamping,
    /// adding and halving never reverse an order), so it is exact whatever the function rounds.
    static func dotCutoff(_ function: ScoreFunction, score cutoff: Float) -> Double {
        func value(_ key: Int64) -> Float {
            key >= 0 ? Float(bitPattern: UInt32(key)) : Float(bitPattern: UInt32(-key) | 0x8000_0000)
        }
        func key(_ value: Float) -> Int64 {
            let magnitude = Int64(value.bitPattern & 0x7fff_ffff)
            return value.sign == .minus ? -magnitude : magnitude
        }
        var low = key(-.greatestFiniteMagnitude)
        var high = key(.greatestFiniteMagnitude)
        if function.score(dot: value(low)) >= cutoff { return -.infinity }
        if !(function.score(dot: value(high)) >= cutoff) { return .infinity }
        // Invariant: score(value(low)) < cutoff <= score(value(high)).
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if function.score(dot: value(middle)) >= cutoff { high = middle } else { low = middle }
        }
        return Double(value(high))
    }
}

/// A score cut-off shared by the chunks of one scan, only ever raised: the k-th best of any k distinct
/// identifiers found so far is a lower bound of the scan's final k-th best, so every chunk may drop
/// rows below it. Chunks raise it as they compact, and pool their results as they finish (a single
/// 2,048-row chunk rarely holds enough of the best rows to raise it far on its own: measured on 1M
/// random rows, 0.9 % of rows were rescored without pooling). The value is read without a lock,
/// as an order-preserving key of the float's bits.
final class SharedCutoff: Sendable {
    private let key: Atomic<UInt32>
    private let best = Mutex<[Scan.Candidate]>([])

    init(_ value: Float) { self.key = Atomic(Self.key(value)) }

    /// Pools a finished chunk's best identifiers (already reduced) and raises the cut-off to the
    /// `limit`-th best of all pooled ones.
    func pool(_ candidates: [Scan.Candidate], limit: Int) {
        guard !candidates.isEmpty else { return }
        let raised: Float? = self.best.withLock { best in
            best += candidates
            Scan.reduce(&best, limit: limit)
            return best.count == limit ? best[limit - 1].score : nil
        }
        if let raised { self.raise(to: raised) }
    }

    var value: Float { Self.value(self.key.load(ordering: .relaxed)) }

    func raise(to value: Float) {
        let new = Self.key(value)
        var current = self.key.load(ordering: .relaxed)
        while new > current {
            let (exchanged, original) = self.key.compareExchange(expected: current, desired: new, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    private static func key(_ value: Float) -> UInt32 {
        value.sign == .minus ? ~value.bitPattern : value.bitPattern | 0x8000_0000
    }

    private static func value(_ key: UInt32) -> Float {
        key & 0x8000_0000 != 0 ? Float(bitPattern: key & 0x7fff_ffff) : Float(bitPattern: ~key)
    }
}
