/// How two templates of a vector algorithm are turned into a score in [0, 1].
public enum ScoreFunction: String, Sendable, Hashable, CaseIterable {
    /// clamp(cos(a, b), 0, 1) — ArcFace-style. Templates are stored L2-normalised, so cos = a · b.
    case cosine
    /// clamp((cos(a, b) + 1) / 2, 0, 1) — dlib-style. Templates are stored L2-normalised.
    case halfCosine = "half-cosine"
    /// clamp(a · b, 0, 1) — for models whose templates are already normalised; stored as sent, after
    /// checking the norm is 1 ± 0.01 so that the dot product really is a similarity.
    case dot

    /// Maps the dot product of two prepared templates to the score.
    @inline(__always)
    public func score(dot: Float) -> Float {
        let raw: Float
        switch self {
        case .cosine, .dot: raw = dot
        case .halfCosine: raw = (dot + 1) * 0.5
        }
        return min(max(raw, 0), 1)
    }

    /// Whether stored and query templates are L2-normalised before the dot product.
    package var normalisesTemplates: Bool { self != .dot }
}

/// What a template of an algorithm looks like.
public enum TemplateKind: Sendable, Hashable {
    /// A vector of this many float32 values.
    case vector(dimension: Int)
    /// Named 3-D landmarks from ``LandmarkVocabulary``, prepared and compared by the matcher.
    case landmarks(LandmarkMatcher)
}

/// A face recognition algorithm: a template format and its comparison function (README, algorithms).
///
/// Templates of one algorithm are only ever compared with templates of the same algorithm.
public struct Algorithm: Sendable, Hashable, CustomStringConvertible {
    /// The numeric version id shared with the Ver-ID libraries (e.g. 24 for ArcFace).
    public var version: UInt32
    /// A short unique name, e.g. `arcface`.
    public var name: String
    public var kind: TemplateKind
    /// The score function of a vector algorithm (unused for landmarks).
    public var scoreFunction: ScoreFunction
    /// Default threshold for authentication and identification (and so for auto-enrolment).
    public var defaultThreshold: Float

    public init(version: UInt32, name: String, kind: TemplateKind, scoreFunction: ScoreFunction, defaultThreshold: Float) {
        self.version = version
        self.name = name
        self.kind = kind
        self.scoreFunction = scoreFunction
        self.defaultThreshold = defaultThreshold
    }

    public var description: String { "\(self.name) (\(self.version))" }

    /// Float values per stored row in the in-memory index.
    package var rowStride: Int {
        switch self.kind {
        case .vector(let dimension): dimension
        case .landmarks: LandmarkAlgorithm.floatsPerTemplate
        }
    }

    /// ArcFace: 128 floats, L2-normalised, cosine similarity, threshold 0.6.
    public static let arcface = Algorithm(
        version: 24, name: "arcface", kind: .vector(dimension: 128), scoreFunction: .cosine, defaultThreshold: 0.6)
    /// dlib (legacy): 128 floats, (cos + 1) / 2, threshold 0.8.
    public static let dlib = Algorithm(
        version: 16, name: "dlib", kind: .vector(dimension: 128), scoreFunction: .halfCosine, defaultThreshold: 0.8)
    /// R300: normalised vectors compared by dot product, threshold 0.6. the origin API leaves its length open
    /// ("N floats"); 512 is the length of the current ArcFace-R100-class models it stands for, and other
    /// lengths are configured as their own algorithms.
    public static let r300 = Algorithm(
        version: 300, name: "r300", kind: .vector(dimension: 512), scoreFunction: .dot, defaultThreshold: 0.6)
    /// The weighted 3-D landmark algorithm of the CoMa landmark matcher, threshold 0.65.
    public static let landmarks = Algorithm(
        version: 1000, name: "landmarks", kind: .landmarks(.coma), scoreFunction: .dot, defaultThreshold: 0.65)
    /// The same landmarks aligned in 3-D (rotation, translation, scale) before the residual is
    /// scored, threshold 0.65 (``AlignedLandmarkAlgorithm``).
    public static let alignedLandmarks = Algorithm(
        version: 1001, name: "landmarks-aligned", kind: .landmarks(.aligned), scoreFunction: .dot, defaultThreshold: 0.65)

    /// The built-in algorithms, in the default gallery's priority order.
    public static let builtIn: [Algorithm] = [.arcface, .r300, .dlib, .landmarks, .alignedLandmarks]
}
