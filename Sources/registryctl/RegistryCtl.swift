import ArgumentParser
import Glibc
import RegistryModel

/// `registryctl`: the operator and scripting CLI of `registryd`.
@main
struct RegistryCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registryctl",
        abstract: "Administer registryd, the face template registry daemon.",
        discussion: """
            Connects to registryd over its Unix socket (--socket, else $REGISTRYD_SOCKET, else \
            ./run/registryd.sock when it exists, else the system service's \
            /run/registryd/registryd.sock). --socket and --json may come before the command or after \
            it. Every command prints text for people, or one JSON document with \
            --json (errors too: {"error": {"code": ..., "message": ..., ...}} on standard output). \
            Errors are printed on standard error as "registryctl: CODE: message".

            Template files (register, identify, authenticate) hold one Ver-ID template object or an \
            array of them: {"version": 24, "data": [...]} or {"version": 1000, "landmarks": \
            [{"name": "LEFT_EYE", "x": 1, "y": 2, "z": 3}, ...]} ("type" may stand for "name", z is \
            optional). The templates of all files given form one face.

            A file may instead hold a face object: {"templates": [...], "capture": {...}, \
            "depthFrames": [...]}. "capture" is what the face detector reported (the quality \
            inputs, each optional): detectorConfidence (0-1), faceBox {x, y, width, height} and \
            imageWidth, imageHeight (pixels), yaw, pitch, roll (degrees), facePixelSize, sharpness \
            (variance of the Laplacian), brightnessMean, brightnessStdDev (0-255). Each depth frame \
            is {"depths": [100 numbers: a 10 x 10 grid, row-major, metres; null where not \
            measured], "timestampMillis": N, "faceBox": {...}}. The files' depth frames are sent in \
            order; at most one file may give a capture.

            \(ExitStatus.documentation)
            """,
        version: RegistryVersion.current,
        subcommands: [
            StatusCommand.self,
            GalleriesCommand.self,
            AlgorithmsCommand.self,
            IdentifiersCommand.self,
            ShowCommand.self,
            AuditCommand.self,
            EncryptCommand.self,
            RegisterCommand.self,
            IdentifyCommand.self,
            AuthenticateCommand.self,
            DeleteCommand.self,
            MigrationCommand.self,
            StatsCommand.self,
            MetricsCommand.self,
            GalleryCommand.self,
            ProfileCommand.self,
            ExportCommand.self,
            ImportCommand.self,
            BackupCommand.self,
            VerifyCommand.self,
        ])

    /// --socket and --json before the command (`registryctl --socket S status`). Declared here too, so
    /// that the parser takes them there and the completion scripts know them (they complete the socket
    /// path, then go on to the command); each command's own `GlobalOptions` receives these values.
    @OptionGroup var options: GlobalOptions

    /// ArgumentParser's `main`, except that a usage error on a `--json` command line is also printed
    /// as a JSON error document on standard output.
    static func main() async {
        do {
            let arguments = Array(CommandLine.arguments.dropFirst())
            var command = try await self.asyncParseAsRoot(Self.placingGlobalOptions(arguments))
            // A group without its command (`registryctl`, `registryctl delete`) is a usage error,
            // not a request for help: a script that lost its arguments must not exit 0.
            let group = type(of: command)
            if !group.configuration.subcommands.isEmpty {
                let path = group == RegistryCtl.self ? "registryctl" : "registryctl \(group._commandName)"
                let message = "a command is required (\(group.configuration.subcommands.map { $0._commandName }.joined(separator: ", ")))"
                Self.usageError(
                    "\(message)\nUsage: \(path) <subcommand>\n  See '\(path) --help' for more information.", json: arguments.contains("--json"),
                    message: message)
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            // (An ExitCode a command threw was reported by the command: delete gallery's refusal
            // without --yes exits 64 too.)
            if !(error is ExitCode), self.exitCode(for: error) == .validationFailure {
                // `registryctl: USAGE: message`, as every other error, then ArgumentParser's help
                // and usage lines.
                let full = self.fullMessage(for: error)
                let detail = full.hasPrefix("Error: ") ? String(full.dropFirst("Error: ".count)) : full
                Self.usageError(detail, json: CommandLine.arguments.dropFirst().contains("--json"), message: self.message(for: error))
            }
            self.exit(withError: error)
        }
    }

    /// Reports a command line registryctl cannot run: `registryctl: USAGE: message` and the usage on
    /// standard error (and the JSON error document with --json), exit 64.
    /// - Parameters:
    ///   - text: what follows `registryctl: USAGE: ` (the message, then usage lines).
    ///   - message: the message alone, for the JSON document.
    static func usageError(_ text: String, json: Bool, message: String? = nil) -> Never {
        if json { print(JSONOutput.document(UsageErrorDocument(message: message ?? text))) }
        var trimmed = Substring(text)
        while trimmed.last?.isNewline == true { trimmed = trimmed.dropLast() }
        printError("registryctl: USAGE: \(trimmed)")
        Glibc.exit(ExitStatus.usage.rawValue)
    }
}

extension RegistryCtl {
    /// `arguments` with the global options written before the command (`registryctl --socket S
    /// register …`, as systemctl and git take theirs) moved after it, where each command declares them.
    /// Anything else stays where it is: `--help` and `--version` before a command are the root's.
    static func placingGlobalOptions(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--json" || argument == "--compact" || argument == "--no-legend" || argument.hasPrefix("--socket=") {
                leading.append(argument)
                index += 1
            } else if argument == "--socket", index + 1 < arguments.count {
                leading += arguments[index...index + 1]
                index += 2
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.count, !arguments[index].hasPrefix("-") else { return arguments }
        var rest = Array(arguments[index...])
        // Before an end-of-options marker, so they stay options.
        rest.insert(contentsOf: leading, at: rest.firstIndex(of: "--") ?? rest.count)
        return rest
    }
}

/// `{"error": {"code": "USAGE", "message": ..., "exitStatus": 64}}`.
struct UsageErrorDocument: Encodable {
    struct Body: Encodable {
        var code = OwnErrorCode.usage.rawValue
        var message: String
        var exitStatus = ExitStatus.usage.rawValue
    }

    var error: Body

    init(message: String) {
        self.error = Body(message: message)
    }
}
