import Glibc
import Logging
import NIOCore
import Prometheus
import RegistryEngine
import RegistryModel
import RegistryProtocol
import ServiceLifecycle
import SwiftProtobuf
import Synchronization
import TestSupport
import Testing

@testable import RegistryServer

/// The metrics `stats` carries in the Prometheus text format, through the dispatcher over a real store.
@Suite struct MetricsTests {
    let fixture: ServerFixture
    var metrics: ServerMetrics { self.fixture.metrics }
    var engine: Engine { self.fixture.engine }
    var dispatcher: RequestDispatcher { self.fixture.dispatcher }
    var root: Peer { self.fixture.root }

    init() throws {
        self.fixture = try ServerFixture("registryd-metrics")
    }

    func cleanUp() {
        self.fixture.close()
    }

    @discardableResult
    func send(_ request: Registry_V1_Request, from peer: Peer? = nil) async throws -> Registry_V1_Response {
        let reply = await self.dispatcher.respond(to: try ByteBuffer(message: request), from: peer ?? self.root)
        return try Registry_V1_Response(serializedBytes: Array(reply.frame.readableBytesView))
    }

    func stats() async throws -> Registry_V1_StatsResult {
        let response = try await self.send(.with { $0.stats = .init() })
        guard case .stats(let stats) = response.result else {
            Issue.record("stats failed: \(response)")
            return Registry_V1_StatsResult()
        }
        return stats
    }

    func exposition() async throws -> String {
        try await self.stats().metrics
    }

    static func template(_ hot: Int) -> Registry_V1_Template {
        .with {
            $0.algorithm = 24
            $0.vector = (0..<128).map { $0 == hot ? 1 : 0 }
        }
    }

    static func register(_ identifier: String, _ hot: Int, gallery: String = "") -> Registry_V1_Request {
        .with {
            $0.register = .with {
                $0.gallery = gallery
                $0.identifier = identifier
                $0.face.templates = [Self.template(hot)]
            }
        }
    }

    static func authenticate(_ identifier: String, _ hot: Int) -> Registry_V1_Request {
        .with {
            $0.authenticate = .with {
                $0.identifier = identifier
                $0.face.templates = [Self.template(hot)]
            }
        }
    }

    /// Before any request: the series of refusals exist at 0 (a query reads 0, not "no data").
    @Test func errorSeriesArePresentAtZeroFromTheStart() async throws {
        defer { self.cleanUp() }
        let lines = try await self.exposition().split(separator: "\n")
        for line in [
            #"registryd_request_errors_total{operation="authenticate",code="INTERNAL"} 0"#,
            #"registryd_request_errors_total{operation="unknown",code="INTERNAL"} 0"#,
            #"registryd_requests_total{operation="unknown",outcome="refused"} 0"#,
        ] {
            #expect(lines.contains(Substring(line)), "missing: \(line)")
        }
    }

