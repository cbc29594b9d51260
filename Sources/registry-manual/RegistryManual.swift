import ArgumentParser
import Foundation

/// `registry-manual`: the manual pages of registryctl and registryd (tools/install runs it).
///
/// Why not swift-argument-parser's generate-manual alone: its pages end with a generic EXIT STATUS
/// (`.Ex -std`, ">0 on error"), have no ENVIRONMENT, FILES or useful SEE ALSO, name subcommand pages
/// `registryctl.register.1`, give every command without subcommands a `subcommand` in its SYNOPSIS,
/// leave blank lines in the text (groff warns), and print a table in a help text as filled prose.
/// Post-processing its mdoc would mean parsing mdoc; this reads the same `--experimental-dump-help`
/// document it reads, so names, abstracts, discussions, options and defaults still come from the
/// binaries' own help, and adds only what help does not say (Extras.swift). The EXIT STATUS table is
/// the one the tool's `--help` prints, taken from its top-level discussion.
@main
struct RegistryManual: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry-manual",
        abstract: "Write the manual pages of registryctl or registryd from the binary's own help.",
        discussion: """
            registryctl: registryctl.1 and one page per command (registryctl-register.1, \
            registryctl-delete-identifier.1, ...) in section 1; registryd: registryd.8.
            """)

    @Argument(help: "The registryctl or registryd binary.", completion: .file())
    var tool: String

    @Option(name: .shortAndLong, help: "The directory to write the pages into (created if missing).", completion: .directory)
    var outputDirectory: String

    @Option(help: "The pages' date, yyyy-mm-dd (default: today).")
    var date: String?

    @Option(help: "The installation prefix, for FILES.")
    var prefix = InstallLayout().prefix

    @Option(help: "Where the units are installed, for FILES.")
    var unitDir = InstallLayout().unitDirectory

    @Option(help: "Where the sysusers.d entry is installed, for FILES.")
    var sysusersDir = InstallLayout().sysusersDirectory

    @Option(help: "Where the tmpfiles.d entry is installed, for FILES.")
    var tmpfilesDir = InstallLayout().tmpfilesDirectory

    func run() throws {
        let name = URL(fileURLWithPath: self.tool).lastPathComponent
        let section = name == "registryd" ? 8 : 1
        let layout = InstallLayout(
            prefix: self.prefix, unitDirectory: self.unitDir, sysusersDirectory: self.sysusersDir, tmpfilesDirectory: self.tmpfilesDir)
        let extras = try ManualExtras.forTool(name, layout: layout)
        let info = try JSONDecoder().decode(ToolInfo.self, from: try Self.output(of: self.tool, ["--experimental-dump-help"]))
        guard info.serializationVersion == 0 else {
            throw ManualError(description: "\(self.tool): dump-help serialization version \(info.serializationVersion), expected 0")
        }
        let version = String(decoding: try Self.output(of: self.tool, ["--version"]), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let writer = try PageWriter(
            root: info.command, version: "registryd \(version)", section: section, date: self.date ?? Self.today(), extras: extras)
        let directory = URL(fileURLWithPath: self.outputDirectory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for page in writer.pages() {
            try Data(page.text.utf8).write(to: directory.appendingPathComponent(page.fileName))
            print(page.fileName)
        }
    }

    /// The tool's standard output; throws when it fails.
    static func output(of tool: String, _ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ManualError(description: "\(tool) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return data
    }

    static func today() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date())
    }
}
