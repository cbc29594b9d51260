/// The daemon's metrics as `stats` carries them, in the Prometheus text exposition format, read
/// back into the figures `registryctl stats` shows: requests per operation and outcome, latency
/// quantiles from the histograms, errors by code, the writer's queue and commits.
struct MetricsText {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    var samples: [Sample] = []

    /// Reads the samples of `text`; comment lines (`# HELP`, `# TYPE`) and lines that are not samples
    /// are skipped, so a newer daemon's additions never break an older registryctl.
    init(_ text: String) {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            if let sample = Self.sample(line) { self.samples.append(sample) }
        }
    }

    /// `name{label="value",…} number`, label values with the format's escapes (\\, \", \n).
    static func sample(_ line: Substring) -> Sample? {
        var rest = line[...]
        let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }
        guard !name.isEmpty else { return nil }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let key = rest.prefix { $0 != "=" }
                rest = rest.dropFirst(key.count)
                guard rest.hasPrefix("=\"") else { return nil }
                rest = rest.dropFirst(2)
                var value = ""
                var escaped = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(character == "n" ? "\n" : character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        value.append(character)
                    }
                }
                labels[String(key.trimmingPrefix(","))] = value
                if rest.first == "," { rest = rest.dropFirst() }
                guard !rest.isEmpty else { return nil }
            }
            rest = rest.dropFirst()
        }
        let number = rest.drop { $0 == " " }.prefix { $0 != " " }
        let value: Double? =
            switch number {
            case "+Inf": .infinity
            case "-Inf": -.infinity
            default: Double(number)
            }
        return value.map { Sample(name: String(name), labels: labels, value: $0) }
    }

    /// The samples named `name` whose labels include `matching`.
    func values(_ name: String, _ matching: [String: String] = [:]) -> [Sample] {
        self.samples.filter { sample in sample.name == name && matching.allSatisfy { sample.labels[$0.key] == $0.value } }
    }

    /// The sum of the samples named `name` whose labels include `matching`.
    func total(_ name: String, _ matching: [String: String] = [:]) -> Double {
        self.values(name, matching).reduce(0) { $0 + $1.value }
    }

    /// A histogram's observations: count, sum, and cumulative bucket counts by upper bound.
    struct Histogram {
        var count: Double
        var sum: Double
        var buckets: [(upperBound: Double, cumulative: Double)]

        var mean: Double? { self.count > 0 ? self.sum / self.count : nil }

        /// The q-quantile, interpolated linearly inside its bucket as Prometheus's
        /// `histogram_quantile` does; within the highest finite bound when it falls in `+Inf`'s bucket.
        func quantile(_ q: Double) -> Double? {
            guard self.count > 0, let highest = self.buckets.last(where: { $0.upperBound.isFinite }) else { return nil }
            let rank = q * self.count
            var lowerBound = 0.0
            var below = 0.0
            for bucket in self.buckets {
                if bucket.cumulative >= rank {
                    guard bucket.upperBound.isFinite else { return highest.upperBound }
                    let inBucket = bucket.cumulative - below
                    guard inBucket > 0 else { return bucket.upperBound }
                    return lowerBound + (bucket.upperBound - lowerBound) * (rank - below) / inBucket
                }
                lowerBound = bucket.upperBound
                below = bucket.cumulative
            }
            return highest.upperBound
        }
    }

    /// The histogram `name` with labels `matching`, nil when it has no samples.
    func histogram(_ name: String, _ matching: [String: String] = [:]) -> Histogram? {
        let buckets = self.values(name + "_bucket", matching).compactMap { sample -> (Double, Double)? in
            guard let bound = sample.labels["le"] else { return nil }
            let upperBound = bound == "+Inf" ? Double.infinity : Double(bound)
            return upperBound.map { ($0, sample.value) }
        }
        guard !buckets.isEmpty else { return nil }
        return Histogram(
            count: self.total(name + "_count", matching), sum: self.total(name + "_sum", matching),
            buckets: buckets.sorted { $0.0 < $1.0 }.map { (upperBound: $0.0, cumulative: $0.1) })
    }
}
