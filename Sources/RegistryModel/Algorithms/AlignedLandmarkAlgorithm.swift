import Glibc

/// The aligned landmark algorithm (`landmarks-aligned`, version 1001): the query's landmarks are
/// aligned onto the stored template's by the weighted 3-D similarity transform (rotation,
/// translation, uniform scale) that minimises the weighted squared residual, and the residual left
/// over — what a head turn cannot explain — is the distance. docs/algorithms.md has the figures.
///
/// **Distance.** Over the landmarks present in both templates, with the vocabulary weights wᵢ, let
/// aᵢ and bᵢ be the two point sets, each centred on its weighted centroid and scaled to
/// Σ wᵢ‖aᵢ‖² = Σ wᵢ‖bᵢ‖² = 1. Then
///
///     min over rotations R and scales s of Σ wᵢ ‖s·R·aᵢ − bᵢ‖² = 1 − λ²,   λ = max_R trace(R·M),  M = Σ wᵢ aᵢ bᵢᵀ
///
/// (the optimal scale is s = λ). λ is the largest eigenvalue of Horn's symmetric 4×4 matrix K(M),
/// whose eigenvector is the optimal rotation as a quaternion; it is found as the largest root of
/// det(λI − K) = λ⁴ − 2‖M‖²λ² − 8·det(M)·λ + det(K) by Newton's method from λ = 1, an upper bound
/// (Cauchy–Schwarz), which converges monotonically because every root is real (K is symmetric).
/// The distance d = √(1 − λ²) is the sine of the angle between the two shapes (the full Procrustes
/// distance): 0 for the same shape in any pose, position and size; it does not depend on which side
/// is aligned onto which.
///
/// **Score.** expf(f32(−decay·d)), in (0, 1]. `decay` = 6 puts the default threshold 0.65 at
/// d = 0.072, in the middle of the gap between genuine and impostor distances on the synthetic faces
/// of `tools/landmark-eval` (docs/landmarks-evaluation.md: no impostor pair of ~4 million accepted).
///
/// **Flat landmarks.** When either template's shared landmarks all have the same z (a 2-D detector
/// sends z = 0), a 3-D rotation could turn the flat set over and match a mirror image; the
/// comparison is then made in the image plane: x and y only, rotation about z only (no reflection),
/// λ = √(p² + q²) with p = Mxx + Myy and q = Mxy − Myx. Roll, position and distance are still undone;
/// yaw and pitch are not, and show up as residual (docs/algorithms.md has how much).
///
/// **Arithmetic.** f64 from the f32 rows, in a fixed order: deterministic. The query's weighted
/// terms are formed once per scan, so similarity(a, b) and similarity(b, a) round differently and
/// agree to about 10⁻⁷, not bit for bit; in exact arithmetic the distance is symmetric.
public enum AlignedLandmarkAlgorithm {
    /// Score = exp(−decay · d), d the full Procrustes distance (calibrated: see the type's comment).
    public static let decay = 6.0

    /// Newton iterations allowed; a face's well-separated largest root takes 3–4 from the bound 1.
    private static let maximumIterations = 60

