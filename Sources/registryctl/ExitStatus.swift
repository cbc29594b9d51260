import RegistryClient
import RegistryCtlInput
import RegistryModel

/// The exit statuses of `registryctl`, for scripts: the one table of them. The root command's help
/// (``documentation``) is made from it, the manual page from that help (Sources/registry-manual), and
/// the tests hold the README's list to it.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    case success = 0
    case noMatch = 1
    case notRegistered = 2
    case refused = 3
    case unreachable = 4
    case usage = 64
    case badInput = 65

    /// What the status means, in a few words (the README lists these).
    public var summary: String {
        switch self {
        case .success: "success"
        case .noMatch: "no match"
        case .notRegistered: "not registered"
        case .refused: "refused or failed"
        case .unreachable: "daemon unreachable"
        case .usage: "usage error"
        case .badInput: "bad input file"
        }
    }

    /// When a command ends with it; nil when the summary says it all.
    public var detail: String? {
        switch self {
        case .success: nil
        case .noMatch: "identify found nobody, authenticate did not authenticate"
        case .notRegistered:
            "IDENTIFIER_NOT_REGISTERED, a delete found nothing to delete (no such identifier, template or gallery), or the identifier has no liveness profile"
        case .refused:
            "any other error the daemon returned (SIMILAR_FACE_REGISTERED, FACE_MISMATCH, INVALID_TEMPLATE, UNKNOWN_GALLERY, "
                + "QUALITY_TOO_LOW, LIVENESS_FAILED, ...), verify found problems, backup --keep could not remove an older backup, "
                + "an output file could not be written, or an erasure asked on the terminal was not confirmed"
        case .unreachable: "nothing answers on the socket, or the connection was lost"
        case .usage: "bad arguments or options, or delete gallery without --yes and without a terminal"
        case .badInput: "an input file is unreadable or malformed (template or face JSON, a protobuf stream, a depth frame without 100 samples)"
        }
    }

    /// The summary and the detail, as the help text gives them.
    public var meaning: String { self.detail.map { "\(self.summary): \($0)" } ?? self.summary }

    /// The table for help texts, in the form registry-manual takes it into the manual page
    /// (`ExitStatusTable`): `EXIT STATUS`, then per status `  N   meaning`, continued on lines indented
    /// further; wrapped to 72 columns, as the rest of the help prints within 80.
    static var documentation: String {
        let width = 72
        let indent = String(repeating: " ", count: 6)
        var lines = ["EXIT STATUS"]
        for status in Self.allCases {
            let number = "  \(status.rawValue)"
            var line = number + String(repeating: " ", count: max(1, indent.count - number.count))
            var lineHasWord = false
            for word in status.meaning.split(separator: " ") {
                if lineHasWord && line.count + 1 + word.count > width {
                    lines.append(line)
                    line = indent
                    lineHasWord = false
                }
                line += (lineHasWord ? " " : "") + word
                lineHasWord = true
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// The status for an error a command ended with.
    ///
    /// - Parameter error: a ``RegistryError`` the daemon returned, a ``RegistryClientError`` or another
    ///   transport error, an ``InputFileError`` or an ``OutputFileError`` of this tool.
    public init(for error: any Error) {
        switch error {
        case let error as RegistryError:
            self = error.code == .identifierNotRegistered ? .notRegistered : .refused
        case is NothingToDelete:
            self = .notRegistered
        case let error as CommandFailure:
            self = error.status
        case is RegistryClientError, is SocketUnreachable:
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
