// registry-crash-loop: kills registryd again and again under pipelined registrations and checks,
// after each restart, that every acknowledged registration survived (tools/crash-loop runs it).
import ArgumentParser
import Glibc
import RegistryModel

@main
struct CrashLoopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry-crash-loop",
        abstract: "Crash registryd under pipelined registrations, restart it, and check what it kept.",
        discussion: """
            Each round starts registryd on a temporary socket and data directory (kept across the \
            rounds, so the store grows), opens the connections and pipelines registrations on each \
            (unique identifiers r{round}-c{connection}-{n}, random arcface templates), sends SIGKILL \
            or SIGTERM after a random delay, reads replies until every connection closes, restarts \
            the daemon on the same data and checks: every registration acknowledged OK is stored \
            with the template sent; none answered with an error is stored; the store verifies; the \
            earlier rounds' registrations are all there, less those deleted. Every eighth request \
            deletes one of the previous round's stored identifiers instead: an acknowledged deletion \
            stays done and its template's bytes are nowhere in data.mdb after the restart; a refused \
            one is not carried out. With --power-hook (tools/power-loss) the daemon's data directory \
            is on a file system that can lose power: the hook cuts the power instead of SIGKILL, and \
            may aim a cut inside any start, the load or the stop; a cut start is tried again. After SIGTERM also: nothing is stored that \
            was not answered OK, and the daemon exited 0 within the drain deadline. At the end, every \
            template in the store is read back and compared. On a violation it prints the round, the \
            seed and the details, leaves the data directory, and exits 1.
            """,
        version: RegistryVersion.current)

    enum SignalMode: String, ExpressibleByArgument, CaseIterable {
        case kill, term, both
    }

    @Option(help: "Rounds to run.")
    var rounds: Int = 10

    @Option(help: "The signal: kill (SIGKILL), term (SIGTERM) or both (alternating, SIGKILL first).")
    var signal: SignalMode = .kill

    @Option(help: "Seed of the delays and templates (default: random; printed).")
    var seed: UInt64?

    @Option(help: "The registryd binary.")
    var daemon: String = ".build/release/registryd"

    @Option(help: "Extra argument for registryd (repeatable), e.g. a drain-deadline flag.")
    var daemonArg: [String] = []

    @Option(help: "Directory for the socket, data and daemon log (default: a new one under $TMPDIR or /tmp). Must not hold data yet.")
    var workDirectory: String?

    @Option(help: "The data directory, if not WORK/data (e.g. on tools/power-loss's file system). Must not hold data yet.")
    var dataDirectory: String?

    @Option(help: "NAME=VALUE for registryd's environment (repeatable), e.g. LD_PRELOAD=….")
    var daemonEnvironment: [String] = []

    @Option(help: "A program that cuts the power instead of SIGKILL and may cut starts and stops (tools/power-loss; see PowerHook.swift).")
    var powerHook: String?

    @Option(help: "With --power-hook: how many times one start may be cut before it counts as failed.")
    var startAttempts: Int = 4

    @Option(
        help:
            "Registrations (round 0, all acknowledged) before round 1, which deletes among them; 100 000 or more make the daemon write its index snapshot at each clean stop."
    )
    var prefill: Int = 0

    @Option(help: "Connections pipelining registrations.")
    var connections: Int = 8

    @Option(help: "Unanswered registrations kept in flight per connection.")
    var window: Int = 32

    @Option(help: "The signal comes after a random delay of 0 to this many milliseconds.")
    var maximumDelay: Int = 500

    @Option(help: "Seconds the daemon may take to exit after SIGTERM (its drain deadline).")
    var drainDeadline: Double = 15

    @Option(help: "Seconds the daemon may take to answer after it starts.")
    var startTimeout: Double = 60

    @Flag(help: "Run every round even after a violation (exit 1 at the end): for figures.")
    var keepGoing = false

    @Flag(help: "Keep the work directory when every round passed.")
    var keep = false

    @Flag(help: "Skip reading back every template at the end.")
    var noFinalCheck = false

    @Flag(help: "Print the summary as one JSON object.")
    var json = false

    @Flag(help: "No line per round.")
    var quiet = false

    func validate() throws {
        guard self.rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
        guard (1...256).contains(self.connections) else { throw ValidationError("--connections must be 1...256") }
        guard (1...4096).contains(self.window) else { throw ValidationError("--window must be 1...4096") }
        guard self.maximumDelay >= 0 else { throw ValidationError("--maximum-delay must not be negative") }
        guard self.drainDeadline > 0, self.startTimeout > 0 else { throw ValidationError("timeouts must be positive") }
        guard self.prefill >= 0 else { throw ValidationError("--prefill must not be negative") }
        guard self.startAttempts >= 1 else { throw ValidationError("--start-attempts must be at least 1") }
        guard self.daemonEnvironment.allSatisfy({ $0.contains("=") && !$0.hasPrefix("=") }) else {
            throw ValidationError("--daemon-environment takes NAME=VALUE")
        }
    }

    func run() throws {
        Glibc.signal(SIGPIPE, SIG_IGN)
        // Interrupted, the tool takes its daemon with it rather than leave it running.
        for interrupt in [SIGINT, SIGTERM, SIGHUP] {
            Glibc.signal(interrupt) { received in
                if runningDaemonPID > 0 { kill(runningDaemonPID, SIGKILL) }
                _exit(128 + received)
            }
        }
        guard access(self.daemon, X_OK) == 0 else {
            throw ValidationError("no registryd at \(self.daemon): build it (swift build -c release --product registryd) or pass --daemon")
        }
        let seed = self.seed ?? UInt64.random(in: 0...UInt64.max)
        let work = try self.makeWorkDirectory()
        let dataDirectory = self.dataDirectory ?? work + "/data"
        if self.dataDirectory != nil {
            guard access(dataDirectory + "/data.mdb", F_OK) != 0 else {
                throw ValidationError("\(dataDirectory) holds a store: the crash loop starts from an empty one")
            }
        }
        let settings = RoundSettings(
            seed: seed, binary: self.daemon, socketPath: work + "/registryd.sock", dataDirectory: dataDirectory,
            logPath: work + "/registryd.log", daemonArguments: self.daemonArg, connections: self.connections, window: self.window,
            maximumDelayMilliseconds: self.maximumDelay, drainDeadlineSeconds: self.drainDeadline, startSeconds: self.startTimeout,
            daemonEnvironment: self.daemonEnvironment, hook: self.powerHook.map(PowerHook.init(program:)), startAttempts: self.startAttempts)
        Output.note("registry-crash-loop: \(self.rounds) rounds, signal \(self.signal.rawValue), seed \(seed), work directory \(work)")

        let clock = ContinuousClock()
        let start = clock.now
        var summary = Summary(seed: seed)
        var deletable: [String] = []
        if self.prefill > 0 {
            Output.note("registry-crash-loop: registering \(self.prefill) templates first (round 0)")
            deletable = try Prefill.run(settings: settings, count: self.prefill)
        }
        for number in 1...self.rounds {
            let signal: CrashSignal =
                switch self.signal {
                case .kill: .kill
                case .term: .term
                case .both: number % 2 == 1 ? .kill : .term
                }
            let roundStart = clock.now
            var round = CrashRound(
                number: number, signal: signal, settings: settings, storedBefore: self.prefill + summary.total.stored - summary.total.deleted,
                deletable: deletable)
            round.run()
            deletable = round.storedIdentifiers
            summary.add(round, seconds: CrashRound.seconds(roundStart.duration(to: clock.now)))
            if !self.quiet {
                Output.note(summary.line(for: round, of: self.rounds))
                for cut in round.cuts { Output.note("  cut: \(cut)") }
            }
            if !round.violations.isEmpty {
                let signalName = "SIG\(signal.rawValue.uppercased())"
                for violation in round.violations {
                    Output.note(
                        "registry-crash-loop: VIOLATION in round \(number) (\(signalName) after \(round.delayMilliseconds) ms), seed \(seed): \(violation)"
                    )
                }
                if !self.keepGoing { break }
            }
        }
        // Also after violations when every round ran (--keep-going): the counts it checks are the stored ones.
        if !self.noFinalCheck && summary.rounds == self.rounds {
            summary.finalCheckRan = true
            for violation in FinalCheck.run(
                settings: settings, rounds: self.rounds, expectedTotal: self.prefill + summary.total.stored - summary.total.deleted)
            {
                summary.finalViolations.append(violation)
                Output.note("registry-crash-loop: VIOLATION in the final check, seed \(seed): \(violation)")
            }
        }
        summary.seconds = CrashRound.seconds(start.duration(to: clock.now))
        print(self.json ? summary.json() : summary.text())
        if summary.passed {
            if !self.keep { Self.remove(work) }
        } else {
            Output.note("registry-crash-loop: the data directory is left for inspection: \(dataDirectory) (daemon log: \(work)/registryd.log)")
            throw ExitCode.failure
        }
    }

    /// A fresh directory: the store must start empty for the counts to mean anything.
    private func makeWorkDirectory() throws -> String {
        if let directory = self.workDirectory {
            mkdir(directory, 0o700)
            var info = stat()
            guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                throw ValidationError("cannot use \(directory) as the work directory")
            }
            guard access(directory + "/data", F_OK) != 0 else {
                throw ValidationError("\(directory)/data exists: the crash loop starts from an empty store; remove it or pick another directory")
            }
            return directory
        }
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/registry-crash-loop.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CrashLoopError("mkdtemp under \(base): \(FrameConnection.errorText())") }
        return String(cString: made)
    }

    private static func remove(_ directory: String) {
        let words: [String] = ["rm", "-rf", "--", directory]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        guard posix_spawnp(&pid, "rm", nil, nil, argv, environ) == 0 else { return }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

enum Output {
    /// Progress and findings go to standard error; the summary alone to standard output.
    static func note(_ line: String) {
        let text = line + "\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
    }
}