    /// The prepared row: the present landmarks centred on their weighted centroid and scaled to unit
    /// weighted norm (Σ wᵢ‖pᵢ‖² = 1), absent slots 0. The distance removes position and scale again
    /// over the shared landmarks, so this only keeps the numbers near 1 (large pixel coordinates
    /// would otherwise cancel in the centred sums). A template whose points all coincide becomes all
    /// zeros and matches nothing. Computed in f64, stored as f32. Does not allocate.
    public static func prepare(mask: UInt32, raw: UnsafePointer<Float>, into output: UnsafeMutablePointer<Float>) {
        output.update(repeating: 0, count: LandmarkAlgorithm.floatsPerTemplate)
        guard mask != 0 else { return }
        let weights = LandmarkVocabulary.weights
        var total = 0.0
        var sum = (x: 0.0, y: 0.0, z: 0.0)
        forEachSlot(mask) { slot in
            let w = Double(weights[slot])
            total += w
            sum.x += w * Double(raw[3 * slot])
            sum.y += w * Double(raw[3 * slot + 1])
            sum.z += w * Double(raw[3 * slot + 2])
        }
        let centre = (x: sum.x / total, y: sum.y / total, z: sum.z / total)
        var spread = 0.0
        forEachSlot(mask) { slot in
            let dx = Double(raw[3 * slot]) - centre.x
            let dy = Double(raw[3 * slot + 1]) - centre.y
            let dz = Double(raw[3 * slot + 2]) - centre.z
            spread += Double(weights[slot]) * (dx * dx + dy * dy + dz * dz)
        }
        guard spread > 0, spread.isFinite else { return }
        let scale = 1 / spread.squareRoot()
        forEachSlot(mask) { slot in
            output[3 * slot] = Float((Double(raw[3 * slot]) - centre.x) * scale)
            output[3 * slot + 1] = Float((Double(raw[3 * slot + 1]) - centre.y) * scale)
            output[3 * slot + 2] = Float((Double(raw[3 * slot + 2]) - centre.z) * scale)
        }
    }

    /// Similarity in [0, 1] of two PREPARED rows: 0 when fewer than 15 landmarks are shared or either
    /// side's shared landmarks coincide. Does not allocate.
    public static func similarity(_ maskA: UInt32, _ a: UnsafePointer<Float>, _ maskB: UInt32, _ b: UnsafePointer<Float>) -> Float {
        withQuery(maskA, a) { query in similarity(query, maskB, b) }
    }

    /// Similarity of a prepared query (see `withQuery`) and a PREPARED row. Does not allocate.
    @inline(__always)
    public static func similarity(_ query: Query, _ rowMask: UInt32, _ row: UnsafePointer<Float>) -> Float {
        guard let distance = distance(query, rowMask, row) else { return 0 }
        return score(distance: distance)
    }

    static func distance(_ query: Query, _ rowMask: UInt32, _ row: UnsafePointer<Float>) -> Double? {
        withUnsafeTemporaryAllocation(of: Double.self, capacity: momentCount) { buffer in
            moments(query, row, into: buffer.baseAddress!)
            return distance(query, rowMask, moments: UnsafePointer(buffer.baseAddress!))
        }
    }

    /// Similarity from a row's moments (`moments` below, or the engine's SIMD kernels, which
    /// compute the same bits). Does not allocate.
    /// - Parameter lambdaFloor: from `lambdaFloor(score:)`: a pair that certainly scores below that
    ///   score returns 0 as soon as that is known (the scans pass their cut-off: such rows are
    ///   dropped either way, and most are known after one Newton step).
    @inline(__always)
    public static func similarity(_ query: Query, _ rowMask: UInt32, moments: UnsafePointer<Double>, lambdaFloor: Double = -.infinity)
        -> Float
    {
        guard let distance = distance(query, rowMask, moments: moments, lambdaFloor: lambdaFloor) else { return 0 }
        return score(distance: distance)
    }

    @inline(__always)
    static func distance(_ query: Query, _ rowMask: UInt32, moments: UnsafePointer<Double>, lambdaFloor: Double = -.infinity) -> Double? {
        let shared = query.mask & rowMask
        guard shared.nonzeroBitCount >= LandmarkAlgorithm.minimumLandmarks else { return nil }
        // Most pairs share all of the query's landmarks: its sums are then the precomputed totals.
        let sums = shared == query.mask ? Sums(query, shared, moments, partial: false) : Sums(query, shared, moments, partial: true)
        return procrustesDistance(sums, lambdaFloor: lambdaFloor)
    }

