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
    let directory: String
    let metrics = ServerMetrics()
    let engine: Engine
    let dispatcher: RequestDispatcher
    let root = Peer(uid: 0, gid: 0, pid: 1, groups: [0])

    init() throws {
        self.directory = TemporaryDirectory("registryd-metrics").path
        self.engine = try Engine(path: self.directory + "/data", metrics: self.metrics.factory)
        self.dispatcher = RequestDispatcher(engine: self.engine, logger: Logger(label: "test"), policy: try AccessPolicy(nil), metrics: self.metrics)
    }

    func cleanUp() {
        self.engine.close()
        _ = system("rm -rf '\(self.directory)'")
    }

    @discardableResult
    func send(_ request: Registry_V1_Request, from peer: Peer? = nil) async throws -> Registry_V1_Response {
        let reply = await self.dispatcher.respond(to: try ByteBuffer(message: request), from: peer ?? self.root)
        return try Registry_V1_Response(serializedBytes: Array(reply.frame.readableBytesView))
    }

    func exposition() async throws -> String {
        let response = try await self.send(.with { $0.stats = .init() })
        guard case .stats(let stats) = response.result else {
            Issue.record("stats failed: \(response)")
            return ""
        }
        return stats.metrics
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
