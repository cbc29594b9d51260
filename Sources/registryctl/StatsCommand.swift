import ArgumentParser
import RegistryClient
import RegistryModel
import RegistryProtocol

/// `registryctl stats`: every figure the daemon reports, with each gallery's registries.
struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the daemon's statistics in full, with every gallery's registries.")

    @OptionGroup var options: GlobalOptions

    struct Result: CommandResult {
        var serverVersion: String
        var uptimeSeconds: UInt64
        var openConnections: UInt64
        var requestsServed: UInt64
        var storeBytes: UInt64
        var commits: UInt64
        var committedOperations: UInt64
        var scanKernels: String
        var prefilterRowsConsidered: UInt64
        var prefilterRowsRescored: UInt64
        var galleries: [GalleryJSON]
        /// From the metrics: each operation's requests, outcomes, errors and latency.
        var operations: [OperationFigures]
        var writer: WriterFigures
        private var galleryInfos: [GalleryInfo]

        private enum CodingKeys: String, CodingKey {
            case serverVersion, uptimeSeconds, openConnections, requestsServed, storeBytes, commits
            case committedOperations, scanKernels, prefilterRowsConsidered, prefilterRowsRescored, galleries, operations, writer
        }

        init(_ stats: Registry_V1_StatsResult) {
            self.serverVersion = stats.serverVersion
            self.uptimeSeconds = stats.uptimeSeconds
            self.openConnections = stats.openConnections
            self.requestsServed = stats.requestsServed
            self.storeBytes = stats.storeBytes
            self.commits = stats.commits
            self.committedOperations = stats.committedOperations
            self.scanKernels = stats.scanKernels
            self.prefilterRowsConsidered = stats.prefilterRowsConsidered
            self.prefilterRowsRescored = stats.prefilterRowsRescored
            self.galleryInfos = stats.galleries.map(GalleryInfo.init)
            self.galleries = self.galleryInfos.map(GalleryJSON.init)
            let metrics = MetricsText(stats.metrics)
            self.operations = OperationFigures.all(metrics)
            self.writer = WriterFigures(metrics)
        }

        func text(_ names: AlgorithmNames) -> String {
            var table = Table()
            table.append(["server version", self.serverVersion])
            table.append(["uptime", "\(Format.duration(seconds: self.uptimeSeconds)) (\(self.uptimeSeconds) s)"])
            table.append(["open connections", "\(self.openConnections)"])
            table.append(["requests served", "\(self.requestsServed)"])
            table.append(["store", Format.bytes(self.storeBytes)])
            table.append(["commits", "\(self.commits)"])
            table.append(["committed operations", "\(self.committedOperations)"])
            if self.commits > 0 {
                table.append(["operations per commit", Format.fixed(Double(self.committedOperations) / Double(self.commits), digits: 2)])
            }
            table.append(["scan kernels", self.scanKernels.isEmpty ? "-" : self.scanKernels])
            if self.prefilterRowsConsidered > 0 {
                let share = Format.fixed(100 * Double(self.prefilterRowsRescored) / Double(self.prefilterRowsConsidered), digits: 3)
                table.append(["prefilter", "\(self.prefilterRowsConsidered) rows considered, \(share) % rescored"])
            }
            table.append(["writer queue", "\(self.writer.queueDepth) waiting"])
            if let p50 = self.writer.commitP50Seconds, let p99 = self.writer.commitP99Seconds {
                table.append(["commit latency", "p50 \(Format.latency(p50)), p99 \(Format.latency(p99))"])
            }
            var lines = table.lines()
            if !self.operations.isEmpty {
                var requests = Table(header: ["operation", "answered", "match", "no-match", "refused", "mean", "p50", "p99"])
                for figures in self.operations {
                    requests.append(
                        [
                            figures.operation, "\(figures.answered)", "\(figures.match)", "\(figures.noMatch)",
                            "\(figures.refused)",
                        ] + [figures.meanSeconds, figures.p50Seconds, figures.p99Seconds].map { $0.map(Format.latency) ?? "-" })
                }
                lines += [""] + requests.lines()
                let errors = self.operations.flatMap { figures in
                    figures.errors.sorted { $0.key < $1.key }.map { (figures.operation, $0.key, $0.value) }
                }
                if !errors.isEmpty {
                    var table = Table(header: ["operation", "error", "count"])
                    for (operation, code, count) in errors { table.append([operation, code, "\(count)"]) }
                    lines += [""] + table.lines()
                }
            }
            for gallery in self.galleryInfos {
                lines.append("")
                lines += GalleryJSON.lines(gallery)
            }
            return lines.joined(separator: "\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in Result(try await client.stats()) }
    }
}

/// One operation's figures since the daemon started (`registryd_requests_total`,
/// `registryd_request_errors_total`, `registryd_request_duration_seconds`).
struct OperationFigures: Encodable, Equatable {
    var operation: String
    var ok: UInt64
    var match: UInt64
    var noMatch: UInt64
    var refused: UInt64
    /// Refusals by error code.
    var errors: [String: UInt64]
    var meanSeconds: Double?
    var p50Seconds: Double?
    var p99Seconds: Double?

    var answered: UInt64 { self.ok + self.match + self.noMatch }

    /// Every operation the metrics count, busiest first.
    static func all(_ metrics: MetricsText) -> [OperationFigures] {
        let names = Set(metrics.values("registryd_requests_total").compactMap { $0.labels["operation"] })
        return names.map { name in
            let requests = { (outcome: String) in UInt64(metrics.total("registryd_requests_total", ["operation": name, "outcome": outcome])) }
            var errors: [String: UInt64] = [:]
            for sample in metrics.values("registryd_request_errors_total", ["operation": name]) where sample.value > 0 {
                errors[sample.labels["code"] ?? "?", default: 0] += UInt64(sample.value)
            }
            let latency = metrics.histogram("registryd_request_duration_seconds", ["operation": name])
            return OperationFigures(
                operation: name, ok: requests("ok"), match: requests("match"), noMatch: requests("no-match"), refused: requests("refused"),
                errors: errors, meanSeconds: latency?.mean, p50Seconds: latency?.quantile(0.5), p99Seconds: latency?.quantile(0.99))
        }
        .filter { $0.answered + $0.refused > 0 }
        .sorted { ($0.answered + $0.refused, $1.operation) > ($1.answered + $1.refused, $0.operation) }
    }
}

/// The writer thread's queue and commits (`registryd_writer_queue_depth`,
/// `registryd_commit_duration_seconds`).
struct WriterFigures: Encodable, Equatable {
    var queueDepth: UInt64
    var commitP50Seconds: Double?
    var commitP99Seconds: Double?

    init(_ metrics: MetricsText) {
        self.queueDepth = UInt64(max(0, metrics.total("registryd_writer_queue_depth")))
        let commits = metrics.histogram("registryd_commit_duration_seconds")
        self.commitP50Seconds = commits?.quantile(0.5)
        self.commitP99Seconds = commits?.quantile(0.99)
    }
}