    /// The λ below which a pair certainly scores below `score`: the distance at which
    /// exp(−decay·d) = score, plus 10⁻⁶ (a factor e^(−6·10⁻⁶) on the score, 50 f32 ulps, far more than
    /// the rounding of the f32 score or of λ). −∞ (nothing known) for a score ≤ 0.
    public static func lambdaFloor(score: Float) -> Double {
        guard score > 0 else { return -.infinity }
        let distance = -log(Double(min(score, 1))) / decay + 1e-6
        guard distance < 1 else { return -.infinity }
        return (1 - distance * distance).squareRoot()
    }

    /// exp(−decay·d) in f32 (what is reported is an f32; expf is the cheaper half of the two).
    @inline(__always)
    static func score(distance: Double) -> Float {
        expf(Float(-decay * distance))
    }

    /// Doubles of a row's moments: five groups of four lanes (x, y, z, unused): Σ w·qx·b, Σ w·qy·b,
    /// Σ w·qz·b, Σ w·b, Σ w·b·b, summed over all 32 slots.
    public static let momentCount = 20

    /// A row's moments against the query, in f64: one dense pass over all 32 slots (a slot absent
    /// from the query has zero terms, one absent from the row zero coordinates, so only shared slots
    /// count, without a branch), adding products slot by slot, each rounded (no fused multiply-add).
    /// The reference for the engine's kernels, which must return the same bits.
    public static func moments(_ query: Query, _ row: UnsafePointer<Float>, into moments: UnsafeMutablePointer<Double>) {
        var mx = SIMD4<Double>.zero
        var my = SIMD4<Double>.zero
        var mz = SIMD4<Double>.zero
        var wb = SIMD4<Double>.zero
        var wbb = SIMD4<Double>.zero
        for slot in 0..<LandmarkVocabulary.count {
            let l = query.lanes + 4 * slot
            let b = SIMD4(Double(row[3 * slot]), Double(row[3 * slot + 1]), Double(row[3 * slot + 2]), 0)
            mx += SIMD4(repeating: l[0]) * b
            my += SIMD4(repeating: l[1]) * b
            mz += SIMD4(repeating: l[2]) * b
            let weighted = SIMD4(repeating: l[3]) * b
            wb += weighted
            wbb += weighted * b
        }
        for (group, value) in [mx, my, mz, wb, wbb].enumerated() {
            for lane in 0..<4 { moments[4 * group + lane] = value[lane] }
        }
    }

    /// A query's side of every comparison, computed once per scan, in f64: per slot w, w·x, w·y, w·z,
    /// w·(x² + y²), w·z² (`terms`), per slot w·x, w·y, w·z, w (`lanes`, the moments' operand), both 0
    /// for absent slots, and the totals over the query's landmarks.
    public struct Query {
        let mask: UInt32
        let terms: UnsafePointer<Double>
        public let lanes: UnsafePointer<Double>
        let totals: (weight: Double, x: Double, y: Double, z: Double, planar: Double, depth: Double)
    }

    static let termsPerSlot = 6

    /// Calls `body` with the query form of a PREPARED row (on the stack: no allocation).
    @inline(__always)
    public static func withQuery<R>(_ mask: UInt32, _ row: UnsafePointer<Float>, _ body: (Query) throws -> R) rethrows -> R {
        let slots = LandmarkVocabulary.count
        return try withUnsafeTemporaryAllocation(of: Double.self, capacity: 4 * slots) { laneBuffer in
            try withUnsafeTemporaryAllocation(of: Double.self, capacity: termsPerSlot * slots) { termBuffer in
                let terms = termBuffer.baseAddress!
                let lanes = laneBuffer.baseAddress!
                terms.initialize(repeating: 0, count: termsPerSlot * slots)
                lanes.initialize(repeating: 0, count: 4 * slots)
                let weights = LandmarkVocabulary.weights
                var totals = (weight: 0.0, x: 0.0, y: 0.0, z: 0.0, planar: 0.0, depth: 0.0)
                var remaining = mask
                while remaining != 0 {
                    let slot = remaining.trailingZeroBitCount
                    remaining &= remaining - 1
                    let w = Double(weights[slot])
                    let x = Double(row[3 * slot])
                    let y = Double(row[3 * slot + 1])
                    let z = Double(row[3 * slot + 2])
                    let t = terms + termsPerSlot * slot
                    (t[0], t[1], t[2], t[3]) = (w, w * x, w * y, w * z)
                    t[4] = t[1] * x + t[2] * y
                    t[5] = t[3] * z
                    let l = lanes + 4 * slot
                    (l[0], l[1], l[2], l[3]) = (t[1], t[2], t[3], w)
                    totals.weight += t[0]
                    totals.x += t[1]
                    totals.y += t[2]
                    totals.z += t[3]
                    totals.planar += t[4]
                    totals.depth += t[5]
                }
                return try body(Query(mask: mask, terms: UnsafePointer(terms), lanes: UnsafePointer(lanes), totals: totals))
            }
        }
    }

