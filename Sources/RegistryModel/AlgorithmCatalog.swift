/// The algorithms a store knows: the built-in ones plus vector algorithms added by configuration.
public struct AlgorithmCatalog: Sendable {
    public private(set) var all: [Algorithm]
    private var byVersion: [UInt32: Algorithm]

    /// Built-ins plus `configured`.
    /// - Throws: ``RegistryError`` (`malformedRequest`) when a configured algorithm reuses a version or
    ///   name, is not a vector algorithm, has a dimension outside 1...8192 or a threshold outside (0, 1].
    public init(configured: [Algorithm] = []) throws(RegistryError) {
        self.all = []
        self.byVersion = [:]
        for algorithm in Algorithm.builtIn + configured {
            guard self.byVersion[algorithm.version] == nil else {
                throw .malformedRequest("algorithm version \(algorithm.version) is defined twice")
            }
            guard !self.all.contains(where: { $0.name == algorithm.name }) else {
                throw .malformedRequest("algorithm name '\(algorithm.name)' is defined twice")
            }
            if case .vector(let dimension) = algorithm.kind {
                guard (1...8192).contains(dimension) else {
                    throw .malformedRequest("algorithm \(algorithm) has dimension \(dimension), allowed 1...8192")
                }
            } else if !Algorithm.builtIn.contains(algorithm) {
                throw .malformedRequest("configured algorithm \(algorithm) must be a vector algorithm")
            }
            guard algorithm.defaultThreshold > 0 && algorithm.defaultThreshold <= 1 else {
                throw .malformedRequest("algorithm \(algorithm) has threshold \(algorithm.defaultThreshold), allowed (0, 1]")
            }
            self.all.append(algorithm)
            self.byVersion[algorithm.version] = algorithm
        }
    }

    /// The algorithm with this version id.
    /// - Throws: ``RegistryError`` (`unknownAlgorithm`).
    public func algorithm(version: UInt32) throws(RegistryError) -> Algorithm {
        guard let algorithm = self.byVersion[version] else {
            throw RegistryError(.unknownAlgorithm, "unknown algorithm version \(version)")
        }
        return algorithm
    }

    /// The algorithm with this name, if any.
    public func algorithm(named name: String) -> Algorithm? {
        self.all.first { $0.name == name }
    }
}
