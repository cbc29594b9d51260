// The depth liveness gate (the depth liveness design, the capture-gates design): nine checks over 10 × 10 depth grids, four
// mandatory and five optional, with fixed thresholds or an identifier's personalised ones (the liveness enrolment design,
// see LivenessProfile.swift).
//
// Depth grids describe a face's shape, so nothing here prints depth values: verdicts carry only the
// aggregate statistics and the values the checks compared.

// MARK: - Statistics

/// Aggregate statistics of one ``DepthFrame``, over its VALID samples only (finite and > 0; a frame with
/// fewer than `gridSize²` depths counts the missing ones as invalid, extra depths are ignored).
///
/// Definitions (the product's decisions):
/// - `mean`, `stdDev` (population, divided by n), `range` (max − min): over every valid sample.
/// - `edgeStdDev`: population standard deviation of the valid samples on the grid border (rows 0 and 9,
///   columns 0 and 9: 36 cells).
/// - `centerStdDev`: population standard deviation of the valid samples in the central 4 × 4 block
///   (rows 3...6 × columns 3...6).
/// - `gradientMean`, `gradientStdDev`: mean and population standard deviation of the absolute depth
///   differences |z₁ − z₂| between horizontally and vertically adjacent cells that are both valid
///   (at most 90 + 90 = 180 pairs).
///
/// A statistic over no values (or over a single value, for the standard deviations) is 0. All values
/// are in metres and are accumulated in `Double`, then rounded to `Float`.
public struct DepthStatistics: Sendable, Hashable {
    /// Number of valid samples (0...100).
    public var validSamples: Int
    public var mean: Float
    public var stdDev: Float
    public var range: Float
    public var edgeStdDev: Float
    public var centerStdDev: Float
    public var gradientMean: Float
    public var gradientStdDev: Float

    public init(
        validSamples: Int = 0, mean: Float = 0, stdDev: Float = 0, range: Float = 0, edgeStdDev: Float = 0,
        centerStdDev: Float = 0, gradientMean: Float = 0, gradientStdDev: Float = 0
    ) {
        self.validSamples = validSamples
        self.mean = mean
        self.stdDev = stdDev
        self.range = range
        self.edgeStdDev = edgeStdDev
        self.centerStdDev = centerStdDev
        self.gradientMean = gradientMean
        self.gradientStdDev = gradientStdDev
    }
}

// MARK: - Checks and verdict

/// The nine liveness checks of the depth liveness design, in report order: the four mandatory ones first (all must
/// pass), then the five optional ones (at least ``DepthLiveness/minimumOptionalPassed`` must pass).
///
/// The per-frame checks look at the LAST frame of the capture; `temporalConsistency` and
/// `microMovement` look at the frames taken from the sequence (see ``DepthLiveness/takenFrames(_:)``).
/// Fixed thresholds (metres), used without a profile and for the fallback:
/// 1. `realisticDepth` (mandatory): 0.2 ≤ mean ≤ 3.0.
/// 2. `centerVariation` (mandatory): centerStdDev ≥ 0.005.
/// 3. `edgeVariation` (mandatory): edgeStdDev ≥ 0.02.
/// 4. `depthProfile` (mandatory): stdDev ≥ 0.02 OR range ≥ 0.05.
/// 5. `depthVariation`: stdDev ≥ 0.02 AND range ≥ 0.05.
/// 6. `depthDistribution` ("non-linear"): the RMS residual of the least-squares plane
///    z = a·column + b·row + c through the valid samples is ≥ 0.005 (a photo, flat or tilted, is a plane).
/// 7. `gradientPattern`: gradientStdDev ≥ 0.001 AND gradientMean ≤ 0.5.
/// 8. `temporalConsistency`: at least 2 taken frames, and every consecutive pair's mean depths differ by
///    ≤ 0.1 (the same object throughout, no swap).
/// 9. `microMovement`: for at least one consecutive pair of taken frames, the mean absolute difference
///    between their gradient patterns (over the adjacent-cell pairs valid in both) is ≥ 0.0005 (a static
///    mask or a replayed frame shows none).
public enum LivenessCheck: String, CaseIterable, Sendable {
    case realisticDepth
    case centerVariation
    case edgeVariation
    case depthProfile
    case depthVariation
    case depthDistribution
    case gradientPattern
    case temporalConsistency
    case microMovement