    /// The weighted first and second moments of the shared landmarks of the query (a) and a row (b),
    /// from which the centred cross-covariance and spreads follow.
    struct Sums {
        var weight = 0.0
        var a = (x: 0.0, y: 0.0, z: 0.0)
        var b = (x: 0.0, y: 0.0, z: 0.0)
        /// Σ w(x² + y²) and Σ w·z², per side: z apart so that a flat side shows as zero.
        var aPlanar = 0.0
        var aDepth = 0.0
        var bPlanar = 0.0
        var bDepth = 0.0
        /// Σ w·aᵢ·bⱼ, row-major.
        var m = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

        /// The query's side is its totals, less the landmarks the row lacks when `partial` (a
        /// constant at each call, so each variant compiles without the test).
        /// The row's side and the cross terms come from its moments.
        @inline(__always)
        init(_ query: Query, _ shared: UInt32, _ moments: UnsafePointer<Double>, partial: Bool) {
            (self.weight, self.a.x, self.a.y, self.a.z) = (query.totals.weight, query.totals.x, query.totals.y, query.totals.z)
            (self.aPlanar, self.aDepth) = (query.totals.planar, query.totals.depth)
            if partial {
                // The totals less the few query landmarks the row lacks: fewer, independent steps
                // than summing the shared ones again.
                var missing = query.mask & ~shared
                while missing != 0 {
                    let t = query.terms + termsPerSlot * missing.trailingZeroBitCount
                    missing &= missing - 1
                    self.weight -= t[0]
                    self.a.x -= t[1]
                    self.a.y -= t[2]
                    self.a.z -= t[3]
                    self.aPlanar -= t[4]
                    self.aDepth -= t[5]
                }
            }
            let m = moments
            self.m = (m[0], m[1], m[2], m[4], m[5], m[6], m[8], m[9], m[10])
            self.b = (m[12], m[13], m[14])
            self.bPlanar = m[16] + m[17]
            self.bDepth = m[18]
        }
    }

    /// A row-major 3×3 matrix without an array (the scan must not allocate).
    struct Matrix3 {
        var xx, xy, xz, yx, yy, yz, zx, zy, zz: Double
    }

    /// The centred, unit-spread cross-covariance and which comparison applies.
    struct Centred {
        /// Entry (i, j) = Σ w·aᵢ·bⱼ over the centred, unit-spread shared points.
        var m: Matrix3
        /// Either side's shared landmarks are flat (all the same z): compare in the image plane.
        var planar: Bool
        /// Each side's spread Σ w‖p − centroid‖² before scaling (x and y only when planar).
        var spreadA: Double
        var spreadB: Double
    }

