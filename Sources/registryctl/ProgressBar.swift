import Glibc

/// A progress bar on standard error, drawn only when standard error is a terminal.
final class ProgressBar {
    let label: String
    let enabled: Bool
    var total: Int?
    private var drawn = false

    init(label: String, total: Int? = nil, enabled: Bool = isatty(STDERR_FILENO) == 1) {
        self.label = label
        self.total = total
        self.enabled = enabled
    }

    /// Redraws the bar for `done` items.
    func update(_ done: Int) {
        guard self.enabled else { return }
        self.drawn = true
        writeStandardError("\r" + Self.line(label: self.label, done: done, total: self.total) + "\u{1B}[K")
    }

    /// Ends the bar's line.
    func finish() {
        guard self.enabled, self.drawn else { return }
        writeStandardError("\n")
        self.drawn = false
    }

    /// `exporting [##########··········]  50%  5000/10000`, or `exporting 5000` without a total.
    static func line(label: String, done: Int, total: Int?, width: Int = 30) -> String {
        guard let total, total > 0 else { return "\(label) \(done)" }
        let fraction = min(1, Double(done) / Double(total))
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let percent = Int(fraction * 100)
        return "\(label) [\(bar)] \(percent < 10 ? "  " : percent < 100 ? " " : "")\(percent)%  \(done)/\(total)"
    }
}
