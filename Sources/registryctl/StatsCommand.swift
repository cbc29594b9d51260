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
        var galleries: [GalleryInfo]
        /// Each operation's requests, outcomes, errors and latency (the daemon's metrics).
        var operations: [OperationFigures]
        var writer: WriterFigures
        /// Fleet mode only.
        var fleet: FleetFigures?

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
            self.galleries = stats.galleries.map(GalleryInfo.init)
            self.operations = stats.operations.map(OperationFigures.init)
            self.writer = WriterFigures(stats.writer)
            self.fleet = FleetFigures(stats)
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
            if let fleet = self.fleet {
                table.append(["fleet", fleet.line])
                table.append(["fleet id", fleet.fleetId.isEmpty ? "-" : fleet.fleetId])
            }
            if let p50 = self.writer.commitP50Seconds, let p99 = self.writer.commitP99Seconds {
                table.append(["commit latency", "p50 \(Format.latency(p50)), p99 \(Format.latency(p99))"])
            }
            var lines = table.lines()
            if !self.operations.isEmpty {
                // The outcomes as --json and the metrics name them (ok, match, no-match, refused).
                var requests = Table(header: ["operation", "ok", "match", "no-match", "refused", "mean", "p50", "p99"])
                for figures in self.operations {
                    requests.append(
                        [
                            figures.operation, "\(figures.ok)", "\(figures.match)", "\(figures.noMatch)",
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
            for gallery in self.galleries {
                lines.append("")
                lines += gallery.lines
            }
            return lines.joined(separator: "\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in Result(try await client.stats()) }
    }
}

/// One operation's figures since the daemon started, as `stats` sends them (from the metrics
/// `registryd_requests_total`, `registryd_request_errors_total` and
/// `registryd_request_duration_seconds`), flat for `--json`: the latency beside the counts, as the
/// JSON has always had it (the wire nests it).
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

    init(_ figures: Registry_V1_StatsResult.OperationStats) {
        self.operation = figures.operation
        self.ok = figures.ok
        self.match = figures.match
        self.noMatch = figures.noMatch
        self.refused = figures.refused
        self.errors = figures.errors
        if figures.hasLatency {
            // To the nanosecond: the quantiles are interpolated, and 0.0045000000000000005 s says
            // nothing more than 0.0045 s.
            self.meanSeconds = Self.nanoseconds(figures.latency.meanSeconds)
            self.p50Seconds = Self.nanoseconds(figures.latency.p50Seconds)
            self.p99Seconds = Self.nanoseconds(figures.latency.p99Seconds)
        }
    }
}

extension OperationFigures {
    static func nanoseconds(_ seconds: Double) -> Double { (seconds * 1e9).rounded() / 1e9 }
}

/// The writer thread's queue and commits (`registryd_writer_queue_depth`,
/// `registryd_commit_duration_seconds`).
struct WriterFigures: Encodable, Equatable {
    var queueDepth: UInt64
    var commitP50Seconds: Double?
    var commitP99Seconds: Double?

    init(_ writer: Registry_V1_StatsResult.WriterStats) {
        self.queueDepth = writer.queueDepth
        if writer.hasCommitLatency {
            self.commitP50Seconds = writer.commitLatency.p50Seconds
            self.commitP99Seconds = writer.commitLatency.p99Seconds
        }
    }
}
