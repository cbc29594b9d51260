/// Why a template was refused on the way in. Never carries template values, only shapes and positions,
/// because templates are biometric data and errors end up in logs and on other processes' screens.
public enum TemplateProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// A vector template whose length is not the algorithm's dimension.
    case wrongDimension(expected: Int, actual: Int)
    /// A NaN or ±infinity at this position (vector element, or landmark coordinate index 0..<3·count).
    case nonFiniteValue(index: Int)
    /// Every element is zero: no direction, so no similarity can be defined.
    case zeroVector
    /// A "normalised" algorithm (score = dot product) got a vector whose L2 norm is far from 1.
    case notNormalised(norm: Float)
    /// A landmark template with fewer landmarks than the algorithm needs to ever match.
    case tooFewLandmarks(count: Int, minimum: Int)
    /// A landmark name outside the algorithm's vocabulary.
    case unknownLandmark(name: String)
    /// The same landmark name twice in one template.
    case duplicateLandmark(name: String)
    /// Landmarks sent for a vector algorithm, or a vector for a landmark algorithm.
    case wrongKind(expected: String)

    public var description: String {
        switch self {
        case .wrongDimension(let expected, let actual):
            "template has \(actual) values, the algorithm expects \(expected)"
        case .nonFiniteValue(let index):
            "template value at index \(index) is NaN or infinite"
        case .zeroVector:
            "template is an all-zero vector"
        case .notNormalised(let norm):
            "template is not L2-normalised (norm \(norm), expected 1 ± 0.01)"
        case .tooFewLandmarks(let count, let minimum):
            "template has \(count) landmarks, at least \(minimum) are required"
        case .unknownLandmark(let name):
            "unknown landmark name '\(name.prefix(64))'"
        case .duplicateLandmark(let name):
            "landmark '\(name.prefix(64))' appears more than once"
        case .wrongKind(let expected):
            "template kind does not match the algorithm, which expects \(expected)"
        }
    }
}