    @inline(__always)
    static func centred(_ s: Sums) -> Centred? {
        let perWeight = 1 / s.weight
        // The row side's mean, so that centring is one multiply per entry (no division).
        let b = (x: s.b.x * perWeight, y: s.b.y * perWeight, z: s.b.z * perWeight)
        // A side is flat when its shared z values are all equal: their centred spread is (up to
        // rounding) zero. Rows with z exactly 0 are caught by the raw sum without any rounding doubt.
        let aDepth = s.aDepth - s.a.z * s.a.z * perWeight
        let bDepth = s.bDepth - s.b.z * b.z
        let planar = s.aDepth == 0 || s.bDepth == 0 || aDepth <= 1e-12 * s.aPlanar || bDepth <= 1e-12 * s.bPlanar
        let spreadA = s.aPlanar - (s.a.x * s.a.x + s.a.y * s.a.y) * perWeight + (planar ? 0 : aDepth)
        let spreadB = s.bPlanar - (s.b.x * b.x + s.b.y * b.y) + (planar ? 0 : bDepth)
        guard spreadA > 0, spreadB > 0, (spreadA * spreadB).isNormal else { return nil }
        let norm = 1 / (spreadA * spreadB).squareRoot()
        // Centring: Σ w(a − ā)(b − b̄)ᵀ = Σ w·a·bᵀ − (Σ w·a)·b̄ᵀ.
        let m = Matrix3(
            xx: (s.m.0 - s.a.x * b.x) * norm, xy: (s.m.1 - s.a.x * b.y) * norm, xz: (s.m.2 - s.a.x * b.z) * norm,
            yx: (s.m.3 - s.a.y * b.x) * norm, yy: (s.m.4 - s.a.y * b.y) * norm, yz: (s.m.5 - s.a.y * b.z) * norm,
            zx: (s.m.6 - s.a.z * b.x) * norm, zy: (s.m.7 - s.a.z * b.y) * norm, zz: (s.m.8 - s.a.z * b.z) * norm)
        return Centred(m: m, planar: planar, spreadA: spreadA, spreadB: spreadB)
    }

    /// √(1 − λ²) from the sums (nil when a side is degenerate, or λ is known to be below `lambdaFloor`).
    @inline(__always)
    static func procrustesDistance(_ sums: Sums, lambdaFloor: Double = -.infinity) -> Double? {
        guard let c = centred(sums) else { return nil }
        guard let lambda = c.planar ? planarLambda(c.m) : spatialLambda(c.m, floor: lambdaFloor), lambda >= lambdaFloor else { return nil }
        return distance(lambda: lambda)
    }

    @inline(__always)
    static func distance(lambda: Double) -> Double {
        let clamped = min(max(lambda, 0), 1)
        return max(0, (1 - clamped) * (1 + clamped)).squareRoot()
    }

    /// max over rotations about z of trace(R·M) restricted to x and y.
    @inline(__always)
    static func planarLambda(_ m: Matrix3) -> Double {
        let p = m.xx + m.yy
        let q = m.xy - m.yx
        return (p * p + q * q).squareRoot()
    }

    /// Horn's matrix for M, row-major 4×4: its quadratic form in a unit quaternion q is trace(R(q)·M).
    static func hornMatrix(_ m: Matrix3) -> [Double] {
        [
            m.xx + m.yy + m.zz, m.yz - m.zy, m.zx - m.xz, m.xy - m.yx,
            m.yz - m.zy, m.xx - m.yy - m.zz, m.xy + m.yx, m.zx + m.xz,
            m.zx - m.xz, m.xy + m.yx, -m.xx + m.yy - m.zz, m.yz + m.zy,
            m.xy - m.yx, m.zx + m.xz, m.yz + m.zy, -m.xx - m.yy + m.zz,
        ]
    }

