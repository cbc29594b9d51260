/// The run's totals and their two renderings.
struct Summary {
    let seed: UInt64
    var rounds = 0
    var killRounds = 0
    var termRounds = 0
    var total = RoundFigures()
    var unansweredStoredKill = 0
    var unansweredStoredTerm = 0
    var failedRounds: [Int] = []
    var finalCheckRan = false
    var finalViolations: [String] = []
    var roundSeconds: [Double] = []
    var seconds = 0.0

    init(seed: UInt64) {
        self.seed = seed
    }

    var passed: Bool { self.failedRounds.isEmpty && self.finalViolations.isEmpty }

    mutating func add(_ round: CrashRound, seconds: Double) {
        self.rounds += 1
        if round.signal == .kill {
            self.killRounds += 1
            self.unansweredStoredKill += round.figures.unansweredStored
        } else {
            self.termRounds += 1
            self.unansweredStoredTerm += round.figures.unansweredStored
        }
        self.total.add(round.figures)
        self.roundSeconds.append(seconds)
        if !round.violations.isEmpty { self.failedRounds.append(round.number) }
    }

    func line(for round: CrashRound, of rounds: Int) -> String {
        let f = round.figures
        var line = "round \(round.number)/\(rounds) SIG\(round.signal.rawValue.uppercased()) after \(round.delayMilliseconds) ms: "
        line += "\(f.sent) sent, \(f.acknowledged) acknowledged, \(f.shuttingDown) SHUTTING_DOWN, \(f.otherErrors) other errors, "
        line += "\(f.unanswered) unanswered (\(f.unansweredStored) of them stored), \(f.stored) stored, \(f.lost) lost; "
        line +=
            "\(f.deletesSent) deletions sent, \(f.deletesAcknowledged) acknowledged, \(f.deleted) carried out, \(f.undone) undone, \(f.unerased) left in data.mdb"
        let cuts = f.loadCuts + f.startCuts + f.stopCuts
        if cuts > 0 { line += "; power cut \(cuts) times (\(f.loadCuts) under load, \(f.startCuts) in starts, \(f.stopCuts) in stops)" }
        if let exit = f.exitSeconds { line += ", exited \(Self.fixed(exit, 3)) s after SIGTERM" }
        line += "; \(Self.fixed(self.roundSeconds.last ?? 0, 2)) s"
        if !round.violations.isEmpty { line += " — \(round.violations.count) VIOLATIONS" }
        return line
    }

    func text() -> String {
        let t = self.total
        var line = "registry-crash-loop: \(self.rounds) rounds (\(self.killRounds) SIGKILL, \(self.termRounds) SIGTERM), seed \(self.seed): "
        line += "\(t.sent) registrations sent, \(t.acknowledged) acknowledged, \(t.stored) stored, \(t.lost) lost, "
        line += "unanswered but stored \(self.unansweredStoredTerm) after SIGTERM (\(self.unansweredStoredKill) after SIGKILL, allowed), "
        line += "\(t.refusedStored) refused but stored, \(t.shuttingDown) SHUTTING_DOWN, \(t.otherErrors) other errors; "
        line += "\(t.deletesSent) deletions sent, \(t.deletesAcknowledged) acknowledged, \(t.deleted) carried out, "
        line += "\(t.undone) undone, \(t.unerased) deleted templates left in data.mdb"
        let cuts = t.loadCuts + t.startCuts + t.stopCuts
        if cuts > 0 { line += "; power cut \(cuts) times (\(t.loadCuts) under load, \(t.startCuts) in starts, \(t.stopCuts) in stops)" }
        if t.failedStarts > 0 { line += "; \(t.failedStarts) starts FAILED" }
        if let exit = t.exitSeconds { line += ", slowest exit after SIGTERM \(Self.fixed(exit, 3)) s" }
        if self.finalCheckRan { line += self.finalViolations.isEmpty ? "; every template read back intact" : "; the final read-back FAILED" }
        line += "; \(Self.fixed(self.seconds, 1)) s (\(Self.fixed(self.seconds / Double(max(1, self.rounds)), 2)) s per round) — "
        if self.passed {
            line += "PASSED"
        } else {
            var failures: [String] = []
            if !self.failedRounds.isEmpty {
                failures.append("\(self.failedRounds.count) rounds with violations (first: round \(self.failedRounds[0]))")
            }
            if !self.finalViolations.isEmpty { failures.append("the final check failed") }
            line += "FAILED: " + failures.joined(separator: ", ")
        }
        return line
    }

    func json() -> String {
        let t = self.total
        let fields: [(String, String)] = [
            ("passed", self.passed ? "true" : "false"),
            ("seed", "\"\(self.seed)\""),  // a string: JSON numbers lose 64-bit precision
            ("rounds", "\(self.rounds)"),
            ("kill_rounds", "\(self.killRounds)"),
            ("term_rounds", "\(self.termRounds)"),
            ("sent", "\(t.sent)"),
            ("acknowledged", "\(t.acknowledged)"),
            ("stored", "\(t.stored)"),
            ("lost", "\(t.lost)"),
            ("unanswered", "\(t.unanswered)"),
            ("unanswered_stored_kill", "\(self.unansweredStoredKill)"),
            ("unanswered_stored_term", "\(self.unansweredStoredTerm)"),
            ("refused_stored", "\(t.refusedStored)"),
            ("shutting_down", "\(t.shuttingDown)"),
            ("other_errors", "\(t.otherErrors)"),
            ("deletions_sent", "\(t.deletesSent)"),
            ("deletions_acknowledged", "\(t.deletesAcknowledged)"),
            ("deleted", "\(t.deleted)"),
            ("deleted_left_in_file", "\(t.unerased)"),
            ("deletions_undone", "\(t.undone)"),
            ("load_cuts", "\(t.loadCuts)"),
            ("start_cuts", "\(t.startCuts)"),
            ("stop_cuts", "\(t.stopCuts)"),
            ("failed_starts", "\(t.failedStarts)"),
            ("verify_problems", "\(t.verifyProblems)"),
            ("max_term_exit_seconds", t.exitSeconds.map { Self.fixed($0, 4) } ?? "null"),
            ("failed_rounds", "[" + self.failedRounds.map(String.init).joined(separator: ",") + "]"),
            ("final_check", !self.finalCheckRan ? "\"skipped\"" : self.finalViolations.isEmpty ? "\"passed\"" : "\"failed\""),
            ("seconds", Self.fixed(self.seconds, 3)),
            ("seconds_per_round", Self.fixed(self.seconds / Double(max(1, self.rounds)), 3)),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// `value` with `digits` decimals (no Foundation).
    static func fixed(_ value: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = Int64((abs(value) * scale).rounded())
        let whole = scaled / Int64(scale)
        let fraction = String(scaled % Int64(scale))
        let padded = String(repeating: "0", count: max(0, digits - fraction.count)) + fraction
        return (value < 0 ? "-" : "") + (digits > 0 ? "\(whole).\(padded)" : "\(whole)")
    }
}
