import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// `registryctl metrics` and `registryctl stats` against a real daemon: the Prometheus text for
/// node_exporter's textfile collector, and the same figures read back for people.
@Suite struct MetricsEndToEndTests {
    /// A daemon that has registered one face, authenticated it once (a match) and against another
    /// face once (no match), and refused one similar-face registration.
    static func busyDaemon() async throws -> Daemon {
        let daemon = try Daemon()
        let client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(1))))
        _ = try? await client.register(identifier: "bob", face: Face(FaceTemplate(algorithm: 24, vector: axis(1))))
        _ = try await client.authenticate(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(1))), autoEnrol: false)
        _ = try await client.authenticate(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(2))), autoEnrol: false)
        await client.close()
        return daemon
    }

    func registryctl(_ arguments: [String], _ daemon: Daemon) throws -> (status: Int32, output: String) {
        let binary = try #require(siblingExecutable("registryctl"))
        return try run([binary] + arguments + ["--socket", daemon.socketPath], log: daemon.directory + "/registryctl.out")
    }

    @Test func metricsPrintsThePrometheusTextFormat() async throws {
        let daemon = try await Self.busyDaemon()
        let (status, output) = try self.registryctl(["metrics"], daemon)
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n")
        #expect(lines.contains(#"registryd_requests_total{operation="authenticate",outcome="match"} 1"#))
        #expect(lines.contains(#"registryd_requests_total{operation="authenticate",outcome="no-match"} 1"#))
        #expect(lines.contains(#"registryd_request_errors_total{operation="register",code="SIMILAR_FACE_REGISTERED"} 1"#))
        #expect(lines.contains("# TYPE registryd_commit_duration_seconds histogram"))
        // Every line a comment or `name{labels} value`, as the format (and node_exporter) requires.
        for line in lines where !line.hasPrefix("# HELP ") && !line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            #expect(parts.count == 2 && Double(parts[1]) != nil, "not a sample line: \(line)")
        }
        #expect(!output.contains("alice") && !output.contains("bob"))
    }

    @Test func metricsWritesAFileForTheTextfileCollectorInOneRename() async throws {
        let daemon = try await Self.busyDaemon()
        let file = daemon.directory + "/textfile/registryd.prom"
        mkdir(daemon.directory + "/textfile", 0o755)
        let (status, output) = try self.registryctl(["metrics", "--output", file], daemon)
        #expect(status == 0 && output.isEmpty, "\(output)")
        var info = stat()
        #expect(stat(file, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o644, "node_exporter runs as another user: the file must be readable")
        #expect(readFileText(file).contains("registryd_request_duration_seconds_count{operation=\"authenticate\"} 2"))
        let leftovers = try #require(opendir(daemon.directory + "/textfile"))
        defer { closedir(leftovers) }
        var names: [String] = []
        while let entry = readdir(leftovers) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        #expect(names == ["registryd.prom"])
        // A directory that does not exist: exit status 3 (a file error), and nothing half-written.
        let (failed, message) = try self.registryctl(["metrics", "--output", daemon.directory + "/missing/registryd.prom"], daemon)
        #expect(failed == 3, "\(message)")
    }

    /// node_exporter goes on exporting whatever file is there: when the daemon cannot be read, the
    /// file must say so (`registryd_up 0`), not keep the last counters; once it answers, the counters
    /// come back.
    @Test func aStoppedDaemonLeavesAFileSayingItIsDownNotStaleCounters() async throws {
        let daemon = try await Self.busyDaemon()
        let file = daemon.directory + "/registryd.prom"
        let (status, output) = try self.registryctl(["metrics", "--output", file], daemon)
        #expect(status == 0, "\(output)")
        let live = readFileText(file)
        #expect(Self.value(of: "registryd_up", in: live) == 1)
        #expect(Self.value(of: #"registryd_build_info{version="\#(RegistryVersion.current)"}"#, in: live) == 1)
        let startTime = Self.value(of: "process_start_time_seconds", in: live) ?? 0
        #expect(abs(startTime - Double(time(nil))) < 600, "process_start_time_seconds: \(startTime)")

        #expect(daemon.stop() == 0)
        let (down, message) = try self.registryctl(["metrics", "--output", file], daemon)
        #expect(down == 4, "\(message)")
        let written = readFileText(file)
        #expect(Self.value(of: "registryd_up", in: written) == 0)
        #expect(written.split(separator: "\n").contains("# TYPE registryd_up gauge"))
        #expect(!written.contains("registryd_requests_total"), "the last counters were kept")

        try daemon.start()
        let (back, again) = try self.registryctl(["metrics", "--output", file], daemon)
        #expect(back == 0, "\(again)")
        #expect(Self.value(of: "registryd_up", in: readFileText(file)) == 1)
    }

    /// The value of the sample `series` (name and labels as written) in Prometheus text, if present.
    static func value(of series: String, in text: String) -> Double? {
        text.split(separator: "\n").lazy.compactMap { line -> Double? in
            guard line.hasPrefix(series + " ") else { return nil }
            return Double(line.dropFirst(series.count + 1))
        }.first
    }

    @Test func statsShowsRequestsByOperationAndTheWriter() async throws {
        let daemon = try await Self.busyDaemon()
        let (status, output) = try self.registryctl(["stats"], daemon)
        #expect(status == 0, "\(output)")
        let authenticate = output.split(separator: "\n").first { $0.hasPrefix("authenticate ") }
        let cells = authenticate?.split(separator: " ", omittingEmptySubsequences: true) ?? []
        // operation, ok, match, no-match, refused (as --json names them), then three latencies with their units.
        #expect(cells.prefix(5) == ["authenticate", "0", "1", "1", "0"], "\(output)")
        #expect(output.contains("register   SIMILAR_FACE_REGISTERED  1"), "\(output)")
        #expect(output.contains("commit latency"))
        let (jsonStatus, json) = try self.registryctl(["stats", "--json"], daemon)
        #expect(jsonStatus == 0)
        #expect(json.contains(#""operation" : "authenticate""#) && json.contains(#""queueDepth" : 0"#), "\(json)")
    }
}
