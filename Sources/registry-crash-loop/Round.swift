import Glibc
import RegistryProtocol
import SwiftProtobuf
import SyntheticFaces

/// What became of one registration sent in a round.
enum Outcome: Equatable {
    case unanswered
    case ok
    case refused(Registry_V1_ErrorCode)
}

/// Which signal a round sends.
enum CrashSignal: String {
    case kill, term

    var number: Int32 { self == .kill ? SIGKILL : SIGTERM }
}

/// The figures of one round, summed into the run's totals.
struct RoundFigures {
    var sent = 0
    var acknowledged = 0
    var shuttingDown = 0
    var otherErrors = 0
    var unanswered = 0
    var stored = 0
    var lost = 0
    var unansweredStored = 0
    var refusedStored = 0
    /// Deletions of an earlier round's registrations: sent, acknowledged, and carried out (the
    /// identifiers gone after the restart).
    var deletesSent = 0
    var deletesAcknowledged = 0
    var deleted = 0
    /// Acknowledged deletions whose template bytes were still found in data.mdb after the restart.
    var unerased = 0
    /// Acknowledged deletions whose identifier was back after the restart.
    var undone = 0
    /// Power cuts (tools/power-loss): under load, in a start (the round's first, or the restart
    /// after the load's cut), and in the stop after the check.
    var loadCuts = 0
    var startCuts = 0
    var stopCuts = 0
    /// Problems `verify` reported after the restart.
    var verifyProblems = 0
    /// Starts that failed (the daemon refused its store, or never answered): the round could not check.
    var failedStarts = 0
    /// SIGTERM: seconds from the signal to the daemon's exit.
    var exitSeconds: Double?

    mutating func add(_ other: RoundFigures) {
        self.sent += other.sent
        self.acknowledged += other.acknowledged
        self.shuttingDown += other.shuttingDown
        self.otherErrors += other.otherErrors
        self.unanswered += other.unanswered
        self.stored += other.stored
        self.lost += other.lost
        self.unansweredStored += other.unansweredStored
        self.refusedStored += other.refusedStored
        self.deletesSent += other.deletesSent
        self.deletesAcknowledged += other.deletesAcknowledged
        self.deleted += other.deleted
        self.unerased += other.unerased
        self.undone += other.undone
        self.loadCuts += other.loadCuts
        self.startCuts += other.startCuts
        self.stopCuts += other.stopCuts
        self.failedStarts += other.failedStarts
        self.verifyProblems += other.verifyProblems
        if let seconds = other.exitSeconds { self.exitSeconds = max(self.exitSeconds ?? 0, seconds) }
    }
}

/// Settings shared by every round.
struct RoundSettings {
    let seed: UInt64
    let binary: String
    let socketPath: String
    let dataDirectory: String
    let logPath: String
    let daemonArguments: [String]
    let connections: Int
    let window: Int
    let maximumDelayMilliseconds: Int
    let drainDeadlineSeconds: Double
    let startSeconds: Double

    /// registryd's environment entries beyond the loop's own (NAME=VALUE), e.g. an LD_PRELOAD.
    let daemonEnvironment: [String]
    /// The power-loss harness (tools/power-loss): cuts the power instead of SIGKILL, and may cut any
    /// start or stop too. Nil: the loop signals the daemon itself.
    let hook: PowerHook?
    /// With a hook: how often a start may be cut before the start counts as failed.
    let startAttempts: Int

    /// Starts the daemon and waits until it answers. With a hook, the start may be cut (the daemon
    /// killed inside it): then the hook resets the files and the start is tried again, each cut's
    /// description appended to `cuts`.
    func startDaemon(phase: String, round: Int, cuts: inout [String]) throws -> Daemon {
        var attempt = 1
        while true {
            try self.hook?.arm(phase, round: round, attempt: attempt)
            let daemon = try Daemon(
                binary: self.binary, socketPath: self.socketPath, dataDirectory: self.dataDirectory, logPath: self.logPath,
                extraArguments: self.daemonArguments, environment: self.daemonEnvironment)
            do {
                try daemon.waitUntilReady(seconds: self.startSeconds)
                // The start's aim is spent: a cut still armed must not land in what follows.
                try self.hook?.arm("ready", round: round, attempt: attempt)
                return daemon
            } catch {
                daemon.killHard()
                if let hook = self.hook, let cut = try hook.reset() {
                    cuts.append("\(phase) attempt \(attempt): \(cut)")
                    attempt += 1
                    if attempt <= self.startAttempts { continue }
                }
                throw CrashLoopError("\(error); the daemon log ends: \(Self.lastLine(of: self.logPath))")
            }
        }
    }