    /// Whether the check must pass for a live verdict (the first four).
    public var isMandatory: Bool {
        switch self {
        case .realisticDepth, .centerVariation, .edgeVariation, .depthProfile: true
        case .depthVariation, .depthDistribution, .gradientPattern, .temporalConsistency, .microMovement: false
        }
    }

    /// The mandatory checks, in order.
    public static var mandatoryChecks: [LivenessCheck] { allCases.filter(\.isMandatory) }
    /// The optional checks, in order.
    public static var optionalChecks: [LivenessCheck] { allCases.filter { !$0.isMandatory } }
}

/// Which thresholds decided a verdict.
public enum LivenessThresholdSource: String, Sendable, Hashable {
    /// The fixed thresholds of the depth liveness design (no profile was given).
    case fixed
    /// The identifier's personalised thresholds (its ``LivenessProfile``), and the face was live.
    case personalised
    /// The personalised evaluation was not live, so the fixed thresholds were applied to the last frame
    /// (the depth liveness design "fallback"); this verdict is the fixed one, live or not.
    case fixedFallback
}

/// One check's outcome.
public struct LivenessCheckResult: Sendable, Hashable {
    public var check: LivenessCheck
    public var mandatory: Bool
    /// The value that decided the check, in metres: for a one-part check its measured value; for a
    /// two-part check (`depthProfile`, `depthVariation`, `gradientPattern`) the part that decided it:
    /// the first failing part of an AND, the first passing part of an OR, else the first part. When a
    /// temporal check could measure nothing (fewer than two taken frames, or no consecutive pair with
    /// a comparable gradient) it fails with the value that fails it: +infinity for
    /// `temporalConsistency` (no consistency shown), 0 for `microMovement` (no movement shown); `values`
    /// is then empty and `condition` says why. Never NaN, so verdicts compare equal to themselves.
    public var value: Float
    /// Every value the check compared, by name ("mean", "centerStdDev", "edgeStdDev", "stdDev", "range",
    /// "planeResidualRMS", "gradientStdDev", "gradientMean", "largestMeanChange",
    /// "largestPatternChange"; the last two are absent when not measurable).
    public var values: [String: Float]
    /// The condition with the measured values, e.g. "stdDev 0.0123 m < 0.02 m AND range 0.061 m ≥ 0.05 m".
    public var condition: String
    /// The threshold as text, e.g. "0.2...3.0 m", "≥ 0.005 m", "stdDev ≥ 0.02 m OR range ≥ 0.05 m".
    public var threshold: String
    public var passed: Bool

    public init(
        check: LivenessCheck, value: Float, values: [String: Float], condition: String, threshold: String,
        passed: Bool
    ) {
        self.check = check
        self.mandatory = check.isMandatory
        self.value = value
        self.values = values
        self.condition = condition
        self.threshold = threshold
        self.passed = passed
    }
}

/// The outcome of ``DepthLiveness/evaluate(_:profile:)``.
///
/// Live = the last frame has at least 30 valid samples AND all four mandatory checks pass AND at least
/// three of the five optional checks pass.
public struct LivenessVerdict: Sendable, Hashable {
    public var live: Bool
    /// Valid samples in the last frame (0 without frames).
    public var validSamples: Int
    /// The last frame's statistics; nil only without frames.
    public var statistics: DepthStatistics?
    /// How many frames the temporal checks used (see ``DepthLiveness/takenFrames(_:)``).
    public var takenFrames: Int
    public var thresholds: LivenessThresholdSource
    /// Every check, in ``LivenessCheck`` order; empty when the checks could not run (no frames, or fewer
    /// than 30 valid samples in the last frame).
    public var checks: [LivenessCheckResult]
    /// The checks that failed, mandatory and optional, in order (a live verdict may list optional ones).
    public var failed: [LivenessCheck]
    /// Why the face is not live; nil when live. E.g. "insufficient samples: 12 of 100 valid, 30
    /// required", "mandatory check failed: edgeVariation", "only 2 of 5 optional checks passed" (joined
    /// with "; " when both apply).
    public var reason: String?
    /// For a `.fixedFallback` verdict: why the personalised evaluation was not live.
    public var personalisedReason: String?

