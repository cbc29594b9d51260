import ArgumentParser
import Glibc
import RegistryClient
import RegistryModel

/// `registryctl audit`: the audit trail — who (uid, pid) did what to which identifiers, when, and the outcome.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Show the audit trail: who did what to which identifiers, when, and the outcome.",
        discussion: """
            Prints the newest entries that match, oldest first. --since and --until take an ISO-8601 \
            time as this command prints it (2024-05-01T12:34:56Z, or a date: 2024-05-01), a Unix time \
            in seconds, or an age such as 30m, 12h or 7d. Reading the trail needs the admin right.
            """)

    @OptionGroup var options: GlobalOptions

    @Option(help: ArgumentHelp("Only entries concerning this identifier (byte for byte, not its equivalent spellings).", valueName: "identifier"))
    var identifier: String?

    @Option(help: ArgumentHelp("Only entries at or after this time (ISO-8601, Unix seconds, or an age: 30m, 12h, 7d).", valueName: "time"))
    var since: String?

    @Option(help: ArgumentHelp("Only entries before this time (as --since).", valueName: "time"))
    var until: String?

    @Option(help: ArgumentHelp("Only entries with this outcome: ok, match, no-match or refused.", valueName: "outcome"))
    var outcome: String?

    @Option(help: "At most this many entries, the newest (1-100000).")
    var limit: Int = 100

    func validate() throws {
        guard (1...100_000).contains(self.limit) else { throw ValidationError("--limit must be within 1...100000") }
        if let outcome, !AuditOutcome.known.map(\.rawValue).contains(outcome) {
            throw ValidationError("--outcome must be \(AuditOutcome.known.map(\.rawValue).joined(separator: ", "))")
        }
        for (name, value) in [("--since", self.since), ("--until", self.until)] {
            if let value, Self.micros(value, now: 0) == nil {
                throw ValidationError(
                    "\(name) '\(value)' is neither an ISO-8601 time (2024-05-01T12:00:00Z), Unix seconds nor an age like 30m, 12h, 7d")
            }
        }
    }

    /// Microseconds since the epoch for `text`: an ISO-8601 time (as the entries are printed), Unix
    /// seconds, or an age (`s`, `m`, `h`, `d`) before `now`.
    static func micros(_ text: String, now: Int64) -> Int64? {
        if let seconds = Int64(text), seconds >= 0 { return seconds * 1_000_000 }
        if let micros = Timestamp.micros(iso8601: text) { return micros }
        guard let unit = text.last, let amount = Int64(text.dropLast()), amount >= 0 else { return nil }
        let seconds: Int64
        switch unit {
        case "s": seconds = amount
        case "m": seconds = amount * 60
        case "h": seconds = amount * 3600
        case "d": seconds = amount * 86_400
        default: return nil
        }
        return now - seconds * 1_000_000
    }

    struct Result: CommandResult {
        var entries: [AuditEntry]

        func text(_ names: AlgorithmNames) -> String {
            guard !self.entries.isEmpty else { return "no audit entries match" }
            var table = Table(header: ["TIME", "UID", "PID", "OPERATION", "GALLERY", "IDENTIFIERS", "OUTCOME", "SCORE/CODE"])
            for entry in self.entries {
                // A summary of refusals of one kind says how many it stands for.
                let detail = (entry.errorCode ?? entry.score.map { Format.score($0) } ?? "-") + (entry.count == 1 ? "" : " ×\(entry.count)")
                table.append([
                    Timestamp.iso8601(micros: entry.time), String(entry.uid), String(entry.pid), entry.operation,
                    entry.gallery.isEmpty ? "*" : entry.gallery,
                    entry.identifiers.isEmpty ? "-" : entry.identifiers.map { Format.quoted($0) }.joined(separator: ","),
                    entry.outcome.rawValue, detail,
                ])
            }
            return table.lines().joined(separator: "\n")
        }
    }

    func run() async throws {
        let now = AuditEntry.now()
        let query = AuditQuery(
            identifier: self.identifier, since: self.since.flatMap { Self.micros($0, now: now) },
            until: self.until.flatMap { Self.micros($0, now: now) }, outcome: self.outcome.map(AuditOutcome.init(rawValue:)), limit: self.limit)
        try await Runner(self.options).run { client in
            Result(entries: try await client.audit(query))
        }
    }
}
