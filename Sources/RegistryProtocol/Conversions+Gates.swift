import RegistryModel
import SwiftProtobuf

// Conversions of the capture-gate types (README, capture gates): capture metadata, depth frames, quality
// assessments, liveness verdicts and profiles.

extension Registry_V1_FaceBox {
    public init(_ box: FaceBox) {
        self.init()
        self.x = box.x
        self.y = box.y
        self.width = box.width
        self.height = box.height
    }
}

extension FaceBox {
    public init(_ message: Registry_V1_FaceBox) {
        self.init(x: message.x, y: message.y, width: message.width, height: message.height)
    }
}

extension Registry_V1_CaptureMetadata {
    public init(_ capture: CaptureMetadata) {
        self.init()
        if let value = capture.detectorConfidence { self.detectorConfidence = value }
        if let value = capture.faceBox { self.faceBox = Registry_V1_FaceBox(value) }
        if let value = capture.imageWidth { self.imageWidth = UInt32(clamping: value) }
        if let value = capture.imageHeight { self.imageHeight = UInt32(clamping: value) }
        if let value = capture.yaw { self.yaw = value }
        if let value = capture.pitch { self.pitch = value }
        if let value = capture.roll { self.roll = value }
        if let value = capture.facePixelSize { self.facePixelSize = value }
        if let value = capture.sharpness { self.sharpness = value }
        if let value = capture.brightnessMean { self.brightnessMean = value }
        if let value = capture.brightnessStdDev { self.brightnessStdDev = value }
    }
}

extension CaptureMetadata {
    public init(_ message: Registry_V1_CaptureMetadata) {
        self.init(
            detectorConfidence: message.hasDetectorConfidence ? message.detectorConfidence : nil,
            faceBox: message.hasFaceBox ? FaceBox(message.faceBox) : nil,
            imageWidth: message.hasImageWidth ? Int(message.imageWidth) : nil,
            imageHeight: message.hasImageHeight ? Int(message.imageHeight) : nil,
            yaw: message.hasYaw ? message.yaw : nil, pitch: message.hasPitch ? message.pitch : nil,
            roll: message.hasRoll ? message.roll : nil,
            facePixelSize: message.hasFacePixelSize ? message.facePixelSize : nil,
            sharpness: message.hasSharpness ? message.sharpness : nil,
            brightnessMean: message.hasBrightnessMean ? message.brightnessMean : nil,
            brightnessStdDev: message.hasBrightnessStdDev ? message.brightnessStdDev : nil)
    }
}

extension Registry_V1_DepthFrame {
    public init(_ frame: DepthFrame) {
        self.init()
        self.depths = frame.depths
        self.timestampMillis = frame.timestampMillis
        if let box = frame.faceBox { self.faceBox = Registry_V1_FaceBox(box) }
    }
}

extension DepthFrame {
    public init(_ message: Registry_V1_DepthFrame) {
        self.init(
            depths: message.depths, timestampMillis: message.timestampMillis,
            faceBox: message.hasFaceBox ? FaceBox(message.faceBox) : nil)
    }
}

extension Registry_V1_QualityAssessment {
    public init(_ assessment: QualityAssessment) {
        self.init()
        self.score = assessment.score
        self.rating = assessment.rating.rawValue
        // In the fixed component order, so the bytes are deterministic.
        self.components = QualityComponent.allCases.compactMap { component in
            assessment.components[component].map { value in
                .with {
                    $0.name = component.rawValue
                    $0.value = value
                }
            }
        }
        self.weakest = assessment.weakest.rawValue
    }
}

extension QualityAssessment {
    public init?(_ message: Registry_V1_QualityAssessment) {
        guard let weakest = QualityComponent(rawValue: message.weakest) else { return nil }
        var components: [QualityComponent: Float] = [:]
        for component in message.components {
            if let key = QualityComponent(rawValue: component.name) { components[key] = component.value }
        }
        self.init(score: message.score, rating: QualityRating(score: message.score), components: components, weakest: weakest)
    }
}

extension Registry_V1_LivenessVerdict {
    public init(_ verdict: LivenessVerdict) {
        self.init()
        self.live = verdict.live
        self.validSamples = UInt32(clamping: verdict.validSamples)
        self.thresholds = verdict.thresholds.rawValue
        self.checks = verdict.checks.map { result in
            .with {
                $0.check = result.check.rawValue
                $0.mandatory = result.mandatory
                $0.value = result.value
                $0.threshold = result.threshold
                $0.passed = result.passed
                $0.condition = result.condition
            }
        }
        self.failed = verdict.failed.map(\.rawValue)
        self.reason = verdict.reason ?? ""
    }
}