    @Test func requestsAreCountedByOperationOutcomeAndErrorCodeAndTimed() async throws {
        defer { self.cleanUp() }
        try await self.send(Self.register("alice-identifier", 1))
        try await self.send(Self.register("bob-identifier", 1))  // the same face: SIMILAR_FACE_REGISTERED
        try await self.send(Self.authenticate("alice-identifier", 1))  // match
        try await self.send(Self.authenticate("alice-identifier", 2))  // no match
        try await self.send(Self.authenticate("alice-identifier", 1), from: Peer(uid: 54_321, gid: 54_321, pid: 2, groups: []))
        _ = await self.dispatcher.respond(to: ByteBuffer(bytes: [0xFF, 0xFF, 0xFF]), from: self.root)
        let text = try await self.exposition()
        for line in [
            #"registryd_requests_total{operation="register",outcome="ok"} 1"#,
            #"registryd_requests_total{operation="register",outcome="refused"} 1"#,
            #"registryd_request_errors_total{operation="register",code="SIMILAR_FACE_REGISTERED"} 1"#,
            #"registryd_requests_total{operation="authenticate",outcome="match"} 1"#,
            #"registryd_requests_total{operation="authenticate",outcome="no-match"} 1"#,
            #"registryd_request_errors_total{operation="authenticate",code="PERMISSION_DENIED"} 1"#,
            #"registryd_request_errors_total{operation="unknown",code="MALFORMED_REQUEST"} 1"#,
            #"registryd_request_duration_seconds_count{operation="authenticate"} 3"#,
            #"registryd_request_duration_seconds_bucket{operation="authenticate",le="+Inf"} 3"#,
            #"registryd_gallery_requests_total{gallery="default",operation="authenticate"} 2"#,
            #"registryd_gallery_requests_total{gallery="default",operation="register"} 1"#,
            #"registryd_templates{gallery="default",algorithm="arcface"} 1.0"#,
            #"registryd_identifiers{gallery="default"} 1.0"#,
            "registryd_writer_queue_depth 0.0",
            "# TYPE registryd_request_duration_seconds histogram",
            "# HELP registryd_requests_total Requests answered (outcome ok, match, no-match) or refused (an error reply), by operation.",
        ] {
            #expect(text.split(separator: "\n").contains(Substring(line)), "missing: \(line)")
        }
        // The registration and the refused one each ran in a commit of the writer.
        #expect(text.split(separator: "\n").contains { $0.hasPrefix("registryd_commit_duration_seconds_count ") && !$0.hasSuffix(" 0") })
        // An operation that decides matches has no `ok` series, one that does not no match series.
        #expect(!text.contains(#"{operation="authenticate",outcome="ok"}"#))
        #expect(!text.contains(#"{operation="register",outcome="match"}"#))
        // Identifiers are never labels or values.
        #expect(!text.contains("alice") && !text.contains("bob"))
    }

