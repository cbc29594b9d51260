/// A face's bounding box in image pixels (origin top-left).
public struct FaceBox: Sendable, Hashable {
    public var x: Float
    public var y: Float
    public var width: Float
    public var height: Float

    public init(x: Float, y: Float, width: Float, height: Float) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// What the client's face detector reported about the capture a face's templates came from: the
/// inputs of the capture quality score (the capture quality design). Every field is optional on the wire; the quality
/// score needs the four core inputs (confidence, face and image size, angles) and uses sharpness and
/// lighting when present.
public struct CaptureMetadata: Sendable, Hashable {
    /// The detector's confidence, 0...1.
    public var detectorConfidence: Float?
    /// The face's box in the image, pixels.
    public var faceBox: FaceBox?
    /// The image's size, pixels.
    public var imageWidth: Int?
    public var imageHeight: Int?
    /// Head pose in degrees, 0 = frontal.
    public var yaw: Float?
    public var pitch: Float?
    public var roll: Float?
    /// The face's size in pixels (the shorter side of its box) when the client measured it otherwise;
    /// derived from `faceBox` when absent.
    public var facePixelSize: Float?
    /// Variance of the Laplacian of the face region (higher = sharper).
    public var sharpness: Float?
    /// Mean and standard deviation of the face region's brightness, 0...255.
    public var brightnessMean: Float?
    public var brightnessStdDev: Float?

    public init(
        detectorConfidence: Float? = nil, faceBox: FaceBox? = nil, imageWidth: Int? = nil, imageHeight: Int? = nil,
        yaw: Float? = nil, pitch: Float? = nil, roll: Float? = nil, facePixelSize: Float? = nil,
        sharpness: Float? = nil, brightnessMean: Float? = nil, brightnessStdDev: Float? = nil
    ) {
        self.detectorConfidence = detectorConfidence
        self.faceBox = faceBox
        self.imageWidth = imageWidth
        self.imageHeight = imageHeight
        self.yaw = yaw
        self.pitch = pitch
        self.roll = roll
        self.facePixelSize = facePixelSize
        self.sharpness = sharpness
        self.brightnessMean = brightnessMean
        self.brightnessStdDev = brightnessStdDev
    }
}

/// One depth frame from a depth camera (TrueDepth-style), sampled on a 10 × 10 grid over the face.
///
/// Depth maps describe a face's shape: like templates, they are never printed (see `description`).
public struct DepthFrame: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// Grid side: the frame holds `gridSize * gridSize` samples.
    public static let gridSize = 10

    /// Depths in metres, row-major (row 0 at the top of the face box). A sample that is not finite or
    /// not positive is invalid (no depth measured there).
    public var depths: [Float]
    /// Capture time in milliseconds (any epoch; only differences are used).
    public var timestampMillis: Int64
    /// The face's box in the image the grid was sampled from, when known.
    public var faceBox: FaceBox?

    public init(depths: [Float], timestampMillis: Int64, faceBox: FaceBox? = nil) {
        self.depths = depths
        self.timestampMillis = timestampMillis
        self.faceBox = faceBox
    }

    public var description: String { "DepthFrame(\(self.depths.count) samples, t=\(self.timestampMillis) ms)" }

    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
