import Glibc
import Logging
import Synchronization

/// Where and how the daemon's log lines go. Under systemd, standard error is the journal's stream
/// (the service manager says so in `JOURNAL_STREAM`): lines then start with a syslog priority (`<3>`
/// for an error), so that `journalctl -p warning` selects them, and carry no timestamp of their own
/// (the journal stamps every line). Elsewhere, swift-log's stream format, timestamp included.
public enum LogOutput {
    /// Installs the handler for this process (once, before the first logger is made).
    public static func bootstrap() {
        if Self.standardErrorIsTheJournal() {
            LoggingSystem.bootstrap { label in JournalLogHandler(label: label, write: Self.writeStandardError) }
        } else {
            LoggingSystem.bootstrap(StreamLogHandler.standardError)
        }
    }

    /// Whether `JOURNAL_STREAM` ("device:inode") names the file standard error is open on: the
    /// variable is inherited by children whose standard error may go elsewhere, so it is checked,
    /// as systemd.exec(5) asks.
    static func standardErrorIsTheJournal(environment: String? = getenv("JOURNAL_STREAM").map { String(cString: $0) }) -> Bool {
        guard let environment else { return false }
        let parts = environment.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// Writes `line` and a newline to standard error, whole (retrying short writes).
    @Sendable public static func writeStandardError(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { write(2, $0.baseAddress! + written, $0.count - written) }
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { return }  // nowhere to report a failing log
            written += result
        }
    }
}

/// One journal line per entry: `<N>message key=value …`, N the syslog priority of the level, no
/// timestamp. A newline inside a message or value would start a journal entry without a priority,
/// so newlines become "; " (a configuration error lists its problems on separate lines).
public struct JournalLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    let label: String
    let write: @Sendable (String) -> Void

    public init(label: String, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    /// syslog(3) priorities: debug 7, info 6, notice 5, warning 4, error 3, critical 2.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    public func log(event: LogEvent) {
        var line = "<\(Self.priority(event.level))>\(Self.oneLine(event.message.description))"
        let merged = self.metadata.merging(event.metadata ?? [:]) { _, new in new }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            line += " \(key)=\(Self.oneLine("\(value)"))"
        }
        self.write(line)
    }

    static func oneLine(_ text: String) -> String {
        guard text.contains(where: \.isNewline) else { return text }
        return text.split(whereSeparator: \.isNewline).joined(separator: "; ")
    }
}
