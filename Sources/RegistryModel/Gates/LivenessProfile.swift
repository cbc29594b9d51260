// Liveness enrolment and personalised thresholds (the liveness enrolment design, the capture-gates design): an identifier captures depth
// frames over seven poses; the statistics of those frames become its personalised check ranges.

/// The poses of liveness enrolment (the liveness enrolment design), each captured over several frames.
public enum EnrolmentPose: String, CaseIterable, Sendable {
    case center, left, right, up, down, closer, further
}

/// Why ``LivenessProfile/enrol(_:k:minimumFramesPerPose:)`` refused the frames. Names poses, frame
/// indices and checks, never depth values (only aggregate means).
public enum LivenessEnrolmentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// k must be finite and > 0.
    case invalidK(Float)
    /// The minimum number of frames per pose must be ≥ 1.
    case invalidMinimumFramesPerPose(Int)
    /// A pose has fewer frames than required (`count` 0 when the pose is missing).
    case tooFewFrames(pose: EnrolmentPose, count: Int, required: Int)
    /// A frame (index in its pose's list) has fewer than 30 valid samples.
    case insufficientSamples(pose: EnrolmentPose, frame: Int, validSamples: Int, required: Int)
    /// A frame fails fixed mandatory per-frame checks (realisticDepth, centerVariation, edgeVariation,
    /// depthProfile): it does not look like a face, so it must not widen the profile.
    case checksFailed(pose: EnrolmentPose, frame: Int, failed: [LivenessCheck])
    /// The closer-pose frames are on average not closer than the further-pose frames.
    case posesInconsistent(closerMean: Float, furtherMean: Float)

    public var description: String {
        switch self {
        case .invalidK(let k):
            "k must be within (0, \(LivenessProfile.maximumK)] (got \(k))"
        case .invalidMinimumFramesPerPose(let minimum):
            "the minimum number of frames per pose must be at least 1 (got \(minimum))"
        case .tooFewFrames(let pose, let count, let required):
            "pose '\(pose.rawValue)' has \(count) frame\(count == 1 ? "" : "s"), \(required) required"
        case .insufficientSamples(let pose, let frame, let validSamples, let required):
            "pose '\(pose.rawValue)' frame \(frame) has \(validSamples) valid depth samples, \(required) required"
        case .checksFailed(let pose, let frame, let failed):
            "pose '\(pose.rawValue)' frame \(frame) fails \(failed.map(\.rawValue).joined(separator: ", "))"
        case .posesInconsistent(let closer, let further):
            "the 'closer' pose (mean depth \(DepthLiveness.metres(closer)) m) is not closer than the 'further' pose"
                + " (\(DepthLiveness.metres(further)) m)"
        }
    }
}

/// An identifier's personalised liveness thresholds (the liveness enrolment design).
///
/// For each of the seven statistics of ``DepthStatistics`` the profile holds the range
/// mean ± k·std (population std) of that statistic over ALL enrolment frames, every pose together,
/// with the lower bound clamped at 0. `realisticDepth` is instead
/// [min of the closer-pose frame means − 0.1 m, max of the further-pose frame means + 0.1 m],
/// never wider than the fixed 0.2...3.0. The `mean` range is recorded (and reported) but no check uses
/// it: `realisticDepth` is the personalised distance rule.
///
/// How ``DepthLiveness/evaluate(_:profile:)`` uses it (value within the range, both ends inclusive):
/// realisticDepth: mean within `realisticDepth`; centerVariation: centerStdDev within `centerStdDev`;
/// edgeVariation: edgeStdDev within `edgeStdDev`; depthProfile: stdDev within `stdDev` OR range within
/// `range`; depthVariation: both; gradientPattern: gradientStdDev AND gradientMean within theirs.
/// depthDistribution, temporalConsistency and microMovement keep their fixed rules.
public struct LivenessProfile: Sendable, Hashable {
    /// The largest k accepted: ranges of ±10 standard deviations accept nearly anything already.
    public static let maximumK: Float = 10
    /// Added below the closest and above the furthest enrolled mean depth.
    public static let realisticDepthMargin: Float = 0.1

    public var mean: ClosedRange<Float>
    public var stdDev: ClosedRange<Float>
    public var range: ClosedRange<Float>
    public var edgeStdDev: ClosedRange<Float>
    public var centerStdDev: ClosedRange<Float>
    public var gradientMean: ClosedRange<Float>
    public var gradientStdDev: ClosedRange<Float>
    /// The personalised distance rule, metres, within 0.2...3.0.
    public var realisticDepth: ClosedRange<Float>
    /// The k of mean ± k·std.
    public var k: Float
    /// How many enrolment frames the ranges were computed from.
    public var frameCount: Int