    public init(
        live: Bool, validSamples: Int, statistics: DepthStatistics?, takenFrames: Int,
        thresholds: LivenessThresholdSource, checks: [LivenessCheckResult], failed: [LivenessCheck], reason: String?,
        personalisedReason: String? = nil
    ) {
        self.live = live
        self.validSamples = validSamples
        self.statistics = statistics
        self.takenFrames = takenFrames
        self.thresholds = thresholds
        self.checks = checks
        self.failed = failed
        self.reason = reason
        self.personalisedReason = personalisedReason
    }

    /// The result of one check, if the checks ran.
    public func result(_ check: LivenessCheck) -> LivenessCheckResult? {
        self.checks.first { $0.check == check }
    }
}

// MARK: - Evaluation

/// The depth liveness checks (the depth liveness design) and their evaluation with fixed or personalised thresholds.
public enum DepthLiveness {
    /// The fixed thresholds of the depth liveness design, metres.
    public enum Fixed {
        public static let realisticDepth: ClosedRange<Float> = 0.2...3.0
        public static let minimumCenterStdDev: Float = 0.005
        public static let minimumEdgeStdDev: Float = 0.02
        public static let minimumStdDev: Float = 0.02
        public static let minimumRange: Float = 0.05
        public static let minimumPlaneResidual: Float = 0.005
        public static let minimumGradientStdDev: Float = 0.001
        public static let maximumGradientMean: Float = 0.5
        public static let maximumMeanChange: Float = 0.1
        public static let minimumPatternChange: Float = 0.0005
    }

    /// A verdict needs at least this many valid samples in the last frame.
    public static let minimumValidSamples = 30
    /// At least this many of the five optional checks must pass.
    public static let minimumOptionalPassed = 3
    /// The temporal checks take a frame only when it is at least this long after the previously taken one.
    public static let temporalIntervalMillis: Int64 = 500
    /// The temporal checks keep at most this many taken frames (the latest): "up to 10 patterns".
    public static let maximumTakenFrames = 10

    /// The central block of `centerStdDev`.
    static let centerRows = 3...6
    static let centerColumns = 3...6

    // MARK: Statistics

    /// The frame's statistics (see ``DepthStatistics`` for the definitions).
    public static func statistics(_ frame: DepthFrame) -> DepthStatistics {
        let n = DepthFrame.gridSize
        let grid = self.validGrid(frame)
        var all: [Double] = []
        var edge: [Double] = []
        var centre: [Double] = []
        all.reserveCapacity(n * n)
        for row in 0..<n {
            for column in 0..<n {
                guard let z = grid[row * n + column] else { continue }
                let value = Double(z)
                all.append(value)
                if row == 0 || row == n - 1 || column == 0 || column == n - 1 { edge.append(value) }
                if self.centerRows.contains(row) && self.centerColumns.contains(column) { centre.append(value) }
            }
        }
        let gradients = self.gradientPattern(grid).compactMap { $0.map(Double.init) }
        let (mean, stdDev) = self.meanAndStdDev(all)
        let (gradientMean, gradientStdDev) = self.meanAndStdDev(gradients)
        let range = all.isEmpty ? 0 : all.max()! - all.min()!
        return DepthStatistics(
            validSamples: all.count, mean: Float(mean), stdDev: Float(stdDev), range: Float(range),
            edgeStdDev: Float(self.meanAndStdDev(edge).stdDev), centerStdDev: Float(self.meanAndStdDev(centre).stdDev),
            gradientMean: Float(gradientMean), gradientStdDev: Float(gradientStdDev))
    }