    /// The last line of the daemon's log, for a failed start's message.
    static func lastLine(of path: String) -> String {
        guard let file = fopen(path, "rb") else { return "(no log)" }
        defer { fclose(file) }
        fseek(file, -min(4096, Self.size(of: file)), SEEK_END)
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = fread(&bytes, 1, bytes.count, file)
        let lines = String(decoding: bytes[0..<count], as: UTF8.self).split(whereSeparator: \.isNewline)
        return lines.last.map(String.init) ?? "(empty)"
    }

    private static func size(of file: UnsafeMutablePointer<FILE>) -> Int {
        fseek(file, 0, SEEK_END)
        return ftell(file)
    }
}

/// One round: load and signal, then restart and check. Violations are collected, not thrown, so a
/// failing round reports everything it found.
struct CrashRound {
    let number: Int
    let signal: CrashSignal
    let settings: RoundSettings
    /// Templates stored before this round (every earlier round's stored registrations, less those deleted).
    let storedBefore: Int
    /// The previous round's stored identifiers: every `deleteEvery`-th request deletes the next of them.
    let deletable: [String]
    static let deleteEvery = 8

    private(set) var figures = RoundFigures()
    private(set) var violations: [String] = []
    private(set) var delayMilliseconds = 0
    /// This round's registrations found stored after the restart (the next round deletes some).
    private(set) var storedIdentifiers: [String] = []
    private var outcomes: [[Outcome]] = []
    /// Per connection, the requests that were deletions: sequence → the identifier deleted.
    private var deletions: [[Int: String]] = []
    private var nextDeletion = 0
    /// What the power hook said of each cut in this round (tools/power-loss), in order.
    private(set) var cuts: [String] = []
    /// The load ended in a power cut (the hook's, timed or aimed) rather than the signal alone: a
    /// SIGTERM round is then judged as a SIGKILL one (no clean exit, unanswered requests may be stored).
    private var loadCut = false
    /// Whether SIGTERM's promises are checked: the exit status, and nothing unanswered carried out.
    private var termHonoured: Bool { self.signal == .term && !self.loadCut }

    init(number: Int, signal: CrashSignal, settings: RoundSettings, storedBefore: Int, deletable: [String] = []) {
        self.number = number
        self.signal = signal
        self.settings = settings
        self.storedBefore = storedBefore
        self.deletable = deletable
    }