    /// A profile from known ranges (as stored); ``enrol(_:k:minimumFramesPerPose:)`` derives one.
    public init(
        mean: ClosedRange<Float>, stdDev: ClosedRange<Float>, range: ClosedRange<Float>,
        edgeStdDev: ClosedRange<Float>, centerStdDev: ClosedRange<Float>, gradientMean: ClosedRange<Float>,
        gradientStdDev: ClosedRange<Float>, realisticDepth: ClosedRange<Float>, k: Float, frameCount: Int
    ) {
        self.mean = mean
        self.stdDev = stdDev
        self.range = range
        self.edgeStdDev = edgeStdDev
        self.centerStdDev = centerStdDev
        self.gradientMean = gradientMean
        self.gradientStdDev = gradientStdDev
        self.realisticDepth = realisticDepth
        self.k = k
        self.frameCount = frameCount
    }

    // MARK: Enrolment

    /// Derives a profile from frames captured over the enrolment poses.
    ///
    /// Refuses, in this order: k not finite or ≤ 0; `minimumFramesPerPose` < 1; a pose (in
    /// ``EnrolmentPose`` order) with fewer frames than `minimumFramesPerPose`; a frame (poses in order,
    /// frames by index) with fewer than 30 valid samples, or failing a fixed mandatory per-frame check
    /// (realisticDepth, centerVariation, edgeVariation, depthProfile); closer-pose frames whose average
    /// mean depth is not below the further-pose frames' (which also guarantees a non-empty realistic range).
    /// The temporal checks play no part: enrolment frames need no timestamps spacing.
    public static func enrol(
        _ frames: [EnrolmentPose: [DepthFrame]], k: Float = GalleryConfiguration.defaultLivenessK, minimumFramesPerPose: Int = 5
    ) throws(LivenessEnrolmentError) -> LivenessProfile {
        // Bounded so the ranges stay finite (a huge k would overflow them and the stored profile could
        // not be read back).
        guard k.isFinite && k > 0 && k <= Self.maximumK else { throw .invalidK(k) }
        guard minimumFramesPerPose >= 1 else { throw .invalidMinimumFramesPerPose(minimumFramesPerPose) }
        for pose in EnrolmentPose.allCases {
            let count = frames[pose]?.count ?? 0
            guard count >= minimumFramesPerPose else {
                throw .tooFewFrames(pose: pose, count: count, required: minimumFramesPerPose)
            }
        }
        var all: [DepthStatistics] = []
        var means: [EnrolmentPose: [Float]] = [:]
        for pose in EnrolmentPose.allCases {
            for (index, frame) in (frames[pose] ?? []).enumerated() {
                let statistics = DepthLiveness.statistics(frame)
                guard statistics.validSamples >= DepthLiveness.minimumValidSamples else {
                    throw .insufficientSamples(
                        pose: pose, frame: index, validSamples: statistics.validSamples,
                        required: DepthLiveness.minimumValidSamples)
                }
                let failed = DepthLiveness.checks(
                    last: statistics, planeResidual: 0, temporal: .init(takenFrames: 0), bounds: .fixed
                ).filter { $0.mandatory && !$0.passed }.map(\.check)
                guard failed.isEmpty else { throw .checksFailed(pose: pose, frame: index, failed: failed) }
                all.append(statistics)
                means[pose, default: []].append(statistics.mean)
            }
        }
        let closer = means[.closer] ?? []
        let further = means[.further] ?? []
        let closerMean = Float(DepthLiveness.meanAndStdDev(closer.map(Double.init)).mean)
        let furtherMean = Float(DepthLiveness.meanAndStdDev(further.map(Double.init)).mean)
        guard closerMean < furtherMean else { throw .posesInconsistent(closerMean: closerMean, furtherMean: furtherMean) }
        let fixed = DepthLiveness.Fixed.realisticDepth
        let lower = max(fixed.lowerBound, closer.min()! - self.realisticDepthMargin)
        let upper = min(fixed.upperBound, further.max()! + self.realisticDepthMargin)

        func band(_ statistic: (DepthStatistics) -> Float) -> ClosedRange<Float> {
            let (mean, std) = DepthLiveness.meanAndStdDev(all.map { Double(statistic($0)) })
            let low = Float(max(0, mean - Double(k) * std))
            let high = max(low, Float(mean + Double(k) * std))
            return low...high
        }
        return LivenessProfile(
            mean: band(\.mean), stdDev: band(\.stdDev), range: band(\.range), edgeStdDev: band(\.edgeStdDev),
            centerStdDev: band(\.centerStdDev), gradientMean: band(\.gradientMean),
            gradientStdDev: band(\.gradientStdDev), realisticDepth: lower...upper, k: k, frameCount: all.count)
    }
}