    /// The RMS residual, metres, of the least-squares plane z = a·column + b·row + c through the frame's
    /// valid samples (the `depthDistribution` measure). When the valid cells all lie on one line the
    /// plane is underdetermined and the best line along it is used; nil without valid samples.
    public static func planeResidualRMS(_ frame: DepthFrame) -> Float? {
        let n = DepthFrame.gridSize
        let grid = self.validGrid(frame)
        var points: [(x: Double, y: Double, z: Double)] = []
        for row in 0..<n {
            for column in 0..<n {
                if let z = grid[row * n + column] { points.append((Double(column), Double(row), Double(z))) }
            }
        }
        guard !points.isEmpty else { return nil }
        let count = Double(points.count)
        let mx = points.reduce(0) { $0 + $1.x } / count
        let my = points.reduce(0) { $0 + $1.y } / count
        let mz = points.reduce(0) { $0 + $1.z } / count
        var sxx = 0.0
        var syy = 0.0
        var sxy = 0.0
        var sxz = 0.0
        var syz = 0.0
        for p in points {
            let x = p.x - mx
            let y = p.y - my
            let z = p.z - mz
            sxx += x * x
            syy += y * y
            sxy += x * y
            sxz += x * z
            syz += y * z
        }
        // Centred normal equations: [sxx sxy; sxy syy]·[a b]ᵀ = [sxz syz]ᵀ, c = mz (at the centroid).
        var a = 0.0
        var b = 0.0
        let determinant = sxx * syy - sxy * sxy
        if determinant > 1e-9 * max(1, sxx * syy) {
            a = (sxz * syy - syz * sxy) / determinant
            b = (syz * sxx - sxz * sxy) / determinant
        } else if sxx > 0 {
            a = sxz / sxx
        } else if syy > 0 {
            b = syz / syy
        }
        var squares = 0.0
        for p in points {
            let residual = (p.z - mz) - a * (p.x - mx) - b * (p.y - my)
            squares += residual * residual
        }
        return Float((squares / count).squareRoot())
    }

    /// The frames the temporal checks use, in capture order: the first frame, then each frame whose
    /// timestamp is at least ``temporalIntervalMillis`` after the previously TAKEN one (so frames that
    /// come sooner, or with an earlier timestamp, are skipped); of those, the last
    /// ``maximumTakenFrames``.
    public static func takenFrames(_ frames: [DepthFrame]) -> [DepthFrame] {
        var taken: [DepthFrame] = []
        for frame in frames {
            if let previous = taken.last {
                let later = frame.timestampMillis > previous.timestampMillis
                let (elapsed, overflow) = frame.timestampMillis.subtractingReportingOverflow(previous.timestampMillis)
                if !later || (!overflow && elapsed < self.temporalIntervalMillis) { continue }
            }
            taken.append(frame)
        }
        return Array(taken.suffix(self.maximumTakenFrames))
    }

    /// A frame's gradient pattern: |z₁ − z₂| for every adjacent pair of cells, nil where either cell is
    /// invalid. Layout: the 90 horizontal pairs row by row ((r, c)–(r, c+1), c < 9), then the 90 vertical
    /// pairs ((r, c)–(r+1, c), r < 9) row by row.
    static func gradientPattern(_ frame: DepthFrame) -> [Float?] {
        self.gradientPattern(self.validGrid(frame))
    }

    // MARK: Evaluate

    /// The liveness verdict of a capture: `frames` in capture order; the per-frame checks use the last
    /// frame, the temporal checks the taken frames.
    ///
    /// Without a profile the fixed thresholds decide (`.fixed`). With one, the per-frame checks use its
    /// personalised ranges (see ``LivenessProfile``; `depthDistribution` and the temporal checks keep
    /// their fixed rules); if that verdict is live it is returned as `.personalised`, otherwise the
    /// capture is re-evaluated with the fixed thresholds (still on the last frame, the temporal checks
    /// still on the sequence) and that verdict is returned as `.fixedFallback`, live or not, with the
    /// personalised reason in `personalisedReason`.
    public static func evaluate(_ frames: [DepthFrame], profile: LivenessProfile? = nil) -> LivenessVerdict {
        guard let profile else { return self.evaluate(frames, bounds: .fixed) }
        let personalised = self.evaluate(frames, bounds: .personalised(profile))
        if personalised.live { return personalised }
        var fallback = self.evaluate(frames, bounds: .fixed)
        fallback.thresholds = .fixedFallback
        fallback.personalisedReason = personalised.reason
        return fallback
    }

    /// The measures of the temporal checks.
    struct TemporalMeasures: Hashable {
        var takenFrames: Int
        /// The largest |mean depth difference| over consecutive taken frames (infinite when a taken frame
        /// has no valid sample: nothing shows it is the same object); nil with fewer than 2 taken frames.
        var largestMeanChange: Float?
        /// The largest mean absolute gradient-pattern difference over consecutive taken frames (pairs
        /// with no adjacent-cell pair valid in both are skipped); nil when there is none.
        var largestPatternChange: Float?
    }