    mutating func run() {
        var random = SeededRandom.derived(self.settings.seed, UInt64(self.number), 0xDE1A_7)
        self.delayMilliseconds = Int(random.uniform() * Double(self.settings.maximumDelayMilliseconds + 1))
        let settings = self.settings
        var cuts: [String] = []
        defer {
            self.cuts = cuts + self.cuts
            self.figures.startCuts = self.cuts.filter { $0.hasPrefix("start") || $0.hasPrefix("restart") }.count
            self.figures.loadCuts = self.cuts.filter { $0.hasPrefix("load") }.count
            self.figures.stopCuts = self.cuts.filter { $0.hasPrefix("stop") || $0.hasPrefix("check") }.count
        }
        let daemon: Daemon
        do {
            daemon = try settings.startDaemon(phase: "start", round: self.number, cuts: &cuts)
        } catch {
            self.figures.failedStarts += 1
            self.violations.append("before the restart: \(error)")
            return
        }
        do {
            defer { daemon.killHard() }
            try settings.hook?.arm("load", round: self.number)
            try self.load(daemon)
        } catch {
            self.violations.append("before the restart: \(error)")
            // The daemon is dead (the deferred kill): a cut it met must not outlive the round.
            if let cut = try? settings.hook?.reset() { cuts.append("load: \(cut)") }
            return
        }
        let restarted: Daemon
        do {
            restarted = try settings.startDaemon(phase: "restart", round: self.number, cuts: &cuts)
        } catch {
            self.figures.failedStarts += 1
            self.violations.append("after the restart: \(error)")
            return
        }
        do {
            let daemon = restarted
            defer { daemon.killHard() }
            try self.check(daemon)
            try settings.hook?.arm("stop", round: self.number)
            daemon.signal(SIGTERM)
            let status = daemon.wait(seconds: self.settings.drainDeadlineSeconds)
            // A cut aimed at the stop (its snapshot, its last commit) kills it: no clean exit is due.
            if status != nil, let cut = try settings.hook?.reset() {
                cuts.append("stop: \(cut)")
            } else if let status {
                if status != .exited(0) { self.violations.append("the restarted daemon, idle, ended with \(status) after SIGTERM") }
            } else {
                self.violations.append("the restarted daemon, idle, still ran \(self.settings.drainDeadlineSeconds) s after SIGTERM")
            }
        } catch {
            self.violations.append("after the restart: \(error)")
            if let cut = try? settings.hook?.reset() { cuts.append("check: \(cut)") }
        }
    }

    // MARK: Load and signal

