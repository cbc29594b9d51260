import FoundationEssentials
import Glibc
import TestSupport
import Testing

/// Command lines registryctl cannot run, as a script meets them: exit 64, `registryctl: USAGE: …`
/// then the usage, and with --json the error document; `registryctl` alone is one of them (a script
/// that lost its arguments must not succeed), while asking for help still exits 0.
@Suite struct UsageErrorTests {
    static func registryctl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let binary = try #require(siblingExecutable("registryctl"), "registryctl not found next to the tests")
        let directory = TemporaryDirectory("registryctl-usage")
        defer { directory.remove() }
        return try run([binary] + arguments, log: directory.path + "/out")
    }

    @Test func aMissingCommandOrArgumentIsAUsageErrorInTheDocumentedForm() throws {
        for (arguments, message) in [
            ([], "a command is required (status, galleries"), (["delete"], "a command is required (identifier, template, gallery)"),
            (["delete", "gallery"], "Missing expected argument '<name>'"), (["frobnicate"], "Unexpected argument 'frobnicate'"),
            (["status", "--bogus"], "Unknown option '--bogus'"),
        ] {
            let (status, output) = try Self.registryctl(arguments)
            #expect(status == 64, "registryctl \(arguments): \(output)")
            #expect(output.hasPrefix("registryctl: USAGE: \(message)"), "registryctl \(arguments): \(output)")
            #expect(output.contains("Usage: registryctl"), "registryctl \(arguments): \(output)")
            #expect(!output.contains("Error: "), "registryctl \(arguments): \(output)")
        }
        let (status, output) = try Self.registryctl(["--json"])
        #expect(status == 64)
        let document = try #require(output.split(separator: "\n}\n").first.map { $0 + "\n}" }, "\(output)")
        let decoded = try JSONDecoder().decode(UsageDocument.self, from: Data(document.utf8))
        #expect(decoded.error.code == "USAGE" && decoded.error.exitStatus == 64)

        #expect(try Self.registryctl(["--help"]).status == 0)
        #expect(try Self.registryctl(["delete", "--help"]).status == 0)
    }
}

private struct UsageDocument: Decodable {
    struct Body: Decodable {
        var code: String
        var exitStatus: Int32
    }
    var error: Body
}