    static func temporalMeasures(_ frames: [DepthFrame]) -> TemporalMeasures {
        let taken = self.takenFrames(frames)
        var measures = TemporalMeasures(takenFrames: taken.count)
        guard taken.count >= 2 else { return measures }
        let means = taken.map { frame -> Float? in
            let statistics = self.statistics(frame)
            return statistics.validSamples > 0 ? statistics.mean : nil
        }
        let patterns = taken.map { self.gradientPattern($0) }
        var largestMeanChange: Float = 0
        var largestPatternChange: Float?
        for i in 1..<taken.count {
            if let previous = means[i - 1], let current = means[i] {
                largestMeanChange = max(largestMeanChange, abs(current - previous))
            } else {
                largestMeanChange = .infinity
            }
            var sum = 0.0
            var count = 0
            for (a, b) in zip(patterns[i - 1], patterns[i]) {
                guard let a, let b else { continue }
                sum += abs(Double(a) - Double(b))
                count += 1
            }
            if count > 0 {
                let change = Float(sum / Double(count))
                largestPatternChange = max(largestPatternChange ?? change, change)
            }
        }
        measures.largestMeanChange = largestMeanChange
        measures.largestPatternChange = largestPatternChange
        return measures
    }

    /// Fixed or personalised bounds for the per-frame checks.
    enum Bounds {
        case fixed
        case personalised(LivenessProfile)
    }

    static func evaluate(_ frames: [DepthFrame], bounds: Bounds) -> LivenessVerdict {
        let thresholds: LivenessThresholdSource
        switch bounds {
        case .fixed: thresholds = .fixed
        case .personalised: thresholds = .personalised
        }
        guard let last = frames.last else {
            return LivenessVerdict(
                live: false, validSamples: 0, statistics: nil, takenFrames: 0, thresholds: thresholds, checks: [],
                failed: [], reason: "no depth frames")
        }
        return self.verdict(
            last: self.statistics(last), planeResidual: self.planeResidualRMS(last) ?? 0,
            temporal: self.temporalMeasures(frames), bounds: bounds)
    }

    /// The verdict from measured values (the decision rules, separate from the measuring).
    static func verdict(last: DepthStatistics, planeResidual: Float, temporal: TemporalMeasures, bounds: Bounds)
        -> LivenessVerdict
    {
        let thresholds: LivenessThresholdSource
        switch bounds {
        case .fixed: thresholds = .fixed
        case .personalised: thresholds = .personalised
        }
        guard last.validSamples >= self.minimumValidSamples else {
            let total = DepthFrame.gridSize * DepthFrame.gridSize
            return LivenessVerdict(
                live: false, validSamples: last.validSamples, statistics: last, takenFrames: temporal.takenFrames,
                thresholds: thresholds, checks: [], failed: [],
                reason: "insufficient samples: \(last.validSamples) of \(total) valid, \(self.minimumValidSamples) required")
        }
        let checks = self.checks(last: last, planeResidual: planeResidual, temporal: temporal, bounds: bounds)
        let failed = checks.filter { !$0.passed }.map(\.check)
        let failedMandatory = failed.filter(\.isMandatory)
        let optionalPassed = checks.filter { !$0.mandatory && $0.passed }.count
        var reasons: [String] = []
        if !failedMandatory.isEmpty {
            let names = failedMandatory.map(\.rawValue).joined(separator: ", ")
            reasons.append(failedMandatory.count == 1 ? "mandatory check failed: \(names)" : "mandatory checks failed: \(names)")
        }
        if optionalPassed < self.minimumOptionalPassed {
            reasons.append("only \(optionalPassed) of \(LivenessCheck.optionalChecks.count) optional checks passed")
        }
        return LivenessVerdict(
            live: reasons.isEmpty, validSamples: last.validSamples, statistics: last, takenFrames: temporal.takenFrames,
            thresholds: thresholds, checks: checks, failed: failed,
            reason: reasons.isEmpty ? nil : reasons.joined(separator: "; "))
    }

