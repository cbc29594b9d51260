// The capture quality score of the capture quality design (the capture-gates design, quality gate): a weighted mean of six
// normalised components computed from the client detector's `CaptureMetadata`.
//
// Every normalisation maps its input linearly between a 0.0 point and a 1.0 point and clamps to
// 0...1; the points are the product's decision and are documented on each `normalised…` function.
// Arithmetic is done in `Double` and rounded once to `Float`, so round inputs (a midpoint, an edge)
// give exact results.

/// One component of the capture quality score, with its weight in the score.
public enum QualityComponent: String, Sendable, Hashable, CaseIterable {
    /// The detector's confidence (weight 0.30).
    case confidence
    /// The face's share of the image area (weight 0.25).
    case size
    /// Head pose deviation from frontal (weight 0.20).
    case angle
    /// The face's size in pixels (weight 0.15).
    case resolution
    /// Variance of the Laplacian of the face region (weight 0.05, optional).
    case sharpness
    /// Brightness and contrast of the face region (weight 0.05, optional).
    case lighting

    /// The component's weight in the score: 0.30, 0.25, 0.20, 0.15, 0.05, 0.05 (they sum to 1).
    /// When optional components are absent the weights of those present are renormalised.
    public var weight: Float { Float(self.exactWeight) }

    /// The weight as a `Double` literal, so that the score is computed without `Float` rounding.
    var exactWeight: Double {
        switch self {
        case .confidence: 0.30
        case .size: 0.25
        case .angle: 0.20
        case .resolution: 0.15
        case .sharpness: 0.05
        case .lighting: 0.05
        }
    }

    /// Sharpness and lighting are the capture quality design's "future" components: used when their inputs are present.
    public var isOptional: Bool { self == .sharpness || self == .lighting }
}

/// The rating band of a quality score.
public enum QualityRating: String, Sendable, Hashable {
    case excellent, good, fair, poor

    /// excellent ≥ 0.8, good ≥ 0.6, fair ≥ 0.4, poor below; a score exactly on an edge takes the
    /// higher band (0.8 is excellent). A NaN score is poor.
    public init(score: Float) {
        if score >= 0.8 {
            self = .excellent
        } else if score >= 0.6 {
            self = .good
        } else if score >= 0.4 {
            self = .fair
        } else {
            self = .poor
        }
    }
}

/// The quality of one capture.
public struct QualityAssessment: Sendable, Hashable {
    /// The weighted mean of the present components, weights renormalised over them: 0...1.
    public var score: Float
    /// The band of `score`.
    public var rating: QualityRating
    /// Each present component's normalised value, 0...1. The four core components are always
    /// present; sharpness and lighting only when their inputs were given.
    public var components: [QualityComponent: Float]
    /// The component with the lowest normalised value; on a tie the one with the larger weight (it
    /// costs the score most), then the first in declaration order.
    public var weakest: QualityComponent

    public init(score: Float, rating: QualityRating, components: [QualityComponent: Float], weakest: QualityComponent) {
        self.score = score
        self.rating = rating
        self.components = components
        self.weakest = weakest
    }
}

/// The weighted face capture quality score (the capture quality design).
public enum CaptureQuality {
    // MARK: Normalisation points (input at 0.0, input at 1.0)

    /// Face area fraction of the image: 0.0 at ≤ 2 %, 1.0 at ≥ 20 %.
    static let sizeRange: (zero: Double, one: Double) = (0.02, 0.20)
    /// Largest of |yaw|, |pitch|, |roll| in degrees: 1.0 at 0°, 0.0 at ≥ 45°.
    static let maximumAngle: Double = 45
    /// Face pixel size: 0.0 at ≤ 32 px, 1.0 at ≥ 160 px.
    static let resolutionRange: (zero: Double, one: Double) = (32, 160)
    /// Variance of the Laplacian: 0.0 at ≤ 20, 1.0 at ≥ 300.
    static let sharpnessRange: (zero: Double, one: Double) = (20, 300)
    /// Mean brightness (0...255): rises from 0.0 at ≤ 30 to 1.0 at 90, 1.0 up to 170, falls to 0.0 at ≥ 230.
    static let brightnessRise: (zero: Double, one: Double) = (30, 90)
    static let brightnessFall: (one: Double, zero: Double) = (170, 230)
    /// Brightness standard deviation at and above which contrast costs nothing.
    static let fullContrastStdDev: Double = 30

    // MARK: Assessment

