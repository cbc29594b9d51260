import ArgumentParser
import RegistryModel

/// A `--registry` argument of `gallery define`: `ALGORITHM[:AUTH,IDENT,AUTO][@MINQ[/MINAUTOQ]]`, where
/// ALGORITHM is a name (`arcface`) or a version (`24`), the optional thresholds are in (0, 1], and the
/// optional quality gates (README, capture gates) are the capture quality scores in [0, 1] a face must reach to be
/// registered (MINQ) and auto-enrolled (MINAUTOQ) in the registry: `arcface@0.6`,
/// `arcface:0.6,0.6,0.6@0.6/0.7`, `arcface@/0.7` (auto-enrolment only).
public struct RegistrySpec: Sendable, Hashable, CustomStringConvertible {
    /// How the algorithm was named.
    public enum AlgorithmReference: Sendable, Hashable {
        case version(UInt32)
        case name(String)
    }

    public var algorithm: AlgorithmReference
    /// nil: the algorithm's defaults.
    public var thresholds: Thresholds?
    /// The capture quality a face must reach to be registered here; nil: no gate.
    public var minimumQuality: Float?
    /// The capture quality a face must reach to be auto-enrolled here; nil: no gate.
    public var minimumAutoEnrolmentQuality: Float?

    public init(
        algorithm: AlgorithmReference, thresholds: Thresholds? = nil, minimumQuality: Float? = nil,
        minimumAutoEnrolmentQuality: Float? = nil
    ) {
        self.algorithm = algorithm
        self.thresholds = thresholds
        self.minimumQuality = minimumQuality
        self.minimumAutoEnrolmentQuality = minimumAutoEnrolmentQuality
    }

    static let syntax = "ALGORITHM[:AUTH,IDENT,AUTO][@MINQ[/MINAUTOQ]]"

    /// Parses `ALGORITHM[:AUTH,IDENT,AUTO][@MINQ[/MINAUTOQ]]`.
    /// - Throws: `ValidationError` saying what is wrong.
    public init(parsing text: String) throws {
        let gated = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        let parts = gated[0].split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let algorithm = parts[0]
        guard !algorithm.isEmpty else {
            throw ValidationError("registry '\(text)': the algorithm is missing (expected \(Self.syntax))")
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
        self.thresholds = nil
        if parts.count == 2 {
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
        self.minimumQuality = nil
        self.minimumAutoEnrolmentQuality = nil
        if gated.count == 2 {
            let gates = gated[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            func quality(_ value: Substring, _ name: String) throws -> Float {
                guard let number = Float(value.trimmingSpaces), number >= 0, number <= 1 else {
                    throw ValidationError("registry '\(text)': \(name) '\(value)' is not a quality score in [0, 1]")
                }
                return number
            }
            if !gates[0].isEmpty { self.minimumQuality = try quality(gates[0], "minimum quality") }
            if gates.count == 2 {
                self.minimumAutoEnrolmentQuality = try quality(gates[1], "minimum auto-enrolment quality")
            }
            guard self.minimumQuality != nil || self.minimumAutoEnrolmentQuality != nil else {
                throw ValidationError("registry '\(text)': expected MINQ[/MINAUTOQ] after '@' (capture quality scores in [0, 1])")
            }
        }
    }

    public var description: String {
        let algorithm =
            switch self.algorithm {
            case .version(let version): "\(version)"
            case .name(let name): name
            }
        var text = algorithm
        if let thresholds = self.thresholds {
            text += ":\(thresholds.authentication),\(thresholds.identification),\(thresholds.autoEnrolment)"
        }
        if self.minimumQuality != nil || self.minimumAutoEnrolmentQuality != nil {
            text += "@" + (self.minimumQuality.map { "\($0)" } ?? "")
            if let minimum = self.minimumAutoEnrolmentQuality { text += "/\(minimum)" }
        }
        return text
    }

    /// The configuration for the daemon, resolving a name through `algorithms` (names compare
    /// case-insensitively).
    /// - Throws: `RegistryError` `UNKNOWN_ALGORITHM` for a name no algorithm has.
    func configuration(algorithms: [Algorithm]) throws -> RegistryConfiguration {
        let version: UInt32
        switch self.algorithm {
        case .version(let given):
            version = given
        case .name(let name):
            guard let algorithm = algorithms.first(where: { $0.name.lowercased() == name.lowercased() }) else {
                let known = algorithms.map(\.name).joined(separator: ", ")
                throw RegistryError(.unknownAlgorithm, "no algorithm is named '\(name)' (known: \(known))")
            }
            version = algorithm.version
        }
        return RegistryConfiguration(
            algorithm: version, thresholds: self.thresholds, minimumQuality: self.minimumQuality,
            minimumAutoEnrolmentQuality: self.minimumAutoEnrolmentQuality)
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

/// `--liveness` of `gallery define`: which operations require a live face, `authenticate`, `identify`
/// and/or `register` separated by commas, or `none`; `strict` adds the non-planar and micro-movement
/// checks to the required ones.
enum LivenessPolicySpec {
    static let operations = ["authenticate", "identify", "register"]

    /// Parses `authenticate,identify,register` (any subset, any order) or `none`.
    /// - Throws: `ValidationError` saying what is wrong.
    static func parse(_ text: String) throws -> LivenessPolicy {
        let trimmed = Substring(text).trimmingSpaces
        if trimmed.lowercased() == "none" { return .none }
        var policy = LivenessPolicy()
        for item in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            switch item.trimmingSpaces.lowercased() {
            case "authenticate": policy.authenticate = true
            case "identify": policy.identify = true
            case "register": policy.register = true
            case "strict": policy.strict = true
            case "none":
                throw ValidationError("--liveness '\(text)': 'none' cannot be combined with operations")
            case "":
                throw ValidationError("--liveness '\(text)': an operation is missing (expected authenticate, identify, register or none)")
            default:
                throw ValidationError(
                    "--liveness '\(text)': '\(item)' is not an operation (expected authenticate, identify, register, strict, comma-separated, or none)"
                )
            }
        }
        return policy
    }
}
