import FoundationEssentials
import TestSupport
import Testing

/// The registryctl built beside the tests, run against `daemon` with `--json`, as a user would.
struct Registryctl {
    let daemon: Daemon
    let binary: String
    /// Where one run's standard output and error go (replaced by each run).
    let output: String

    init(_ daemon: Daemon) throws {
        self.daemon = daemon
        self.binary = try #require(siblingExecutable("registryctl"), "registryctl not found next to the tests")
        self.output = daemon.directory + "/registryctl.out"
    }

    /// Runs `registryctl ARGUMENTS --socket SOCKET --json`; returns its exit status and what it printed.
    func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try IntegrationTests.run([self.binary] + arguments + ["--socket", self.daemon.socketPath, "--json"], log: self.output)
    }

    /// Runs the command, expects exit status `expected` and decodes the JSON document it printed.
    func json<Document: Decodable>(
        _ type: Document.Type, _ arguments: [String], exit expected: Int32 = 0, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Document {
        let (status, printed) = try self.run(arguments)
        #expect(status == expected, "registryctl \(arguments.joined(separator: " ")): exit \(status)\n\(printed)", sourceLocation: sourceLocation)
        do {
            return try JSONDecoder().decode(Document.self, from: Data(printed.utf8))
        } catch {
            throw HarnessError("registryctl \(arguments.joined(separator: " ")): \(error)\n\(printed)")
        }
    }
}