    /// The quality of a capture, or nil when a core input is missing (see `missingInputs`).
    ///
    /// The four core components need: `detectorConfidence` (confidence); `faceBox` with
    /// `imageWidth`/`imageHeight` (size); `yaw`, `pitch` and `roll` (angle); `facePixelSize`, else the
    /// shorter side of `faceBox` (resolution). Sharpness is used when `sharpness` is given, lighting when
    /// `brightnessMean` is given (with `brightnessStdDev` as a contrast factor when that is given too).
    /// A non-finite value (NaN, ±infinity), a non-positive image size, or a face box with a non-finite
    /// field or a negative width or height counts as missing; an optional input that counts as missing
    /// is left out (a non-finite `facePixelSize` falls back to the box).
    public static func assess(_ capture: CaptureMetadata) -> QualityAssessment? {
        guard let inputs = CoreInputs(capture) else { return nil }
        var components: [QualityComponent: Float] = [
            .confidence: self.normalisedConfidence(inputs.confidence),
            .size: self.sizeScore(faceArea: inputs.faceArea, imageArea: inputs.imageArea),
            .angle: self.normalisedAngle(yaw: inputs.yaw, pitch: inputs.pitch, roll: inputs.roll),
            .resolution: self.normalisedResolution(facePixelSize: inputs.facePixelSize),
        ]
        if let sharpness = self.finite(capture.sharpness) {
            components[.sharpness] = self.normalisedSharpness(laplacianVariance: sharpness)
        }
        if let mean = self.finite(capture.brightnessMean) {
            components[.lighting] = self.normalisedLighting(
                brightnessMean: mean, brightnessStdDev: self.finite(capture.brightnessStdDev))
        }
        let score = self.score(components)
        return QualityAssessment(
            score: score, rating: QualityRating(score: score), components: components,
            weakest: self.weakest(components))
    }

    /// The core inputs that are missing (or count as missing: non-finite, non-positive image size,
    /// unusable face box), by their `CaptureMetadata` property names in declaration order: any of
    /// `detectorConfidence`, `faceBox`, `imageWidth`, `imageHeight`, `yaw`, `pitch`, `roll`. Empty
    /// exactly when `assess` returns an assessment. `facePixelSize` is never listed: the face box,
    /// which size needs anyway, stands in for it.
    public static func missingInputs(_ capture: CaptureMetadata) -> [String] {
        var missing: [String] = []
        if self.finite(capture.detectorConfidence) == nil { missing.append("detectorConfidence") }
        if self.usableBox(capture.faceBox) == nil { missing.append("faceBox") }
        if self.positive(capture.imageWidth) == nil { missing.append("imageWidth") }
        if self.positive(capture.imageHeight) == nil { missing.append("imageHeight") }
        if self.finite(capture.yaw) == nil { missing.append("yaw") }
        if self.finite(capture.pitch) == nil { missing.append("pitch") }
        if self.finite(capture.roll) == nil { missing.append("roll") }
        return missing
    }

    /// The weighted mean of `components`, weights renormalised over the components present; 0 when
    /// there are none.
    public static func score(_ components: [QualityComponent: Float]) -> Float {
        var weighted = 0.0
        var totalWeight = 0.0
        for component in QualityComponent.allCases {
            guard let value = components[component] else { continue }
            weighted += component.exactWeight * self.clamp(Double(value))
            totalWeight += component.exactWeight
        }
        guard totalWeight > 0 else { return 0 }
        return Float(self.clamp(weighted / totalWeight))
    }

    /// The component with the lowest value; ties go to the larger weight, then to declaration order.
    /// `.confidence` when `components` is empty.
    static func weakest(_ components: [QualityComponent: Float]) -> QualityComponent {
        var weakest: (component: QualityComponent, value: Float)?
        for component in QualityComponent.allCases {
            guard let value = components[component] else { continue }
            guard let current = weakest else {
                weakest = (component, value)
                continue
            }
            let heavier = component.exactWeight > current.component.exactWeight
            if value < current.value || (value == current.value && heavier) {
                weakest = (component, value)
            }
        }
        return weakest?.component ?? .confidence
    }

    // MARK: Normalisations (each linear between its 0.0 and 1.0 points, clamped to 0...1; NaN → 0)

    /// Confidence: the detector confidence clamped to 0...1 (0 → 0.0, 1 → 1.0, 0.5 → 0.5).
    public static func normalisedConfidence(_ confidence: Float) -> Float {
        Float(self.clamp(Double(confidence)))
    }

    /// Size: the face area fraction `faceArea / imageArea` (box width × height over image width ×
    /// height): 0.0 at ≤ 2 % of the image, 1.0 at ≥ 20 %, linear between (11 % → 0.5). A non-positive
    /// image area scores 0.
    public static func normalisedSize(faceArea: Float, imageArea: Float) -> Float {
        self.sizeScore(faceArea: Double(faceArea), imageArea: Double(imageArea))
    }

    /// `normalisedSize` on areas computed in `Double` (an image's Int area may not fit a Float exactly).
    private static func sizeScore(faceArea: Double, imageArea: Double) -> Float {
        guard imageArea > 0 else { return 0 }
        return Float(self.ramp(faceArea / imageArea, from: self.sizeRange.zero, to: self.sizeRange.one))
    }

