/// Turning durations and latencies into the printed figures (no Foundation: formatting by hand).
enum Report {
    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Self.seconds(duration) * 1000
    }

    /// `value` with exactly `digits` decimals (rounded half away from zero).
    static func fixed(_ value: Double, _ digits: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale: Int64 = 1
        for _ in 0..<digits { scale *= 10 }
        let scaled = Int64((abs(value) * Double(scale)).rounded())
        let whole = scaled / scale
        let fraction = String(scaled % scale)
        let sign = value < 0 && scaled != 0 ? "-" : ""
        guard digits > 0 else { return "\(sign)\(whole)" }
        return "\(sign)\(whole).\(String(repeating: "0", count: digits - fraction.count))\(fraction)"
    }

    /// The nearest-rank percentile `p` (0…100) of ascending `sorted` values; 0 when there are none.
    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// The one line a run prints.
    static func line(options: Options, tally: Tally, elapsed: Duration) -> String {
        let latencies = tally.latencies.sorted()
        let seconds = Self.seconds(elapsed)
        let rate = seconds > 0 ? Double(latencies.count) / seconds : 0
        let ms = { (value: Double) in Self.fixed(value, 3) }
        return [
            "operation=\(options.operation.rawValue)",
            "people=\(options.people)",
            "connections=\(options.connections)",
            "requests=\(latencies.count)",
            "seconds=\(Self.fixed(seconds, 3))",
            "requests/s=\(Self.fixed(rate, 1))",
            "p50=\(ms(Self.percentile(latencies, 50)))ms",
            "p90=\(ms(Self.percentile(latencies, 90)))ms",
            "p99=\(ms(Self.percentile(latencies, 99)))ms",
            "max=\(ms(latencies.last ?? 0))ms",
            "errors=\(tally.errors)",
        ].joined(separator: " ") + Self.cpu(tally, requests: latencies.count).map { " \($0.0)=\($0.1)" }.joined()
    }

    /// The same figures as one JSON object (for tools/bench).
    static func json(tally: Tally, elapsed: Duration) -> String {
        let latencies = tally.latencies.sorted()
        let seconds = Self.seconds(elapsed)
        let rate = seconds > 0 ? Double(latencies.count) / seconds : 0
        let fields: [(String, String)] =
            [
                ("requests", "\(latencies.count)"), ("seconds", Self.fixed(seconds, 6)), ("requests_per_second", Self.fixed(rate, 1)),
                ("p50_ms", Self.fixed(Self.percentile(latencies, 50), 4)), ("p90_ms", Self.fixed(Self.percentile(latencies, 90), 4)),
                ("p99_ms", Self.fixed(Self.percentile(latencies, 99), 4)), ("max_ms", Self.fixed(latencies.last ?? 0, 4)),
                ("errors", "\(tally.errors)"), ("connections_lost", "\(tally.connectionsLost)"),
            ] + Self.cpu(tally, requests: latencies.count)
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// CPU microseconds per measured request: the daemon's (absent when its /proc entry could not
    /// be read) and the load generator's.
    static func cpu(_ tally: Tally, requests: Int) -> [(String, String)] {
        guard requests > 0 else { return [] }
        var fields: [(String, String)] = []
        if let server = tally.serverCPUSeconds { fields.append(("server_cpu_us_per_request", Self.fixed(server * 1e6 / Double(requests), 2))) }
        if let client = tally.clientCPUSeconds { fields.append(("client_cpu_us_per_request", Self.fixed(client * 1e6 / Double(requests), 2))) }
        return fields
    }

    /// What --seed-only prints: the gallery and how long its import took (`seconds` nil: reused as it was).
    static func seeding(options: Options, seconds: Double?) -> String {
        let fields: [(String, String)] = [
            ("people", "\(options.people)"), ("dimension", "\(options.dimension)"), ("reused", seconds == nil ? "true" : "false"),
            ("seconds", seconds.map { Self.fixed($0, 3) } ?? "0"),
        ]
        guard options.json else { return "seeded " + fields.map { "\($0.0)=\($0.1)" }.joined(separator: " ") }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}