    /// The largest eigenvalue of Horn's matrix: max over proper rotations of trace(R·M).
    /// - Parameter floor: nil as soon as an iterate (each one above λ) is below it.
    @inline(__always)
    static func spatialLambda(_ m: Matrix3, floor: Double = -.infinity) -> Double? {
        let squares =
            (m.xx * m.xx + m.yy * m.yy + m.zz * m.zz) + (m.xy * m.xy + m.yx * m.yx) + (m.xz * m.xz + m.zx * m.zx)
            + (m.yz * m.yz + m.zy * m.zy)
        let determinant = m.xx * (m.yy * m.zz - m.yz * m.zy) - m.xy * (m.yx * m.zz - m.yz * m.zx) + m.xz * (m.yx * m.zy - m.yy * m.zx)
        let c2 = -2 * squares
        let c1 = -8 * determinant
        let c0 = hornDeterminant(m)
        var lambda = 1.0
        for _ in 0..<maximumIterations {
            let lambda2 = lambda * lambda
            let value = (lambda2 + c2) * lambda2 + c1 * lambda + c0
            let slope = (4 * lambda2 + 2 * c2) * lambda + c1
            guard slope > 0 else { break }
            let step = value / slope
            lambda -= step
            if lambda < floor { return nil }
            // Converging quadratically, the error after a step s is about s²·Σ 1/(λ − λᵢ) over the
            // other roots, ~10⁻¹³ for faces (whose other roots lie 0.5 or more below); only
            // collinear landmarks (which a face is not) make a double root.
            if abs(step) <= 1e-7 { break }
        }
        return lambda
    }

    /// det of Horn's matrix, expanded along the first row, from M's entries (no allocation).
    @inline(__always)
    static func hornDeterminant(_ m: Matrix3) -> Double {
        let k00 = m.xx + m.yy + m.zz
        let k01 = m.yz - m.zy
        let k02 = m.zx - m.xz
        let k03 = m.xy - m.yx
        let k10 = k01
        let k11 = m.xx - m.yy - m.zz
        let k12 = m.xy + m.yx
        let k13 = m.zx + m.xz
        let k20 = k02
        let k21 = k12
        let k22 = -m.xx + m.yy - m.zz
        let k23 = m.yz + m.zy
        let k30 = k03
        let k31 = k13
        let k32 = k23
        let k33 = -m.xx - m.yy + m.zz
        let minor0 = k11 * (k22 * k33 - k23 * k32) - k12 * (k21 * k33 - k23 * k31) + k13 * (k21 * k32 - k22 * k31)
        let minor1 = k10 * (k22 * k33 - k23 * k32) - k12 * (k20 * k33 - k23 * k30) + k13 * (k20 * k32 - k22 * k30)
        let minor2 = k10 * (k21 * k33 - k23 * k31) - k11 * (k20 * k33 - k23 * k30) + k13 * (k20 * k31 - k21 * k30)
        let minor3 = k10 * (k21 * k32 - k22 * k31) - k11 * (k20 * k32 - k22 * k30) + k12 * (k20 * k31 - k21 * k30)
        return k00 * minor0 - k01 * minor1 + k02 * minor2 - k03 * minor3
    }

    @inline(__always)
    private static func forEachSlot(_ mask: UInt32, _ body: (Int) -> Void) {
        var remaining = mask
        while remaining != 0 {
            body(remaining.trailingZeroBitCount)
            remaining &= remaining - 1
        }
    }
}

extension AlignedLandmarkAlgorithm {
    /// The similarity transform that carries a query's landmarks onto a stored template's:
    /// stored ≈ scale · rotation · query + translation (raw coordinates, shared landmarks).
    public struct Alignment: Sendable {
        /// Row-major 3×3 proper rotation.
        public var rotation: [Double]
        public var scale: Double
        public var translation: (x: Double, y: Double, z: Double)
        /// The full Procrustes distance the score is made from.
        public var distance: Double

        /// `scale · rotation · p + translation`.
        public func apply(_ p: (x: Double, y: Double, z: Double)) -> (x: Double, y: Double, z: Double) {
            let r = self.rotation
            return (
                self.scale * (r[0] * p.x + r[1] * p.y + r[2] * p.z) + self.translation.x,
                self.scale * (r[3] * p.x + r[4] * p.y + r[5] * p.z) + self.translation.y,
                self.scale * (r[6] * p.x + r[7] * p.y + r[8] * p.z) + self.translation.z
            )
        }
    }