    /// The nine check results, in order.
    static func checks(last s: DepthStatistics, planeResidual: Float, temporal: TemporalMeasures, bounds: Bounds)
        -> [LivenessCheckResult]
    {
        let realistic: Bound
        let centre: Bound
        let edge: Bound
        let stdDev: Bound
        let range: Bound
        let gradientStdDev: Bound
        let gradientMean: Bound
        switch bounds {
        case .fixed:
            realistic = .within(Fixed.realisticDepth)
            centre = .atLeast(Fixed.minimumCenterStdDev)
            edge = .atLeast(Fixed.minimumEdgeStdDev)
            stdDev = .atLeast(Fixed.minimumStdDev)
            range = .atLeast(Fixed.minimumRange)
            gradientStdDev = .atLeast(Fixed.minimumGradientStdDev)
            gradientMean = .atMost(Fixed.maximumGradientMean)
        case .personalised(let profile):
            realistic = .within(profile.realisticDepth)
            centre = .within(profile.centerStdDev)
            edge = .within(profile.edgeStdDev)
            stdDev = .within(profile.stdDev)
            range = .within(profile.range)
            gradientStdDev = .within(profile.gradientStdDev)
            gradientMean = .within(profile.gradientMean)
        }
        var results: [LivenessCheckResult] = []
        results.append(self.single(.realisticDepth, "mean", s.mean, realistic))
        results.append(self.single(.centerVariation, "centerStdDev", s.centerStdDev, centre))
        results.append(self.single(.edgeVariation, "edgeStdDev", s.edgeStdDev, edge))
        results.append(self.pair(.depthProfile, ("stdDev", s.stdDev, stdDev), ("range", s.range, range), all: false))
        results.append(self.pair(.depthVariation, ("stdDev", s.stdDev, stdDev), ("range", s.range, range), all: true))
        results.append(
            self.single(.depthDistribution, "planeResidualRMS", planeResidual, .atLeast(Fixed.minimumPlaneResidual)))
        results.append(
            self.pair(
                .gradientPattern, ("gradientStdDev", s.gradientStdDev, gradientStdDev),
                ("gradientMean", s.gradientMean, gradientMean), all: true))
        results.append(
            self.temporal(
                .temporalConsistency, "largestMeanChange", temporal.largestMeanChange,
                .atMost(Fixed.maximumMeanChange), frames: temporal.takenFrames, unmeasured: .infinity))
        results.append(
            self.temporal(
                .microMovement, "largestPatternChange", temporal.largestPatternChange,
                .atLeast(Fixed.minimumPatternChange), frames: temporal.takenFrames, unmeasured: 0))
        return results
    }

    // MARK: Helpers

    /// A one-sided or two-sided bound on a measured value.
    enum Bound {
        case atLeast(Float)
        case atMost(Float)
        case within(ClosedRange<Float>)

        func holds(_ value: Float) -> Bool {
            switch self {
            case .atLeast(let minimum): value >= minimum
            case .atMost(let maximum): value <= maximum
            case .within(let range): range.contains(value)
            }
        }

        /// E.g. "≥ 0.005 m", "≤ 0.5 m", "0.2...3.0 m".
        var text: String {
            switch self {
            case .atLeast(let minimum): "≥ \(DepthLiveness.metres(minimum)) m"
            case .atMost(let maximum): "≤ \(DepthLiveness.metres(maximum)) m"
            case .within(let range): "\(DepthLiveness.metres(range.lowerBound))...\(DepthLiveness.metres(range.upperBound)) m"
            }
        }

        /// E.g. "stdDev 0.0123 m < 0.02 m", "mean 0.45 m in 0.2...3.0 m".
        func describe(_ name: String, _ value: Float) -> String {
            let holds = self.holds(value)
            let measured = "\(name) \(DepthLiveness.metres(value)) m"
            switch self {
            case .atLeast(let minimum): return "\(measured) \(holds ? "≥" : "<") \(DepthLiveness.metres(minimum)) m"
            case .atMost(let maximum): return "\(measured) \(holds ? "≤" : ">") \(DepthLiveness.metres(maximum)) m"
            case .within: return "\(measured) \(holds ? "in" : "outside") \(self.text)"
            }
        }
    }

    private static func single(_ check: LivenessCheck, _ name: String, _ value: Float, _ bound: Bound)
        -> LivenessCheckResult
    {
        LivenessCheckResult(
            check: check, value: value, values: [name: value], condition: bound.describe(name, value),
            threshold: bound.text, passed: bound.holds(value))
    }