extension LivenessVerdict {
    /// A verdict as reported on the wire (per-check values and frame statistics are not carried).
    public init(_ message: Registry_V1_LivenessVerdict) {
        let checks = message.checks.compactMap { check -> LivenessCheckResult? in
            guard let kind = LivenessCheck(rawValue: check.check) else { return nil }
            return LivenessCheckResult(
                check: kind, value: check.value, values: [:], condition: check.condition, threshold: check.threshold,
                passed: check.passed)
        }
        self.init(
            live: message.live, validSamples: Int(message.validSamples), statistics: nil, takenFrames: 0,
            thresholds: LivenessThresholdSource(rawValue: message.thresholds) ?? .fixed, checks: checks,
            failed: message.failed.compactMap(LivenessCheck.init(rawValue:)), reason: message.reason.isEmpty ? nil : message.reason)
    }
}

extension Registry_V1_LivenessProfile {
    public init(_ profile: LivenessProfile) {
        self.init()
        let ranges: [(String, ClosedRange<Float>)] = [
            ("mean", profile.mean), ("stdDev", profile.stdDev), ("range", profile.range), ("edgeStdDev", profile.edgeStdDev),
            ("centerStdDev", profile.centerStdDev), ("gradientMean", profile.gradientMean),
            ("gradientStdDev", profile.gradientStdDev),
        ]
        self.ranges = ranges.map { name, range in
            .with {
                $0.statistic = name
                $0.lower = range.lowerBound
                $0.upper = range.upperBound
            }
        }
        self.realisticDepthLower = profile.realisticDepth.lowerBound
        self.realisticDepthUpper = profile.realisticDepth.upperBound
        self.k = profile.k
        self.frames = UInt32(clamping: profile.frameCount)
    }
}

extension LivenessProfile {
    /// A profile from the wire; nil when a statistic is missing or a range is inverted.
    public init?(_ message: Registry_V1_LivenessProfile) {
        var ranges: [String: ClosedRange<Float>] = [:]
        for range in message.ranges where range.lower <= range.upper { ranges[range.statistic] = range.lower...range.upper }
        guard let mean = ranges["mean"], let stdDev = ranges["stdDev"], let range = ranges["range"],
            let edge = ranges["edgeStdDev"], let center = ranges["centerStdDev"], let gradientMean = ranges["gradientMean"],
            let gradientStdDev = ranges["gradientStdDev"], message.realisticDepthLower <= message.realisticDepthUpper
        else { return nil }
        self.init(
            mean: mean, stdDev: stdDev, range: range, edgeStdDev: edge, centerStdDev: center, gradientMean: gradientMean,
            gradientStdDev: gradientStdDev, realisticDepth: message.realisticDepthLower...message.realisticDepthUpper,
            k: message.k, frameCount: Int(message.frames))
    }
}

extension Registry_V1_LivenessProfileEntry {
    public init(_ entry: ProfileEntry) {
        self.init()
        self.identifier = entry.identifier
        self.profile = Registry_V1_LivenessProfile(entry.profile)
    }
}

extension ProfileEntry {
    /// An entry from the wire; nil when its profile does not convert (``LivenessProfile/init(_:)``).
    public init?(_ message: Registry_V1_LivenessProfileEntry) {
        guard let profile = LivenessProfile(message.profile) else { return nil }
        self.init(identifier: message.identifier, profile: profile)
    }
}

extension Registry_V1_AuditEntry {
    public init(_ entry: AuditEntry) {
        self.init()
        self.timeMicros = entry.time
        self.uid = entry.uid
        self.pid = entry.pid
        self.operation = entry.operation
        self.gallery = entry.gallery
        self.identifiers = entry.identifiers
        self.outcome = entry.outcome.rawValue
        if let score = entry.score { self.score = score }
        self.errorCode = entry.errorCode ?? ""
        self.count = entry.count
    }
}

extension AuditEntry {
    public init(_ message: Registry_V1_AuditEntry) {
        self.init(
            time: message.timeMicros, uid: message.uid, pid: message.pid, operation: message.operation, gallery: message.gallery,
            identifiers: message.identifiers, outcome: AuditOutcome(rawValue: message.outcome), score: message.hasScore ? message.score : nil,
            errorCode: message.errorCode.isEmpty ? nil : message.errorCode, count: max(1, message.count))
    }
}
