import ArgumentParser
import RegistryClient
import RegistryModel
import RegistryProtocol

/// `registryctl metrics`: the daemon's metrics in the Prometheus text format, for node_exporter's
/// textfile collector (the daemon is sandboxed without network, so nothing scrapes it directly).
struct MetricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print the daemon's metrics in the Prometheus text format.",
        discussion: """
            With --output, the text is written to a temporary file and renamed into place (mode 0644), \
            so that node_exporter's textfile collector never reads half a file; \
            systemd/registryd-metrics.timer runs it every 15 seconds.
            """)

    @OptionGroup var options: GlobalOptions

    @Option(
        name: .shortAndLong, help: ArgumentHelp("Write to this file (e.g. …/registryd.prom) instead of standard output.", valueName: "file"),
        completion: .file())
    var output: String?

    struct Result: CommandResult {
        var metrics: String
        /// Where the text went, when not to standard output (the text output is then empty).
        var file: String?

        func text(_ names: AlgorithmNames) -> String {
            guard self.file == nil else { return "" }
            // The format ends each sample with a newline; print adds the last one.
            return self.metrics.hasSuffix("\n") ? String(self.metrics.dropLast()) : self.metrics
        }
    }

    func run() async throws {
        let runner = Runner(self.options)
        do {
            try await runner.run { client in
                let metrics = try await client.stats().metrics
                guard let output = self.output, output != "-" else { return Result(metrics: metrics) }
                try Self.write(metrics, to: output)
                return Result(metrics: metrics, file: output)
            }
        } catch let failure as ExitCode where failure != .success {
            // The daemon could not be read: the file says so rather than keep the last counters,
            // which node_exporter would go on exporting as if they were current.
            if let output = self.output, output != "-" { try? Self.write(Self.down, to: output) }
            throw failure
        }
    }

    /// The file written when the daemon could not be read: `registryd_up 0`.
    static let down = """
        # HELP \(UpMetric.name) \(UpMetric.help)
        # TYPE \(UpMetric.name) gauge
        \(UpMetric.name) 0

        """

    /// Writes `text` to a temporary file beside `path` and renames it into place, readable by all.
    private static func write(_ text: String, to path: String) throws {
        let sink = try OutputSink(path: path, mode: 0o644)
        try sink.write(text)
        try sink.commit()
    }
}