    /// A two-part check: both parts (`all`) or either part.
    private static func pair(
        _ check: LivenessCheck, _ first: (String, Float, Bound), _ second: (String, Float, Bound), all: Bool
    ) -> LivenessCheckResult {
        let firstHolds = first.2.holds(first.1)
        let secondHolds = second.2.holds(second.1)
        let passed = all ? firstHolds && secondHolds : firstHolds || secondHolds
        let deciding: Float
        if all {
            deciding = !firstHolds ? first.1 : (!secondHolds ? second.1 : first.1)
        } else {
            deciding = firstHolds ? first.1 : (secondHolds ? second.1 : first.1)
        }
        let joiner = all ? " AND " : " OR "
        return LivenessCheckResult(
            check: check, value: deciding, values: [first.0: first.1, second.0: second.1],
            condition: first.2.describe(first.0, first.1) + joiner + second.2.describe(second.0, second.1),
            threshold: "\(first.0) \(first.2.text)\(joiner)\(second.0) \(second.2.text)", passed: passed)
    }

    private static func temporal(
        _ check: LivenessCheck, _ name: String, _ value: Float?, _ bound: Bound, frames: Int, unmeasured: Float
    ) -> LivenessCheckResult {
        let threshold = "\(name) \(bound.text) over ≥ 2 frames ≥ \(self.temporalIntervalMillis) ms apart"
        guard let value else {
            let condition =
                frames < 2
                ? "\(frames) frame\(frames == 1 ? "" : "s") ≥ \(self.temporalIntervalMillis) ms apart, 2 required"
                : "no consecutive frames with comparable samples"
            return LivenessCheckResult(
                check: check, value: unmeasured, values: [:], condition: condition, threshold: threshold, passed: false)
        }
        return LivenessCheckResult(
            check: check, value: value, values: [name: value],
            condition: "\(bound.describe(name, value)) over \(frames) frames", threshold: threshold,
            passed: bound.holds(value))
    }

    /// The valid depths by cell (row-major), nil where invalid or missing.
    static func validGrid(_ frame: DepthFrame) -> [Float?] {
        let count = DepthFrame.gridSize * DepthFrame.gridSize
        return (0..<count).map { i in
            guard i < frame.depths.count else { return nil }
            let z = frame.depths[i]
            return z.isFinite && z > 0 ? z : nil
        }
    }

    static func gradientPattern(_ grid: [Float?]) -> [Float?] {
        let n = DepthFrame.gridSize
        var pattern: [Float?] = []
        pattern.reserveCapacity(2 * n * (n - 1))
        for row in 0..<n {
            for column in 0..<(n - 1) {
                pattern.append(self.difference(grid[row * n + column], grid[row * n + column + 1]))
            }
        }
        for row in 0..<(n - 1) {
            for column in 0..<n {
                pattern.append(self.difference(grid[row * n + column], grid[(row + 1) * n + column]))
            }
        }
        return pattern
    }

    private static func difference(_ a: Float?, _ b: Float?) -> Float? {
        guard let a, let b else { return nil }
        return Float(abs(Double(a) - Double(b)))
    }

    /// Mean and population standard deviation (two passes); 0 and 0 without values.
    static func meanAndStdDev(_ values: [Double]) -> (mean: Double, stdDev: Double) {
        guard !values.isEmpty else { return (0, 0) }
        let count = Double(values.count)
        let mean = values.reduce(0, +) / count
        let variance = values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / count
        return (mean, variance.squareRoot())
    }

    /// A length in metres as text, rounded to 5 decimals with trailing zeros dropped (keeping one):
    /// 0.2 → "0.2", 3 → "3.0", 0.0005 → "0.0005". No Foundation formatter in this module.
    static func metres(_ value: Float) -> String {
        guard value.isFinite else { return value.isNaN ? "nan" : (value < 0 ? "-inf" : "inf") }
        let scaled = (abs(Double(value)) * 100_000).rounded()
        guard scaled < 1e15 else { return "\(value)" }
        let units = Int64(scaled)
        var fraction = String(units % 100_000)
        fraction = String(repeating: "0", count: 5 - fraction.count) + fraction
        while fraction.count > 1 && fraction.hasSuffix("0") { fraction.removeLast() }
        let sign = value < 0 && units != 0 ? "-" : ""
        return "\(sign)\(units / 100_000).\(fraction)"
    }
}