    /// Pipelines registrations on every connection until the signal, then reads replies until each
    /// connection closes.
    private mutating func load(_ daemon: Daemon) throws {
        let connections = try (0..<self.settings.connections).map { _ in try FrameConnection(path: self.settings.socketPath) }
        self.outcomes = Array(repeating: [], count: connections.count)
        self.deletions = Array(repeating: [:], count: connections.count)
        var answered = Array(repeating: 0, count: connections.count)
        let clock = ContinuousClock()
        let signalAt = clock.now.advanced(by: .milliseconds(self.delayMilliseconds))
        var signalledAt: ContinuousClock.Instant?
        // With a hook: the daemon died before the signal, a cut aimed inside the load (confirmed by
        // the hook's reset below, else a violation).
        var diedEarly = false
        var exitedAt: ContinuousClock.Instant?
        // After the signal: the daemon's deadline, plus slack for a SIGKILLed one's sockets to close.
        let closeAllowance = Duration.milliseconds(Int64(self.settings.drainDeadlineSeconds * 1000) + 5000)

        while true {
            if signalledAt == nil {
                if clock.now >= signalAt {
                    if let hook = self.settings.hook, self.signal == .kill {
                        try hook.run(["cut", String(daemon.pid)])
                    } else {
                        daemon.signal(self.signal.number)
                    }
                    signalledAt = clock.now
                } else if daemon.poll() {
                    if self.settings.hook == nil { self.violations.append("the daemon ended before the signal: \(daemon.status!)") }
                    diedEarly = true
                    signalledAt = clock.now
                }
            }
            if exitedAt == nil && signalledAt != nil && daemon.poll() { exitedAt = clock.now }
            if signalledAt == nil {
                // Keep `window` requests in flight on each open connection; none are sent after the signal.
                for (index, connection) in connections.enumerated() where !connection.readClosed && !connection.writeClosed {
                    while self.outcomes[index].count - answered[index] < self.settings.window {
                        let sequence = self.outcomes[index].count
                        if sequence % Self.deleteEvery == Self.deleteEvery - 1 && self.nextDeletion < self.deletable.count {
                            let identifier = self.deletable[self.nextDeletion]
                            self.nextDeletion += 1
                            self.deletions[index][sequence] = identifier
                            try connection.enqueue(Self.deleteRequest(identifier, sequence: sequence))
                        } else {
                            try connection.enqueue(self.registerRequest(connection: index, sequence: sequence))
                        }
                        self.outcomes[index].append(.unanswered)
                    }
                }
            }
            for connection in connections { connection.flush() }
            let wait = signalledAt == nil ? max(0, min(20, Int32(clock.now.duration(to: signalAt) / .milliseconds(1)))) : 20
            Poll.wait(connections, milliseconds: wait)
            for (index, connection) in connections.enumerated() {
                let wasOpen = !connection.readClosed
                for reply in try connection.receive() {
                    self.record(reply, connection: index, answered: &answered[index])
                }
                if wasOpen && connection.readClosed && signalledAt == nil {
                    // A cut aimed inside the load: the sockets can close before waitpid sees the end.
                    if self.settings.hook != nil && daemon.wait(seconds: 2) != nil {
                        diedEarly = true
                        signalledAt = clock.now
                    } else {
                        self.violations.append("connection \(index) was closed by the daemon before the signal")
                    }
                }
            }
            if let signalledAt, connections.allSatisfy(\.readClosed) {
                _ = signalledAt
                break
            }
            if let signalledAt, signalledAt.duration(to: clock.now) > closeAllowance {
                let open = connections.filter { !$0.readClosed }.count
                self.violations.append("\(open) connections still open \(closeAllowance) after SIG\(self.signal.rawValue.uppercased())")
                break
            }
        }
        for connection in connections { connection.close() }

        let signalled = signalledAt ?? clock.now
        var status: ExitStatus?
        switch self.signal {
        case .kill:
            status = daemon.wait(seconds: 10)
            if status == nil { self.violations.append("the daemon still ran 10 s after SIGKILL") }
        case .term:
            let left = self.settings.drainDeadlineSeconds - Self.seconds(signalled.duration(to: clock.now))
            status = daemon.wait(seconds: max(0, left))
            if exitedAt == nil && status != nil { exitedAt = clock.now }
        }
        if let hook = self.settings.hook, status != nil, let cut = try hook.reset() {
            self.cuts.append("load: \(cut)")
            self.loadCut = true
        }
        if diedEarly && self.settings.hook != nil && !self.loadCut {
            self.violations.append("the daemon ended before the signal, and no power cut was made: \(status.map { "\($0)" } ?? "?")")
        }
        if self.settings.hook != nil && self.signal == .kill && status != nil && !self.loadCut {
            self.violations.append("the power hook reported no cut after it was told to cut")
        }
        if self.termHonoured {
            if let exitedAt { self.figures.exitSeconds = Self.seconds(signalled.duration(to: exitedAt)) }
            switch status {
            case nil:
                self.violations.append("the daemon still ran \(self.settings.drainDeadlineSeconds) s (the drain deadline) after SIGTERM")
            case .exited(0)?:
                break
            case let status?:
                self.violations.append("the daemon ended with \(status) after SIGTERM (expected exit status 0)")
            }
        }
        for (index, outcomes) in self.outcomes.enumerated() {
            for (sequence, outcome) in outcomes.enumerated() where self.deletions[index][sequence] != nil {
                self.figures.deletesSent += 1
                if outcome == .ok { self.figures.deletesAcknowledged += 1 }
            }
        }
        for (index, outcomes) in self.outcomes.enumerated() {
            for (sequence, outcome) in outcomes.enumerated() where self.deletions[index][sequence] == nil {
                self.figures.sent += 1
                switch outcome {
                case .ok: self.figures.acknowledged += 1
                case .refused(.shuttingDown): self.figures.shuttingDown += 1
                case .refused: self.figures.otherErrors += 1
                case .unanswered: self.figures.unanswered += 1
                }
            }
        }
    }

    private static func deleteRequest(_ identifier: String, sequence: Int) -> Registry_V1_Request {
        var request = Registry_V1_Request()
        request.id = UInt64(sequence) + 1
        request.deleteIdentifier = .with { $0.identifier = identifier }
        return request
    }

    private func registerRequest(connection: Int, sequence: Int) -> Registry_V1_Request {
        Self.registerRequest(Registration(round: self.number, connection: connection, sequence: sequence), seed: self.settings.seed)
    }

    /// The registration of `registration`'s template, with the request id its sequence + 1.
    static func registerRequest(_ registration: Registration, seed: UInt64) -> Registry_V1_Request {
        var request = Registry_V1_Request()
        request.id = UInt64(registration.sequence) + 1
        request.register = .with {
            $0.identifier = registration.identifier
            $0.face.templates = [
                .with {
                    $0.algorithm = Registration.algorithm
                    $0.vector = registration.template(seed: seed)
                }
            ]
        }
        return request
    }