    /// The figures `registryctl stats` shows come as typed fields, read from the same metrics as the
    /// text: the same counts, errors and latencies as the text gives for every operation.
    @Test func theTypedFiguresAgreeWithTheExposition() async throws {
        defer { self.cleanUp() }
        try await self.send(Self.register("alice-identifier", 1))
        try await self.send(Self.register("bob-identifier", 1))  // SIMILAR_FACE_REGISTERED
        for hot in [1, 2, 1, 3] { try await self.send(Self.authenticate("alice-identifier", hot)) }
        try await self.send(Self.authenticate("carol-identifier", 1))  // IDENTIFIER_NOT_REGISTERED
        try await self.send(Self.authenticate("alice-identifier", 1), from: Peer(uid: 54_321, gid: 54_321, pid: 2, groups: []))
        _ = await self.dispatcher.respond(to: ByteBuffer(bytes: [0xFF, 0xFF, 0xFF]), from: self.root)
        try await self.send(.with { $0.listGalleries = .init() })
        _ = try await self.stats()  // so that stats itself has been counted once

        let stats = try await self.stats()
        let text = Samples(stats.metrics)
        #expect(stats.operations.map(\.operation) == ["authenticate", "register", "list_galleries", "stats", "unknown"])
        let named = Set(text.values("registryd_requests_total").compactMap { $0.labels["operation"] })
        let counted = named.filter { text.total("registryd_requests_total", ["operation": $0]) > 0 }
        #expect(Set(stats.operations.map(\.operation)) == counted)
        for figures in stats.operations {
            let operation = figures.operation
            func requests(_ outcome: String) -> UInt64 {
                UInt64(text.total("registryd_requests_total", ["operation": operation, "outcome": outcome]))
            }
            #expect(
                [figures.ok, figures.match, figures.noMatch, figures.refused]
                    == [requests("ok"), requests("match"), requests("no-match"), requests("refused")], "\(operation)")
            let errors = text.values("registryd_request_errors_total", ["operation": operation])
            // (The exposition has INTERNAL at 0 from the start; stats lists codes that happened.)
            #expect(
                figures.errors == Dictionary(uniqueKeysWithValues: errors.filter { $0.value > 0 }.map { ($0.labels["code"]!, UInt64($0.value)) }),
                "\(operation)")
            let latency = try #require(text.histogram("registryd_request_duration_seconds", ["operation": operation]))
            #expect(figures.hasLatency)
            #expect(abs(figures.latency.meanSeconds - latency.sum / latency.count) <= 1e-12 * figures.latency.meanSeconds, "\(operation)")
            #expect(figures.latency.p50Seconds == latency.quantile(0.5), "\(operation)")
            #expect(figures.latency.p99Seconds == latency.quantile(0.99), "\(operation)")
        }
        let authenticate = try #require(stats.operations.first)
        #expect(authenticate.match == 2 && authenticate.noMatch == 2 && authenticate.refused == 2)
        #expect(authenticate.errors == ["IDENTIFIER_NOT_REGISTERED": 1, "PERMISSION_DENIED": 1])
        #expect(stats.writer.queueDepth == UInt64(text.total("registryd_writer_queue_depth")))
        let commits = try #require(text.histogram("registryd_commit_duration_seconds"))
        #expect(commits.count > 0 && stats.writer.hasCommitLatency)
        #expect(stats.writer.commitLatency.p50Seconds == commits.quantile(0.5))
        #expect(stats.writer.commitLatency.p99Seconds == commits.quantile(0.99))
    }

    /// Quantiles as Prometheus's `histogram_quantile` computes them (what `registryctl stats` showed
    /// when it read them from the text).
    @Test func quantilesInterpolateInsideTheirBucketAsPrometheusDoes() throws {
        defer { self.cleanUp() }
        // 12 observations: 4 up to 1 ms, 6 more up to 2 ms, 2 above.
        let buckets: [(upperBound: Double, cumulative: Double)] = [(0.001, 4), (0.002, 10), (.infinity, 12)]
        // Rank 6 of 12: 2 into the second bucket's 6 observations, (1 ms, 2 ms].
        #expect(abs(ReadableHistogram.quantile(0.5, count: 12, buckets: buckets) - (0.001 + 0.001 * 2 / 6)) < 1e-12)
        // Rank 2: half into the first bucket, from 0.
        #expect(abs(ReadableHistogram.quantile(1.0 / 6, count: 12, buckets: buckets) - 0.0005) < 1e-12)
        // Rank 11.88 falls in +Inf's bucket: the highest finite bound.
        #expect(ReadableHistogram.quantile(0.99, count: 12, buckets: buckets) == 0.002)

        // Recorded: the same buckets as the exposition's, and the figures from them.
        let histogram = self.metrics.operation("identify", decidesMatches: true).duration
        #expect(histogram.latency == nil)
        for microseconds in [20, 20, 30, 700, 700, 700, 700, 700, 700, 1500, 20_000_000, 20_000_000] {
            histogram.record(duration: .microseconds(microseconds))
        }
        let latency = try #require(histogram.latency)
        #expect(abs(latency.p50Seconds - (0.0005 + 0.0005 * 3 / 6)) < 1e-15)  // rank 6 of 12: 3 into (500 µs, 1 ms]'s 6
        #expect(latency.p99Seconds == 10)
        #expect(abs(latency.meanSeconds - 40.00577 / 12) < 1e-12)
    }

    @Test func aDeletedGalleryLosesItsSeries() async throws {
        defer { self.cleanUp() }
        try await self.send(
            .with {
                $0.defineGallery = .with {
                    $0.gallery = "lobby"
                    $0.registries = [.with { $0.algorithm = 24 }]
                }
            })
        try await self.send(Self.register("carol", 3, gallery: "lobby"))
        #expect(try await self.exposition().contains(#"registryd_templates{gallery="lobby",algorithm="arcface"} 1.0"#))
        try await self.send(.with { $0.deleteGallery = .with { $0.gallery = "lobby" } })
        let text = try await self.exposition()
        #expect(!text.contains(#"registryd_templates{gallery="lobby""#) && !text.contains(#"registryd_identifiers{gallery="lobby"}"#))
        #expect(text.contains(#"registryd_templates{gallery="default",algorithm="arcface"} 0.0"#))
    }

    @Test func galleryLabelsAreBoundedWhateverTheNames() {
        defer { self.cleanUp() }
        let identify = self.metrics.operation("identify", decidesMatches: true)
        for index in 0..<100 { identify.answered(inGallery: "g\(index)", labels: self.metrics) }
        identify.answered(inGallery: "g0", labels: self.metrics)
        let lines = self.metrics.registry.emitToString().split(separator: "\n").filter { $0.hasPrefix("registryd_gallery_requests_total{") }
        #expect(lines.count == ServerMetrics.maximumGalleryLabels + 1)
        #expect(lines.contains(#"registryd_gallery_requests_total{gallery="(other)",operation="identify"} 36"#))
        #expect(lines.contains(#"registryd_gallery_requests_total{gallery="g0",operation="identify"} 2"#))
    }

    @Test func theStatusLineIsRefreshedEveryPeriod() async throws {
        defer { self.cleanUp() }
        let sent = Mutex<[String]>([])
        let service = PeriodicReportService(
            engine: self.engine, dispatcher: self.dispatcher, period: .milliseconds(20), notify: { line in sent.withLock { $0.append(line) } })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await service.run() }
            func waitFor(_ text: String) async throws {
                for _ in 0..<500 where !sent.withLock({ $0.contains { $0.contains(text) } }) { try await Task.sleep(for: .milliseconds(10)) }
            }
            try await waitFor("serving 0 templates in 1 galleries")
            try await self.send(Self.register("dave", 4))
            try await waitFor("serving 1 templates in 1 galleries")
            group.cancelAll()
        }
        let lines = sent.withLock { $0 }
        #expect(lines.first?.hasPrefix("STATUS=serving 0 templates in 1 galleries; 0 connections open, 0 requests served") == true)
        #expect(lines.last?.hasPrefix("STATUS=serving 1 templates in 1 galleries; 0 connections open, 1 requests served") == true)
    }
}