    /// Angle: 1 − max(|yaw|, |pitch|, |roll|) / 45°: 1.0 frontal (all 0°), 0.0 at ≥ 45° on any axis,
    /// linear between (22.5° → 0.5). Angles in degrees; the sign does not matter.
    public static func normalisedAngle(yaw: Float, pitch: Float, roll: Float) -> Float {
        let deviations = [yaw, pitch, roll].map { abs(Double($0)) }
        if deviations.contains(where: \.isNaN) { return 0 }
        return Float(1 - self.ramp(deviations.max() ?? 0, from: 0, to: self.maximumAngle))
    }

    /// Resolution: the face pixel size (`facePixelSize`, else the shorter side of the face box): 0.0 at
    /// ≤ 32 px, 1.0 at ≥ 160 px, linear between (96 px → 0.5).
    public static func normalisedResolution(facePixelSize: Float) -> Float {
        Float(self.ramp(Double(facePixelSize), from: self.resolutionRange.zero, to: self.resolutionRange.one))
    }

    /// Sharpness (optional): the variance of the Laplacian of the face region: 0.0 at ≤ 20, 1.0 at
    /// ≥ 300, linear between (160 → 0.5).
    public static func normalisedSharpness(laplacianVariance: Float) -> Float {
        Float(self.ramp(Double(laplacianVariance), from: self.sharpnessRange.zero, to: self.sharpnessRange.one))
    }

    /// Lighting (optional): the face region's mean brightness (0...255) scores 1.0 within 90...170,
    /// falling linearly to 0.0 at ≤ 30 and at ≥ 230 (60 → 0.5, 200 → 0.5). When the brightness
    /// standard deviation is given, the result is multiplied by min(1, stdDev / 30), clamped at 0: a
    /// flat, contrast-less face region scores lower (stdDev 0 → × 0, 15 → × 0.5, ≥ 30 → × 1).
    public static func normalisedLighting(brightnessMean: Float, brightnessStdDev: Float? = nil) -> Float {
        let mean = Double(brightnessMean)
        guard !mean.isNaN else { return 0 }
        let rise = self.ramp(mean, from: self.brightnessRise.zero, to: self.brightnessRise.one)
        let fall = 1 - self.ramp(mean, from: self.brightnessFall.one, to: self.brightnessFall.zero)
        var lighting = min(rise, fall)
        if let stdDev = brightnessStdDev {
            lighting *= self.ramp(Double(stdDev), from: 0, to: self.fullContrastStdDev)
        }
        return Float(self.clamp(lighting))
    }

    // MARK: Inputs

    /// The validated core inputs of a capture.
    private struct CoreInputs {
        var confidence: Float
        var faceArea: Double
        var imageArea: Double
        var yaw: Float
        var pitch: Float
        var roll: Float
        var facePixelSize: Float

        init?(_ capture: CaptureMetadata) {
            guard let confidence = CaptureQuality.finite(capture.detectorConfidence),
                let box = CaptureQuality.usableBox(capture.faceBox),
                let imageWidth = CaptureQuality.positive(capture.imageWidth),
                let imageHeight = CaptureQuality.positive(capture.imageHeight),
                let yaw = CaptureQuality.finite(capture.yaw),
                let pitch = CaptureQuality.finite(capture.pitch),
                let roll = CaptureQuality.finite(capture.roll)
            else { return nil }
            self.confidence = confidence
            // In Double: neither the Int product nor the Float product can overflow or lose much.
            self.faceArea = Double(box.width) * Double(box.height)
            self.imageArea = Double(imageWidth) * Double(imageHeight)
            self.yaw = yaw
            self.pitch = pitch
            self.roll = roll
            self.facePixelSize = CaptureQuality.finite(capture.facePixelSize) ?? min(box.width, box.height)
        }
    }
}

// MARK: Helpers

extension CaptureQuality {
    /// `value` when it is present and finite.
    fileprivate static func finite(_ value: Float?) -> Float? {
        guard let value, value.isFinite else { return nil }
        return value
    }

    /// `value` when it is present and positive.
    fileprivate static func positive(_ value: Int?) -> Int? {
        guard let value, value > 0 else { return nil }
        return value
    }

    /// `box` when all its fields are finite and its width and height are not negative.
    fileprivate static func usableBox(_ box: FaceBox?) -> FaceBox? {
        guard let box, box.x.isFinite, box.y.isFinite, box.width.isFinite, box.height.isFinite,
            box.width >= 0, box.height >= 0
        else { return nil }
        return box
    }

    /// `value` clamped to 0...1; NaN → 0.
    fileprivate static func clamp(_ value: Double) -> Double {
        guard !value.isNaN else { return 0 }
        return min(max(value, 0), 1)
    }

    /// 0 at ≤ `zero`, 1 at ≥ `one`, linear between (`zero` < `one`); NaN → 0.
    fileprivate static func ramp(_ value: Double, from zero: Double, to one: Double) -> Double {
        self.clamp((value - zero) / (one - zero))
    }
}
