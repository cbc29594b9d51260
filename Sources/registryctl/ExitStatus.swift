import RegistryClient
import RegistryCtlInput
import RegistryModel

/// The exit statuses of `registryctl`, for scripts.
///
/// | status | meaning |
/// | --- | --- |
/// | 0 | success |
/// | 1 | no match: identify found nobody, authenticate did not authenticate |
/// | 2 | not registered: `IDENTIFIER_NOT_REGISTERED`, a delete found nothing to delete, or the identifier has no liveness profile |
/// | 3 | refused or failed: any other error the daemon returned (similar face, mismatch, invalid template, unknown gallery, capture quality too low, liveness failed, …), verify found problems, or the output file could not be written |
/// | 4 | the daemon is unreachable or the connection was lost |
/// | 64 | usage error (bad arguments or options) |
/// | 65 | bad input file (unreadable, malformed JSON or protobuf stream) |
public enum ExitStatus: Int32, Sendable, CaseIterable {
    case success = 0
    case noMatch = 1
    case notRegistered = 2
    case refused = 3
    case unreachable = 4
    case usage = 64
    case badInput = 65

    /// The status for an error a command ended with.
    ///
    /// - Parameter error: a ``RegistryError`` the daemon returned, a ``RegistryClientError`` or another
    ///   transport error, an ``InputFileError`` or an ``OutputFileError`` of this tool.
    public init(for error: any Error) {
        switch error {
        case let error as RegistryError:
            self = error.code == .identifierNotRegistered ? .notRegistered : .refused
        case let error as CommandFailure:
            self = error.status
        case is RegistryClientError:
            self = .unreachable
        case is InputFileError:
            self = .badInput
        case is OutputFileError:
            self = .refused
        default:
            // Anything else comes from the transport under the client (a socket error, an oversized
            // frame): the connection is gone.
            self = .unreachable
        }
    }

    /// The table for help texts.
    static let documentation = """
        EXIT STATUS
          0   success
          1   no match: identify found nobody, authenticate did not
              authenticate
          2   not registered: IDENTIFIER_NOT_REGISTERED, a delete found
              nothing to delete, or the identifier has no liveness profile
          3   refused or failed: any other error the daemon returned
              (SIMILAR_FACE_REGISTERED, FACE_MISMATCH, INVALID_TEMPLATE,
              UNKNOWN_GALLERY, QUALITY_TOO_LOW, LIVENESS_FAILED, ...),
              verify found problems, or the output file could not be
              written
          4   registryd is unreachable or the connection was lost
          64  usage error (bad arguments or options)
          65  bad input file (unreadable, malformed template JSON or
              protobuf stream, a depth frame without 100 samples)
        """
}

/// A failure detected by `registryctl` itself, with a stable code for `--json` and the exit status.
struct CommandFailure: Error, CustomStringConvertible {
    var code: OwnErrorCode
    var message: String
    var status: ExitStatus

    var description: String { "\(self.code.rawValue): \(self.message)" }

    static func templateNotFound(_ id: UInt64, gallery: String) -> CommandFailure {
        CommandFailure(code: .templateNotFound, message: "template \(id) does not exist in gallery '\(gallery)'", status: .notRegistered)
    }

    static func profileNotFound(_ identifier: String, gallery: String) -> CommandFailure {
        CommandFailure(
            code: .profileNotFound, message: "'\(identifier)' has no liveness profile in gallery '\(gallery)'", status: .notRegistered)
    }
}
