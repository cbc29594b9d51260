import ArgumentParser
import Glibc
import RegistryModel
import Synchronization

/// Options every command takes: where the daemon is and how to print.
struct GlobalOptions: ParsableArguments {
    /// The socket used when neither `--socket` nor `REGISTRYD_SOCKET` says otherwise.
    static let defaultSocketPath = "./run/registryd.sock"
    /// The system service's socket (systemd/registryd.socket), used when the default path has none.
    static let systemSocketPath = "/run/registryd/registryd.sock"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The daemon's Unix socket (default: $REGISTRYD_SOCKET, else \(GlobalOptions.defaultSocketPath), else \(GlobalOptions.systemSocketPath)).",
            valueName: "path"),
        completion: .file())
    var socket: String?

    @Flag(name: .long, help: "Print one JSON document (results and errors) on standard output.")
    var json = false

    @Flag(name: .long, help: "With --json: the document on one line (for a line-oriented tool).")
    var compact = false

    @Flag(name: .customLong("no-legend"), help: "Print tables without their header line (for cut, awk, ...).")
    var noLegend = false

    /// Takes --compact and --no-legend for the whole run (they only change how results are printed).
    mutating func validate() throws {
        if self.compact { OutputStyle.compactJSON.store(true, ordering: .relaxed) }
        if self.noLegend { OutputStyle.noLegend.store(true, ordering: .relaxed) }
    }

    /// The socket to connect to: `--socket`, else `REGISTRYD_SOCKET`, else ``defaultSocketPath``.
    var socketPath: String { Self.socketPath(option: self.socket, environment: Self.environmentSocket) }

    /// Whether the socket was chosen by registryctl (neither `--socket` nor `REGISTRYD_SOCKET`):
    /// an error then says which paths it looked at.
    var socketIsImplicit: Bool { self.socket == nil && (Self.environmentSocket ?? "").isEmpty }

    static var environmentSocket: String? { getenv("REGISTRYD_SOCKET").map { String(cString: $0) } }

    static func socketPath(option: String?, environment: String?) -> String {
        if let option { return option }
        if let environment, !environment.isEmpty { return environment }
        // A daemon started from the repository first, else the system service.
        if access(Self.defaultSocketPath, F_OK) != 0 && access(Self.systemSocketPath, F_OK) == 0 {
            return Self.systemSocketPath
        }
        return Self.defaultSocketPath
    }
}

/// `--gallery G`, for the commands that work in one gallery.
struct GalleryOptions: ParsableArguments {
    @Option(
        name: .shortAndLong, help: ArgumentHelp("The gallery (default: \(GalleryConfiguration.defaultName)).", valueName: "name"),
        completion: GalleryCompletion.kind)
    var gallery: String?

    /// The gallery's name, `default` when not given.
    var name: String { self.gallery ?? GalleryConfiguration.defaultName }
}

/// The file formats of `export` and `import`.
public enum TemplateFileFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// A stream of `registry.v1.StoredTemplate` messages, each framed as a 4-byte big-endian length
    /// and the message's bytes.
    case protobuf
    /// Ver-ID JSON: an array of `{"identifier", "version", "data" | "landmarks"}` objects.
    case verid

    /// The format of a file's contents when none is given: `[` (after white space) is Ver-ID JSON.
    public static func guess(_ bytes: [UInt8]) -> TemplateFileFormat {
        let first = bytes.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 })
        return first == UInt8(ascii: "[") ? .verid : .protobuf
    }
}
