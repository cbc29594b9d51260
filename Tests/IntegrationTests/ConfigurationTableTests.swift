import Glibc
import TestSupport
import Testing

/// `registryd --check-config` runs the checks a real start makes before it binds the socket and opens
/// the store: for each broken configuration both refuse it, naming the same problem at its place in
/// the file, and a file with many problems has all of them reported by both.
@Suite struct ConfigurationTableTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var json: String
        /// What both must say.
        var expected: String
        /// The open-file limit to run under (ulimit -n), when the case is about it.
        var fileLimit: Int?
        var testDescription: String { self.expected }
    }

    static let cases: [Case] = [
        Case(
            json: #"{"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface", "authentication": 1.5}]}]}"#,
            expected: "galleries[0].registries[0].authentication: arcface authentication threshold 1.5 is outside (0, 1]"),
        Case(json: #"{"galleries": [{"name": "bad name!", "registries": [{"algorithm": "arcface"}]}]}"#, expected: "galleries[0].name: "),
        Case(json: #"{"limits": {"maximumConnections": 100000}}"#, expected: "limits.maximumConnections is 100000", fileLimit: 20000),
        Case(
            json: #"{"galleries": [{"name": "staff", "registries": [{"algorithm": "arcfaec"}]}]}"#,
            expected: "galleries[0].registries[0].algorithm: gallery staff: unknown algorithm 'arcfaec'"),
        Case(
            json: #"{"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface"}, {"algorithm": "24"}]}]}"#,
            expected: "galleries[0].registries[1].algorithm: gallery 'staff' lists arcface (24) twice"),
        Case(
            json: #"{"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface"}], "livenessK": 50}]}"#,
            expected: "galleries[0].livenessK: gallery 'staff' liveness k must be within (0, 10.0]"),
        Case(
            json: #"{"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface", "minimumQuality": 2}]}]}"#,
            expected: "galleries[0].registries[0].minimumQuality: arcface minimumQuality 2.0 is outside [0, 1]"),
        Case(
            json: #"{"galleries": [{"name": "staff", "registries": []}]}"#,
            expected: "galleries[0].registries: gallery 'staff' needs at least one registry"),
        Case(json: #"{"access": {"*": {"admin": ["user:nobody-here-at-all"]}}}"#, expected: #"access["*"].admin[0]: no user 'nobody-here-at-all'"#),
        Case(json: #"{"keyFile": "/nonexistent/store.key"}"#, expected: "keyFile: cannot read the key file /nonexistent/store.key"),
        Case(
            json: #"{"fleet": {"url": "postgresql://registry:secret@db/registry", "node": "door-1", "keyFile": "/nonexistent/fleet.key"}}"#,
            expected: "fleet.url: "),
        Case(json: #"{"fleet": {"url": "postgresql://registry@db/registry", "node": "door 1"}}"#, expected: "fleet.node must be 1 to 64"),
        Case(json: #"{"fleet": {"url": "postgresql://registry@db/registry", "node": "door-1"}}"#, expected: "fleet mode needs the fleet key"),
        Case(
            json: #"{"algorithms": [{"version": 9000, "name": "mine", "dimension": 64, "scoreFunction": "cosinus", "threshold": 0.5}]}"#,
            expected: "algorithms[0].scoreFunction: algorithm mine: scoreFunction must be one of"),
        Case(json: #"{"audit": {"maximumEntries": 0}}"#, expected: "audit.maximumEntries must be at least 1"),
        // The second of two wrong values: both are reported in one run.
        Case(json: #"{"logLevel": 3, "limits": {"idleTimeoutSeconds": true}}"#, expected: "limits.idleTimeoutSeconds must be a whole number"),
        Case(
            json:
                #"{"galleries": [{"name": "staff", "registries": [{"algorithm": "arcface"}]}, {"name": "staff", "registries": [{"algorithm": "r300"}]}]}"#,
            expected: "galleries[1].name: gallery 'staff' is listed twice (first as galleries[0])"),
    ]

    /// Runs registryd on `json` (written to a file) with `arguments`, under `fileLimit` if given; a
    /// start that wrongly succeeds is stopped after 10 s (and then fails the test with status 124).
    static func registryd(_ json: String, _ arguments: [String], fileLimit: Int?, in directory: String) throws -> (status: Int32, output: String) {
        let path = directory + "/registryd.json"
        guard let file = fopen(path, "w") else { throw HarnessError("cannot write \(path)") }
        fputs(json, file)
        fclose(file)
        let binary = try #require(siblingExecutable("registryd"))
        let limit = fileLimit.map { "ulimit -n \($0) && " } ?? ""
        return try run(
            ["/bin/sh", "-c", limit + #"exec timeout 10 "$0" "$@""#, binary] + arguments.map { $0 == "FILE" ? path : $0 }
                + ["--socket", directory + "/s.sock", "--data", directory + "/data"],
            log: directory + "/out.log")
    }

    @Test(arguments: Self.cases)
    func checkConfigAndARealStartAgree(_ broken: Case) throws {
        let directory = TemporaryDirectory("registryd-config-table").path
        defer { _ = system("rm -rf '\(directory)'") }
        let checked = try Self.registryd(broken.json, ["--check-config", "FILE"], fileLimit: broken.fileLimit, in: directory)
        #expect(checked.status == 1 && checked.output.contains(broken.expected), "--check-config: \(checked.output)")
        let started = try Self.registryd(broken.json, ["--config", "FILE"], fileLimit: broken.fileLimit, in: directory)
        #expect(started.status == 1 && started.output.contains(broken.expected), "start: \(started.output)")
        // Refused before anything was bound or opened.
        #expect(access(directory + "/s.sock", F_OK) != 0 && access(directory + "/data", F_OK) != 0)
    }

    /// Key files that are not keys: refused by both before anything is created (a start used to make
    /// an empty store first, and --check-config called them usable).
    @Test(arguments: [[UInt8](repeating: 7, count: 31), Array(String(repeating: "z", count: 64).utf8)])
    func aKeyFileThatIsNoKeyIsRefusedByBoth(_ material: [UInt8]) throws {
        let directory = TemporaryDirectory("registryd-config-table").path
        defer { _ = system("rm -rf '\(directory)'") }
        let key = directory + "/store.key"
        let file = open(key, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #expect(file >= 0 && material.withUnsafeBytes { write(file, $0.baseAddress, $0.count) } == material.count)
        close(file)
        for arguments in [["--check-config", "FILE"], ["--config", "FILE"]] {
            let result = try Self.registryd("{}", arguments + ["--key-file", key], fileLimit: nil, in: directory)
            #expect(result.status == 1, "\(arguments[0]): \(result.output)")
            #expect(
                result.output.contains("the key file \(key) holds \(material.count) bytes that are not a key"), "\(arguments[0]): \(result.output)")
            #expect(access(directory + "/s.sock", F_OK) != 0 && access(directory + "/data", F_OK) != 0, "\(arguments[0]) created something")
        }
    }

    /// A file with more wrong values than one check lists: both list the first 100 and say more follow.
    @Test func moreWrongValuesThanListedAreSaidToFollowByBoth() throws {
        let directory = TemporaryDirectory("registryd-config-table").path
        defer { _ = system("rm -rf '\(directory)'") }
        let galleries = (0..<101).map { _ in #"{"name": 7, "registries": [{"algorithm": "arcface"}]}"# }.joined(separator: ", ")
        for arguments in [["--check-config", "FILE"], ["--config", "FILE"]] {
            let result = try Self.registryd(#"{"galleries": [\#(galleries)]}"#, arguments, fileLimit: nil, in: directory)
            #expect(result.status == 1, "\(arguments[0]): \(result.output)")
            #expect(result.output.contains("galleries[99].name must be a string") && !result.output.contains("galleries[100].name"))
            #expect(result.output.contains("more values of the wrong type follow; fix these 100 and check again"), "\(result.output)")
        }
    }

    @Test func everyProblemOfAFileIsReportedAtOnceByBoth() throws {
        let directory = TemporaryDirectory("registryd-config-table").path
        defer { _ = system("rm -rf '\(directory)'") }
        let json = #"""
            {"limits": {"maximumConnections": 100000, "idleTimeoutSeconds": 0},
             "keyFile": "/nonexistent/store.key",
             "audit": {"maximumEntries": 0},
             "access": {"*": {"admin": ["user:nobody-here-at-all"]}},
             "galleries": [
               {"name": "bad name!", "registries": [{"algorithm": "arcface", "authentication": 1.5}]},
               {"name": "staff", "registries": [{"algorithm": "arcfaec"}], "livenessK": 50},
               {"name": "staff", "registries": [{"algorithm": "arcface"}]}]}
            """#
        let expected = [
            "limits.idleTimeoutSeconds", "galleries[0].name", "galleries[0].registries[0].authentication",
            "galleries[1].registries[0].algorithm", "galleries[1].livenessK",
            "galleries[2].name: gallery 'staff' is listed twice (first as galleries[1])", "keyFile:", "audit.maximumEntries",
            #"access["*"].admin[0]"#, "limits.maximumConnections is 100000",
        ]
        for arguments in [["--check-config", "FILE"], ["--config", "FILE"]] {
            let result = try Self.registryd(json, arguments, fileLimit: 20000, in: directory)
            #expect(result.status == 1, "\(arguments[0]): \(result.output)")
            for problem in expected { #expect(result.output.contains(problem), "\(arguments[0]) misses \(problem): \(result.output)") }
        }
    }
}