    /// Replies come in request order (PROTOCOL §3): each answers the oldest unanswered request.
    private mutating func record(_ reply: Registry_V1_Response, connection: Int, answered: inout Int) {
        guard answered < self.outcomes[connection].count else {
            self.violations.append("connection \(connection): a reply (id \(reply.id)) to no request")
            return
        }
        let sequence = answered
        answered += 1
        let deleted = self.deletions[connection][sequence]
        let identifier = deleted ?? Registration(round: self.number, connection: connection, sequence: sequence).identifier
        guard reply.id == UInt64(sequence) + 1 else {
            self.violations.append("connection \(connection): reply id \(reply.id) where \(sequence + 1) (\(identifier)) was due")
            return
        }
        if deleted != nil {
            switch reply.result {
            case .deleteIdentifier(let result)?:
                if result.templatesDeleted == 1 {
                    self.outcomes[connection][sequence] = .ok
                } else {
                    self.violations.append("deleting \(identifier): \(result.templatesDeleted) templates deleted (expected its 1)")
                }
            case .error(let error)?:
                self.outcomes[connection][sequence] = .refused(error.code)
            default:
                self.violations.append("deleting \(identifier): answered with a reply that is not a deletion's")
            }
            return
        }
        switch reply.result {
        case .register(let result)?:
            if result.stored.count == 1 && result.stored[0].identifier == identifier {
                self.outcomes[connection][sequence] = .ok
            } else {
                self.violations.append("\(identifier): acknowledged with \(result.stored.count) stored templates (expected 1, its own)")
            }
        case .error(let error)?:
            self.outcomes[connection][sequence] = .refused(error.code)
        default:
            self.violations.append("\(identifier): answered with a reply that is not a registration's")
        }
    }

    // MARK: Check after the restart

