import FoundationEssentials
import TestSupport
import Testing

/// For scripts: `--json --compact` prints the document on one line, `--no-legend` drops a table's
/// header line; both may come before the command, as --json and --socket may.
@Suite struct OutputStyleTests {
    @Test func compactJSONIsOneLineAndNoLegendDropsTheHeader() throws {
        let daemon = try Daemon()
        let binary = try #require(siblingExecutable("registryctl"))
        let log = daemon.directory + "/registryctl.out"
        func registryctl(_ arguments: [String]) throws -> String {
            let (status, output) = try run([binary] + arguments + ["--socket", daemon.socketPath], log: log)
            #expect(status == 0, "\(arguments): \(output)")
            return output
        }
        let table = try registryctl(["algorithms"]).split(separator: "\n")
        #expect(table.first?.hasPrefix("VERSION") == true, "\(table)")
        let bare = try registryctl(["algorithms", "--no-legend"]).split(separator: "\n")
        // The same rows (their columns sized to the rows alone).
        let words = { (lines: [Substring]) in lines.map { $0.split(separator: " ") } }
        #expect(words(Array(bare)) == words(Array(table.dropFirst())), "\(bare)")
        #expect(Array(try registryctl(["--no-legend", "algorithms"]).split(separator: "\n")) == Array(bare))

        let pretty = try registryctl(["status", "--json"])
        let compact = try registryctl(["--json", "--compact", "status"])
        #expect(pretty.split(separator: "\n").count > 3 && compact.split(separator: "\n").count == 1, "\(compact)")
        struct Status: Decodable, Equatable { var serverVersion: String }
        #expect(try JSONDecoder().decode(Status.self, from: Data(compact.utf8)) == JSONDecoder().decode(Status.self, from: Data(pretty.utf8)))
    }
}
