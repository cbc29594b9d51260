import FoundationEssentials
import Glibc
import RegistryModel

/// The evaluation table (markdown, as published in docs/landmarks-evaluation.md) and its JSON.
enum Report {
    static func markdown(
        rows: [(condition: Condition, rates: [ErrorRates])], algorithms: [Algorithm], people: Int, seed: UInt64, shapeSigma: Double
    ) -> String {
        var lines: [String] = []
        lines.append(
            "\(people) synthetic people (σ = \(format(shapeSigma, 1)) mm per coordinate, size ±10 %), frontal enrolment, "
                + "one capture per person and condition, seed \(seed); each capture identified against every person: "
                + "\(people) genuine and \(people * (people - 1)) impostor pairs per row. FRR and FAR at each algorithm's "
                + "default threshold (in brackets).")
        lines.append("")
        lines.append(
            "| condition | algorithm | genuine min / p5 / median | impostor median / p99 / max | FRR | FAR | threshold for FAR 1 % | FRR there |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for row in rows {
            for (algorithm, rates) in zip(algorithms, row.rates) {
                let threshold = algorithm.defaultThreshold
                let at1 = rates.threshold(forFalseAcceptance: 0.01)
                let genuine = [rates.genuine.first ?? .nan, ErrorRates.quantile(rates.genuine, 0.05), ErrorRates.quantile(rates.genuine, 0.5)]
                let impostor = [
                    ErrorRates.quantile(rates.impostor, 0.5), ErrorRates.quantile(rates.impostor, 0.99), rates.impostor.last ?? .nan,
                ]
                lines.append(
                    "| \(row.condition.name) | \(algorithm.name) (\(format(Double(threshold), 2))) "
                        + "| \(genuine.map(format).joined(separator: " / ")) | \(impostor.map(format).joined(separator: " / ")) "
                        + "| \(percent(rates.falseRejection(at: threshold))) | \(percent(rates.falseAcceptance(at: threshold))) "
                        + "| \(format(at1)) | \(percent(rates.falseRejection(at: at1))) |")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func json(rows: [(condition: Condition, rates: [ErrorRates])], algorithms: [Algorithm]) -> Data {
        struct Entry: Encodable {
            var condition: String
            var algorithm: String
            var version: UInt32
            var targeted: Bool
            var threshold: Float
            var genuineMedian: Float
            var impostorP99: Float
            var impostorMax: Float
            var genuineMin: Float
            var falseRejection: Double
            var falseAcceptance: Double
            var thresholdForFalseAcceptance1Percent: Float
        }
        var entries: [Entry] = []
        for row in rows {
            for (algorithm, rates) in zip(algorithms, row.rates) {
                entries.append(
                    Entry(
                        condition: row.condition.name, algorithm: algorithm.name, version: algorithm.version, targeted: row.condition.targeted,
                        threshold: algorithm.defaultThreshold, genuineMedian: ErrorRates.quantile(rates.genuine, 0.5),
                        impostorP99: ErrorRates.quantile(rates.impostor, 0.99), impostorMax: rates.impostor.last ?? .nan,
                        genuineMin: rates.genuine.first ?? .nan,
                        falseRejection: rates.falseRejection(at: algorithm.defaultThreshold),
                        falseAcceptance: rates.falseAcceptance(at: algorithm.defaultThreshold),
                        thresholdForFalseAcceptance1Percent: rates.threshold(forFalseAcceptance: 0.01)))
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return (try? encoder.encode(entries)) ?? Data()
    }

    static func format(_ value: Float) -> String { format(Double(value), 3) }

    static func format(_ value: Double, _ digits: Int) -> String {
        guard value.isFinite else { return "–" }
        let scale = (0..<digits).reduce(1.0) { value, _ in value * 10 }
        let rounded = (value * scale).rounded() / scale
        var text = String(rounded)
        if let dot = text.firstIndex(of: ".") {
            let decimals = text.distance(from: dot, to: text.endIndex) - 1
            if decimals < digits { text += String(repeating: "0", count: digits - decimals) }
        } else {
            text += "." + String(repeating: "0", count: digits)
        }
        return text
    }

    static func percent(_ fraction: Double) -> String {
        let value = fraction * 100
        return value == 0 ? "0 %" : (value < 0.1 ? "\(format(value, 3)) %" : "\(format(value, 1)) %")
    }
}

/// Writes `bytes` to `path` (replacing it).
func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    guard let file = fopen(path, "wb") else { throw FileError(path: path) }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw FileError(path: path) }
}

struct FileError: Error, CustomStringConvertible {
    var path: String
    var description: String { "cannot write \(path): \(String(cString: strerror(errno)))" }
}