    /// Compares what the restarted daemon holds with what the round's replies promised.
    private mutating func check(_ daemon: Daemon) throws {
        let connection = try FrameConnection(path: self.settings.socketPath)
        defer { connection.close() }
        var nextID: UInt64 = 0
        func request(_ build: (inout Registry_V1_Request) -> Void) -> Registry_V1_Request {
            nextID += 1
            var request = Registry_V1_Request()
            request.id = nextID
            build(&request)
            return request
        }

        // This round's identifiers in the store: they are contiguous in byte order.
        let stored = try self.identifiers(withPrefix: Registration.prefix(round: self.number), on: connection, request)
        self.figures.stored = stored.count
        self.storedIdentifiers = stored.sorted()

        var sentIdentifiers = Set<String>()
        var lost: [String] = []
        var refusedStored: [String] = []
        var unansweredStored: [String] = []
        for (connectionIndex, outcomes) in self.outcomes.enumerated() {
            for (sequence, outcome) in outcomes.enumerated() where self.deletions[connectionIndex][sequence] == nil {
                let identifier = Registration(round: self.number, connection: connectionIndex, sequence: sequence).identifier
                sentIdentifiers.insert(identifier)
                let isStored = stored.contains(identifier)
                switch outcome {
                case .ok where !isStored: lost.append(identifier)
                case .refused(let code) where isStored: refusedStored.append("\(identifier) (\(code))")
                case .unanswered where isStored: unansweredStored.append(identifier)
                default: break
                }
            }
        }
        self.figures.lost = lost.count
        self.figures.refusedStored = refusedStored.count
        self.figures.unansweredStored = unansweredStored.count
        if !lost.isEmpty {
            self.violations.append("\(lost.count) acknowledged registrations are missing: \(Self.some(lost))")
        }
        if !refusedStored.isEmpty {
            self.violations.append("\(refusedStored.count) registrations answered with an error are stored: \(Self.some(refusedStored))")
        }
        if self.termHonoured && !unansweredStored.isEmpty {
            self.violations.append(
                "\(unansweredStored.count) registrations are stored that were never answered (of \(self.figures.unanswered) unanswered): \(Self.some(unansweredStored))"
            )
        }
        let strangers = stored.subtracting(sentIdentifiers)
        if !strangers.isEmpty {
            self.violations.append("\(strangers.count) identifiers are stored that were never sent: \(Self.some(Array(strangers)))")
        }

        // Every stored registration of the round holds exactly the template sent (compared, never shown).
        let candidates = stored.intersection(sentIdentifiers).sorted()
        let replies = try connection.exchange(
            candidates.map { identifier in
                request {
                    $0.getTemplates = .with {
                        $0.identifier = identifier
                        $0.includeData = true
                    }
                }
            })
        var wrongData: [String] = []
        for (identifier, reply) in zip(candidates, replies) {
            guard case .getTemplates(let result)? = reply.result else {
                wrongData.append("\(identifier) (get_templates: \(Self.describe(reply)))")
                continue
            }
            guard let registration = Registration(identifier: identifier), result.templates.count == 1 else {
                wrongData.append("\(identifier) (\(result.templates.count) templates, expected 1)")
                continue
            }
            let template = result.templates[0]
            if template.algorithm != Registration.algorithm || !template.hasTemplate
                || !Registration.sameBits(template.template.vector, registration.template(seed: self.settings.seed))
            {
                wrongData.append("\(identifier) (stored template differs from the one sent)")
            }
        }
        if !wrongData.isEmpty {
            self.violations.append("\(wrongData.count) stored registrations do not hold what was sent: \(Self.some(wrongData))")
        }

        // The deletions: an acknowledged one is carried out and its template erased from data.mdb (the
        // restart's open finishes any erasure the crash cut short); a refused one, or after SIGTERM an
        // unanswered one, is not carried out.
        let remaining = try self.identifiers(withPrefix: Registration.prefix(round: self.number - 1), on: connection, request)
        var undone: [String] = []
        var unasked: [String] = []
        var erased: [[Float]] = []
        for (index, outcomes) in self.outcomes.enumerated() {
            for (sequence, identifier) in self.deletions[index] {
                let kept = remaining.contains(identifier)
                switch outcomes[sequence] {
                case .ok where kept: undone.append(identifier)
                case .ok: erased.append(Registration(identifier: identifier)!.template(seed: self.settings.seed))
                case .refused where !kept: unasked.append(identifier)
                case .unanswered where !kept && self.termHonoured: unasked.append(identifier)
                default: break
                }
            }
        }
        let deletedNow = self.deletable.count - remaining.intersection(self.deletable).count
        self.figures.deleted = deletedNow
        self.figures.undone = undone.count
        if !undone.isEmpty { self.violations.append("\(undone.count) acknowledged deletions were undone: \(Self.some(undone))") }
        if !unasked.isEmpty {
            self.violations.append("\(unasked.count) deletions refused or never answered were carried out: \(Self.some(unasked))")
        }
        self.figures.unerased = Self.countFound(erased, in: self.settings.dataDirectory + "/data.mdb")
        if self.figures.unerased > 0 {
            self.violations.append("\(self.figures.unerased) of \(erased.count) deleted templates are still in data.mdb")
        }

        // Earlier rounds' registrations are all still there (counted; their data is checked at the end).
        let expectedTotal = self.storedBefore - deletedNow + stored.count
        let galleries = try connection.call(request { $0.listGalleries = .init() })
        guard case .listGalleries(let list)? = galleries.result, let gallery = list.galleries.first(where: { $0.name == "default" }) else {
            throw CrashLoopError("list_galleries: \(Self.describe(galleries))")
        }
        if gallery.identifierCount != UInt64(expectedTotal) {
            self.violations.append(
                "the default gallery holds \(gallery.identifierCount) identifiers, expected \(expectedTotal) (\(self.storedBefore) from earlier rounds - \(deletedNow) deleted + \(stored.count))"
            )
        }

        let verify = try connection.call(request { $0.verify = .init() }, timeoutSeconds: 600)
        guard case .verify(let result)? = verify.result else { throw CrashLoopError("verify: \(Self.describe(verify))") }
        self.figures.verifyProblems = result.problems.count
        if !result.problems.isEmpty {
            self.violations.append("verify reports \(result.problems.count) problems: \(Self.some(result.problems))")
        }
        if result.templatesChecked != UInt64(expectedTotal) {
            self.violations.append("verify checked \(result.templatesChecked) templates, expected \(expectedTotal)")
        }
    }

