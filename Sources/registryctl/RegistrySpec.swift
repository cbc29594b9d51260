import ArgumentParser
import RegistryCore

/// A `--registry` argument of `gallery define`: `ALGORITHM[:AUTH,IDENT,AUTO]`, where ALGORITHM is a
/// name (`arcface`) or a version (`24`) and the optional thresholds are in (0, 1].
public struct RegistrySpec: Sendable, Hashable, CustomStringConvertible {
    /// How the algorithm was named.
    public enum AlgorithmReference: Sendable, Hashable {
        case version(UInt32)
        case name(String)
    }

    public var algorithm: AlgorithmReference
    /// nil: the algorithm's defaults.
    public var thresholds: Thresholds?

    public init(algorithm: AlgorithmReference, thresholds: Thresholds? = nil) {
        self.algorithm = algorithm
        self.thresholds = thresholds
    }

    /// Parses `ALGORITHM[:AUTH,IDENT,AUTO]`.
    /// - Throws: `ValidationError` saying what is wrong.
    public init(parsing text: String) throws {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let algorithm = parts[0]
        guard !algorithm.isEmpty else {
            throw ValidationError("registry '\(text)': the algorithm is missing (expected ALGORITHM[:AUTH,IDENT,AUTO])")
        }
        if algorithm.allSatisfy(\.isASCIIDigit) {
            guard let version = UInt32(algorithm) else {
                throw ValidationError("registry '\(text)': algorithm version \(algorithm) is too large")
            }
            self.algorithm = .version(version)
        } else {
            guard algorithm.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
                throw ValidationError("registry '\(text)': '\(algorithm)' is not an algorithm name or version")
            }
            self.algorithm = .name(String(algorithm))
        }
        guard parts.count == 2 else {
            self.thresholds = nil
            return
        }
        let values = parts[1].split(separator: ",", omittingEmptySubsequences: false)
        guard values.count == 3 else {
            throw ValidationError(
                "registry '\(text)': expected three thresholds AUTH,IDENT,AUTO after ':', got \(values.count)")
        }
        var numbers: [Float] = []
        for (name, value) in zip(["authentication", "identification", "auto-enrolment"], values) {
            guard let number = Float(value.trimmingSpaces), number > 0, number <= 1 else {
                throw ValidationError("registry '\(text)': \(name) threshold '\(value)' is not a number in (0, 1]")
            }
            numbers.append(number)
        }
        self.thresholds = Thresholds(authentication: numbers[0], identification: numbers[1], autoEnrolment: numbers[2])
    }

    public var description: String {
        let algorithm =
            switch self.algorithm {
            case .version(let version): "\(version)"
            case .name(let name): name
            }
        guard let thresholds = self.thresholds else { return algorithm }
        return "\(algorithm):\(thresholds.authentication),\(thresholds.identification),\(thresholds.autoEnrolment)"
    }

    /// The configuration for the daemon, resolving a name through `algorithms` (names compare
    /// case-insensitively).
    /// - Throws: `RegistryError` `UNKNOWN_ALGORITHM` for a name no algorithm has.
    func configuration(algorithms: [Algorithm]) throws -> RegistryConfiguration {
        switch self.algorithm {
        case .version(let version):
            return RegistryConfiguration(algorithm: version, thresholds: self.thresholds)
        case .name(let name):
            guard let algorithm = algorithms.first(where: { $0.name.lowercased() == name.lowercased() }) else {
                let known = algorithms.map(\.name).joined(separator: ", ")
                throw RegistryError(.unknownAlgorithm, "no algorithm is named '\(name)' (known: \(known))")
            }
            return RegistryConfiguration(algorithm: algorithm.version, thresholds: self.thresholds)
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { self.isASCII && self.isWholeNumber }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
