import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import Synchronization

/// What a command prints: a JSON document with `--json`, text otherwise, and its exit status.
protocol CommandResult: Encodable {
    /// The text for people (without a trailing newline; empty prints nothing).
    func text(_ names: AlgorithmNames) -> String
    /// The exit status (success unless the result says no match, or problems).
    var exitStatus: ExitStatus { get }
    /// Whether ``text(_:)`` names algorithms (the runner then asks the daemon for their names).
    static var namesAlgorithms: Bool { get }
    /// A line for people printed on standard error after the text (not with `--json`).
    var notice: String? { get }
}

extension CommandResult {
    var exitStatus: ExitStatus { .success }
    var notice: String? { nil }
    static var namesAlgorithms: Bool { false }
}

/// Algorithm names by version, for text output: `arcface (24)`.
struct AlgorithmNames: Sendable {
    var byVersion: [UInt32: String]

    init(_ algorithms: [Algorithm]) {
        self.byVersion = Dictionary(algorithms.map { ($0.version, $0.name) }, uniquingKeysWith: { first, _ in first })
    }

    /// The built-in algorithms' names (used when the daemon cannot be asked).
    static let builtIn = AlgorithmNames(Algorithm.builtIn)

    /// The daemon's algorithms, or the built-in names when it does not answer.
    static func load(from client: RegistryConnection) async -> AlgorithmNames {
        guard let algorithms = try? await client.algorithms() else { return .builtIn }
        var names = AlgorithmNames(algorithms)
        for (version, name) in Self.builtIn.byVersion where names.byVersion[version] == nil { names.byVersion[version] = name }
        return names
    }

    /// `arcface (24)`, or `algorithm 24` for an unknown version.
    func callAsFunction(_ version: UInt32) -> String {
        guard let name = self.byVersion[version] else { return "algorithm \(version)" }
        return "\(name) (\(version))"
    }
}

/// Writes a JSON document on standard output.
/// How results are printed, set once from the command line (--compact, --no-legend).
enum OutputStyle {
    static let compactJSON = Atomic<Bool>(false)
    static let noLegend = Atomic<Bool>(false)
}

enum JSONOutput {
    static func encode(_ value: some Encodable, pretty: Bool = !OutputStyle.compactJSON.load(ordering: .relaxed)) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// The document for `value`.
    static func document(_ value: some Encodable) -> String {
        do {
            return try self.encode(value)
        } catch {
            // Encoding our own result types does not fail; say so if it ever does.
            return #"{"error": {"code": "INTERNAL", "message": "the result could not be encoded as JSON"}}"#
        }
    }
}

/// Prints a line on standard error.
func printError(_ text: String) {
    writeStandardError(text + "\n")
}

/// Writes text on standard error, unbuffered (after flushing what `print` buffered for standard output,
/// so the two keep their order on a shared terminal).
func writeStandardError(_ text: String) {
    fflush(nil)
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        bytes = bytes.dropFirst(written)
    }
}

// MARK: Text helpers

/// Columns padded to their widest cell (the last column is not padded).
struct Table {
    var rows: [[String]] = []

    init(header: [String]? = nil) {
        if let header, !OutputStyle.noLegend.load(ordering: .relaxed) { self.rows.append(header) }
    }

    mutating func append(_ row: [String]) {
        self.rows.append(row)
    }

    func lines(indent: String = "") -> [String] {
        let columns = self.rows.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: columns)
        for row in self.rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], DisplayWidth.of(cell)) }
        }
        return self.rows.map { row in
            var line = indent
            for (index, cell) in row.enumerated() {
                if index > 0 { line += "  " }
                line += cell
                if index < row.count - 1 { line += String(repeating: " ", count: widths[index] - DisplayWidth.of(cell)) }
            }
            return line
        }
    }
}

/// How many terminal columns text takes: what aligns a table of CJK or emoji identifiers (a
/// character count does not). Markus Kuhn's wcwidth rules, per user-perceived character: combining
/// and zero-width scalars take none, East Asian wide and fullwidth characters and emoji shown as
/// pictures take two, the rest one; a character of several scalars (an emoji sequence joined with
/// U+200D, a flag, a base with an emoji selector) takes the widest of them, at least two if it is
/// shown as a picture.
enum DisplayWidth {
    static func of(_ text: String) -> Int {
        text.reduce(0) { $0 + Self.of($1) }
    }

    static func of(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        if scalars.count > 1, scalars.contains(where: { $0.value == 0xFE0F || $0.value == 0x200D || (0x1F1E6...0x1F1FF).contains($0.value) }) {
            return 2
        }
        return scalars.reduce(0) { $0 + Self.of($1) }
    }

    static func of(_ scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value == 0 { return 0 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        case .control: return 0
        default: break
        }
        if (0x1160...0x11FF).contains(value) { return 0 }  // Hangul medial vowels and final consonants
        if scalar.properties.isEmojiPresentation { return 2 }
        return Self.wide.contains { $0.contains(value) } ? 2 : 1
    }

    /// East Asian Wide and Fullwidth ranges (as wcwidth takes them).
    static let wide: [ClosedRange<UInt32>] = [
        0x1100...0x115F, 0x2329...0x232A, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
        0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1F64F,
        0x1F900...0x1F9FF, 0x20000...0x2FFFD, 0x30000...0x3FFFD,
    ]
}

enum Format {
    /// `value` with exactly `digits` decimals (no Foundation formatter needed).
    static func fixed(_ value: Double, digits: Int = 4) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        guard scaled < 9e15 else { return "\(value)" }
        let whole = UInt64(scaled)
        let integer = whole / UInt64(scale)
        var fraction = String(whole % UInt64(scale))
        fraction = String(repeating: "0", count: max(0, digits - fraction.count)) + fraction
        let sign = value < 0 && whole != 0 ? "-" : ""
        return digits == 0 ? "\(sign)\(integer)" : "\(sign)\(integer).\(fraction)"
    }

    static func score(_ value: Float) -> String { self.fixed(Double(value), digits: 4) }

    /// A latency: microseconds below a millisecond, milliseconds below a second.
    static func latency(_ seconds: Double) -> String {
        if seconds < 0.001 { return "\(self.fixed(seconds * 1_000_000, digits: 0)) µs" }
        if seconds < 1 { return "\(self.fixed(seconds * 1_000, digits: 2)) ms" }
        return "\(self.fixed(seconds, digits: 2)) s"
    }

    /// A threshold as given: its shortest form (0.6, 0.65).
    static func threshold(_ value: Float) -> String { "\(value)" }

    /// `12.3 MB (12345678 bytes)`.
    static func bytes(_ count: UInt64) -> String {
        let units = ["bytes", "KB", "MB", "GB", "TB"]
        var value = Double(count)
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(count) bytes" : "\(self.fixed(value, digits: 1)) \(units[unit]) (\(count) bytes)"
    }

    /// `3d 04:05:06`.
    static func duration(seconds: UInt64) -> String {
        let days = seconds / 86_400
        let rest = seconds % 86_400
        let clock = [rest / 3600, rest % 3600 / 60, rest % 60].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":")
        return days > 0 ? "\(days)d \(clock)" : clock
    }

    /// An identifier in quotes, as messages show them.
    static func quoted(_ identifier: String) -> String { "'\(identifier)'" }

    static func plural(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
    }
}