    // MARK: Helpers

    /// The stored identifiers that start with `prefix`: a round's identifiers are contiguous in the
    /// daemon's byte order.
    private func identifiers(
        withPrefix prefix: String, on connection: FrameConnection, _ request: ((inout Registry_V1_Request) -> Void) -> Registry_V1_Request
    ) throws -> Set<String> {
        var found = Set<String>()
        var after = prefix
        while true {
            let reply = try connection.call(
                request {
                    $0.listIdentifiers = .with {
                        $0.after = after
                        $0.limit = 10_000
                    }
                })
            guard case .listIdentifiers(let page)? = reply.result else { throw CrashLoopError("list_identifiers: \(Self.describe(reply))") }
            for identifier in page.identifiers {
                guard identifier.hasPrefix(prefix) else { return found }
                found.insert(identifier)
            }
            guard page.hasNext else { return found }
            after = page.next
        }
    }

    /// How many of `templates` have their first 16 bytes somewhere in the file at `path` (its bytes
    /// are compared, never shown). Every byte offset is tried, since a value need not be aligned in a
    /// page. The file is mapped, and each offset's first 8 bytes go through a 64 Ki-bit filter before
    /// any table lookup: the rounds of a long run pass over hundreds of MB, and a lookup per offset made
    /// this check the larger part of a round (5 s at 100k templates).
    static func countFound(_ templates: [[Float]], in path: String) -> Int {
        guard !templates.isEmpty else { return 0 }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_size >= 16 else { return 0 }
        let length = Int(status.st_size)
        guard let mapped = mmap(nil, length, PROT_READ, MAP_PRIVATE, descriptor, 0), mapped != MAP_FAILED else { return 0 }
        defer { munmap(mapped, length) }
        let file = UnsafeRawBufferPointer(start: mapped, count: length)

        func slot(_ word: UInt64) -> Int { Int(truncatingIfNeeded: (word &* 0x9E37_79B9_7F4A_7C15) >> 48) }
        var filter = [UInt64](repeating: 0, count: 1024)
        var byPrefix: [UInt64: [Int]] = [:]
        let needles = templates.map { template in template.prefix(4).withUnsafeBytes { Array($0) } }
        for (index, needle) in needles.enumerated() {
            let word = needle.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            filter[slot(word) >> 6] |= 1 << UInt64(slot(word) & 63)
            byPrefix[word, default: []].append(index)
        }
        var found = Set<Int>()
        filter.withUnsafeBufferPointer { filter in
            for offset in 0...(length - 16) {
                let word = file.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                let bit = slot(word)
                guard filter[bit >> 6] & (1 << UInt64(bit & 63)) != 0, let candidates = byPrefix[word] else { continue }
                for index in candidates where needles[index].elementsEqual(file[offset..<offset + 16]) { found.insert(index) }
            }
        }
        return found.count
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    /// A reply named for a message: its error code, or its result case (never any template data).
    static func describe(_ reply: Registry_V1_Response) -> String {
        switch reply.result {
        case .error(let error)?: "error \(error.code): \(error.message)"
        case nil: "an empty reply"
        case let result?: "an unexpected \(String(describing: result).prefix { $0 != "(" }) reply"
        }
    }

    /// The first few of a list, for a violation message.
    static func some(_ items: [String], count: Int = 5) -> String {
        let shown = items.sorted().prefix(count).joined(separator: ", ")
        return items.count > count ? "\(shown), …" : shown
    }
}

extension FrameConnection {
    func call(_ request: Registry_V1_Request, timeoutSeconds: Double) throws -> Registry_V1_Response {
        try self.exchange([request], timeoutSeconds: timeoutSeconds)[0]
    }
}