    /// Aligns `query` onto `stored` (raw dense templates) over their shared landmarks: the transform
    /// the distance measures what is left of. Nil when fewer than 15 landmarks are shared or a side is
    /// degenerate. Not used by the scan (which needs only λ); it shows what the alignment does.
    public static func alignment(of query: DenseLandmarks, onto stored: DenseLandmarks) -> Alignment? {
        let shared = query.mask & stored.mask
        guard shared.nonzeroBitCount >= LandmarkAlgorithm.minimumLandmarks else { return nil }
        let sums = query.coordinates.withUnsafeBufferPointer { q in
            stored.coordinates.withUnsafeBufferPointer { s in
                withQuery(shared, q.baseAddress!) { query in
                    withUnsafeTemporaryAllocation(of: Double.self, capacity: momentCount) { buffer in
                        // The query's terms are 0 outside the shared slots: the moments cover only those.
                        moments(query, s.baseAddress!, into: buffer.baseAddress!)
                        return Sums(query, shared, UnsafePointer(buffer.baseAddress!), partial: false)
                    }
                }
            }
        }
        guard let centred = centred(sums) else { return nil }
        let w = sums.weight

        let rotation: [Double]
        let lambda: Double
        if centred.planar {
            let m = centred.m
            let angle = atan2(m.xy - m.yx, m.xx + m.yy)
            rotation = [cos(angle), -sin(angle), 0, sin(angle), cos(angle), 0, 0, 0, 1]
            lambda = planarLambda(m)
        } else {
            lambda = spatialLambda(centred.m) ?? 0
            rotation = rotationMatrix(quaternion: topEigenvector(hornMatrix(centred.m), lambda))
        }
        // The optimal scale in raw units: λ relates unit-spread sets; undo both spreads.
        let scale = lambda * (centred.spreadB / centred.spreadA).squareRoot()
        let qc = (x: sums.a.x / w, y: sums.a.y / w, z: centred.planar ? 0 : sums.a.z / w)
        let sc = (x: sums.b.x / w, y: sums.b.y / w, z: centred.planar ? 0 : sums.b.z / w)
        var alignment = Alignment(rotation: rotation, scale: scale, translation: (0, 0, 0), distance: 0)
        let moved = alignment.apply(qc)
        alignment.translation = (sc.x - moved.x, sc.y - moved.y, sc.z - moved.z)
        alignment.distance = distance(lambda: lambda)
        return alignment
    }

    /// A unit eigenvector of the symmetric 4×4 `k` for eigenvalue `lambda`: the largest column of the
    /// adjugate of k − λI (every column is a multiple of the eigenvector when λ is simple).
    static func topEigenvector(_ k: [Double], _ lambda: Double) -> [Double] {
        var a = k
        for i in 0..<4 { a[5 * i] -= lambda }
        var best = [1.0, 0, 0, 0]
        var bestNorm = 0.0
        for column in 0..<4 {
            // Column `column` of adj(A): cofactors C(column, row) for each row.
            var v = [Double](repeating: 0, count: 4)
            for row in 0..<4 {
                let rows = (0..<4).filter { $0 != column }
                let columns = (0..<4).filter { $0 != row }
                let sub = rows.flatMap { r in columns.map { c in a[4 * r + c] } }
                let det3 =
                    sub[0] * (sub[4] * sub[8] - sub[5] * sub[7]) - sub[1] * (sub[3] * sub[8] - sub[5] * sub[6])
                    + sub[2] * (sub[3] * sub[7] - sub[4] * sub[6])
                v[row] = ((row + column) % 2 == 0 ? 1 : -1) * det3
            }
            let norm = v.reduce(0) { $0 + $1 * $1 }.squareRoot()
            if norm > bestNorm {
                bestNorm = norm
                best = v.map { $0 / norm }
            }
        }
        return best
    }

    /// The rotation of unit quaternion (w, x, y, z), row-major.
    static func rotationMatrix(quaternion q: [Double]) -> [Double] {
        let (w, x, y, z) = (q[0], q[1], q[2], q[3])
        return [
            w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z,
        ]
    }
}
