/// One algorithm's encoding of one face capture, as a client sends it.
///
/// Its `description` and mirror never show the values: templates are biometric data and must not
/// reach logs, even through an accidental string interpolation or `dump`.
public struct FaceTemplate: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The data of a template.
    public enum Data: Sendable, Hashable {
        case vector([Float])
        case landmarks([Landmark])
    }

    /// The algorithm's version id (e.g. 24).
    public var algorithm: UInt32
    public var data: Data

    public init(algorithm: UInt32, data: Data) {
        self.algorithm = algorithm
        self.data = data
    }

    public init(algorithm: UInt32, vector: [Float]) {
        self.init(algorithm: algorithm, data: .vector(vector))
    }

    public init(algorithm: UInt32, landmarks: [Landmark]) {
        self.init(algorithm: algorithm, data: .landmarks(landmarks))
    }

    public var description: String {
        switch self.data {
        case .vector(let values): "FaceTemplate(algorithm: \(self.algorithm), \(values.count) values)"
        case .landmarks(let values): "FaceTemplate(algorithm: \(self.algorithm), \(values.count) landmarks)"
        }
    }

    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
