import Glibc
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// The error codes registryctl reports of its own, besides the daemon's (PROTOCOL.md §5).
enum OwnErrorCode: String, CaseIterable {
    case unreachable = "UNREACHABLE"
    case connectionClosed = "CONNECTION_CLOSED"
    case connectionLost = "CONNECTION_LOST"
    case unexpectedResponse = "UNEXPECTED_RESPONSE"
    case badInput = "BAD_INPUT"
    case outputFailed = "OUTPUT_FAILED"
    case templateNotFound = "TEMPLATE_NOT_FOUND"
    case profileNotFound = "PROFILE_NOT_FOUND"
    /// An erasure of many people (`delete gallery`) without `--yes` and without a terminal to ask on.
    case confirmationRequired = "CONFIRMATION_REQUIRED"
    /// An erasure asked on the terminal and not confirmed.
    case notConfirmed = "NOT_CONFIRMED"
    /// A command line registryctl cannot run (exit 64).
    case usage = "USAGE"
}

/// An error as `registryctl` reports it: a stable code, a message and the daemon's details.
struct ErrorReport: Encodable {
    struct Body: Encodable {
        var code: String
        var message: String
        /// SIMILAR_FACE_REGISTERED and FACE_MISMATCH: the finding that decided, and every finding.
        var decisive: RegistrationFinding?
        var findings: [RegistrationFinding]?
        /// INVALID_TEMPLATE: what is wrong with which template.
        var templateProblem: TemplateProblemDetail?
        /// QUALITY_TOO_LOW: the registry's minimum and the assessment, or what capture inputs were missing.
        var quality: QualityTooLowDetail?
        /// LIVENESS_FAILED: the verdict, every check with the failed ones.
        var liveness: LivenessVerdict?
        /// A bad input or output file.
        var file: String?
        /// The exit status this error gives.
        var exitStatus: Int32
    }

    var error: Body

    /// The codes registryctl reports besides the daemon's own (PROTOCOL.md §5), as listed in the
    /// README for scripts using `--json`.
    static let ownCodes = OwnErrorCode.allCases.map(\.rawValue)

    /// The error's details for text output, after the `registryctl: CODE: message` line.
    private(set) var detailLines: (AlgorithmNames) -> [String] = { _ in [] }

    private enum CodingKeys: String, CodingKey { case error }

    init(_ error: any Error) {
        let status = ExitStatus(for: error)
        // Reported as the daemon's refusal, with the wrapper's exit status.
        let error = (error as? NothingToDelete)?.error ?? error
        if let unreachable = error as? SocketUnreachable {
            self.error = Body(code: OwnErrorCode.unreachable.rawValue, message: unreachable.error.description, exitStatus: status.rawValue)
            let hint = unreachable.hint
            self.detailLines = { _ in hint.map { "  " + $0 } }
            return
        }
        switch error {
        case let error as RegistryError:
            self.error = Body(code: error.code.rawValue, message: error.message, exitStatus: status.rawValue)
            switch error.details {
            case .none:
                break
            case .registration(let decisive, let all):
                self.error.decisive = decisive
                self.error.findings = all
                let findings = all.isEmpty ? [decisive] : all
                self.detailLines = { names in
                    findings.map { "  " + $0.text(names) + ($0 == decisive && findings.count > 1 ? " (decisive)" : "") }
                }
            case .invalidTemplate(let algorithm, let problem):
                self.error.templateProblem = TemplateProblemDetail(algorithm: algorithm, problem: problem)
            case .qualityTooLow(let algorithm, let minimum, let assessment, let missing):
                let quality = QualityTooLowDetail(algorithm: algorithm, minimum: minimum, assessment: assessment, missing: missing)
                self.error.quality = quality
                self.detailLines = { names in quality.lines(names).map { "  " + $0 } }
            case .livenessFailed(let verdict):
                self.error.liveness = verdict
                self.detailLines = { _ in verdict.failedLines.map { "  " + $0 } }
            }
        case let error as RegistryClientError:
            let code =
                switch error {
                case .unreachable: OwnErrorCode.unreachable
                case .connectionClosed: OwnErrorCode.connectionClosed
                case .unexpectedResponse: OwnErrorCode.unexpectedResponse
                }
            self.error = Body(code: code.rawValue, message: error.description, exitStatus: status.rawValue)
        case let error as InputFileError:
            self.error = Body(code: OwnErrorCode.badInput.rawValue, message: error.description, file: error.file, exitStatus: status.rawValue)
        case let error as OutputFileError:
            self.error = Body(code: OwnErrorCode.outputFailed.rawValue, message: error.description, file: error.file, exitStatus: status.rawValue)
        case let error as CommandFailure:
            self.error = Body(code: error.code.rawValue, message: error.message, exitStatus: status.rawValue)
        default:
            self.error = Body(
                code: OwnErrorCode.connectionLost.rawValue, message: "the connection to registryd failed: \(error)", exitStatus: status.rawValue)
        }
    }

    var needsAlgorithmNames: Bool { self.error.findings != nil || self.error.quality != nil }

    /// `registryctl: CODE: message` and the details, one per line.
    func text(_ names: AlgorithmNames) -> [String] {
        ["registryctl: \(self.error.code): \(self.error.message)"] + self.detailLines(names)
    }
}