/// The samples of a Prometheus text exposition, enough of the format for these tests: label values
/// without commas or escapes, as the daemon's are.
struct Samples {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    var samples: [Sample] = []

    init(_ text: String) {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            let series = line[..<space]
            let value = line[line.index(after: space)...]
            let name = series.prefix { $0 != "{" }
            var labels: [String: String] = [:]
            if series.count > name.count {
                for pair in series.dropFirst(name.count + 1).dropLast().split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    labels[String(parts[0])] = String(parts[1].dropFirst().dropLast())
                }
            }
            self.samples.append(Sample(name: String(name), labels: labels, value: value == "+Inf" ? .infinity : Double(value) ?? .nan))
        }
    }

    func values(_ name: String, _ matching: [String: String] = [:]) -> [Sample] {
        self.samples.filter { sample in sample.name == name && matching.allSatisfy { sample.labels[$0.key] == $0.value } }
    }

    func total(_ name: String, _ matching: [String: String] = [:]) -> Double {
        self.values(name, matching).reduce(0) { $0 + $1.value }
    }

    struct Histogram {
        var count: Double
        var sum: Double
        var buckets: [(upperBound: Double, cumulative: Double)]

        func quantile(_ q: Double) -> Double { ReadableHistogram.quantile(q, count: self.count, buckets: self.buckets) }
    }

    /// The histogram `name` with labels `matching`, nil when it has no samples.
    func histogram(_ name: String, _ matching: [String: String] = [:]) -> Histogram? {
        let buckets = self.values(name + "_bucket", matching).map { sample in
            (upperBound: sample.labels["le"] == "+Inf" ? Double.infinity : Double(sample.labels["le"]!)!, cumulative: sample.value)
        }
        guard !buckets.isEmpty else { return nil }
        return Histogram(
            count: self.total(name + "_count", matching), sum: self.total(name + "_sum", matching), buckets: buckets.sorted { $0.0 < $1.0 })
    }
}
