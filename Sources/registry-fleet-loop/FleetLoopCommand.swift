import ArgumentParser
import Foundation
import Glibc
import Synchronization
import SyntheticFaces
import TestSupport

/// The fleet fault loop (docs/fleet.md, "Faults"): a fleet of registryd nodes on a PostgreSQL
/// primary with a synchronous standby, under a mixed load on every node, through rounds of random
/// faults; then, once the nodes have converged, a checker that reads every request and answer and
/// every node's contents and data directory.
@main
struct FleetLoopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry-fleet-loop",
        abstract: "Faults under a fleet (nodes killed, stopped, paused; PostgreSQL stopped, killed, failed over), then a history check.",
        discussion: """
            Needs root (the PostgreSQL servers run as the postgres user) and Debian's PostgreSQL. The seed decides the \
            faults, their order, targets and timing, and the load's choices; the interleaving of the load's requests \
            is the machine's. Exit status 0 when the checker found nothing (with --control: when it found something, \
            as it must), 1 otherwise, with the run's directory (history.jsonl, node logs) left for inspection.
            """)

    @Option(help: "The registryd to run.") var daemon: String
    @Option(help: "Rounds of faults.") var rounds = 10
    @Option(help: "The seed (default: random; printed, to replay a run).") var seed: UInt64?
    @Option(help: "Fleet nodes.") var nodes = 3
    @Option(help: "Clients per node.") var workersPerNode = 2
    @Option(help: "How long the nodes may take to converge once the load stops (seconds).") var convergenceSeconds = 60
    @Flag(
        help:
            "The negative control: nodes carry out writes without ordering them through the log (a broken build switched on by an environment variable); the checker must find violations."
    )
    var control = false
    @Flag(help: "Keep the run's directory even when the run passed.") var keep = false
    @Option(help: "Seconds of load without a fault after each round (to see how soon writes work again).") var quietSeconds = 0.0
    @Option(
        help:
            "Only these faults, comma-separated (nodeKilled, nodeStopped, nodePaused, nodeCutOff, databaseStopped, databaseKilled, failover; default: all)"
    )
    var faults: String?
    @Option(help: "The power-loss harness's hook (tools/power-loss --fleet sets it): node-1's power is cut in half the rounds.")
    var powerHook: String?
    @Option(help: "node-1's data directory, on the power-loss file system (with --power-hook).") var powerData: String?

    enum Fault: String, CaseIterable {
        case nodeKilled = "node SIGKILL"
        case nodeStopped = "node SIGTERM"
        case nodePaused = "node SIGSTOP"
        case nodeCutOff = "node cut off"
        case nodePowerCut = "node power cut"
        case databaseStopped = "PostgreSQL stopped"
        case databaseKilled = "PostgreSQL killed"
        case failover = "PostgreSQL failover"
    }

    func run() async throws {
        let seed = self.seed ?? UInt64.random(in: 1...UInt64.max)
        let directory = TemporaryDirectory("registry-fleet-loop").path
        say(
            "fleet loop: seed \(seed) (replay: --seed \(seed)), \(self.rounds) rounds, \(self.nodes) nodes, \(self.nodes * self.workersPerNode) clients"
                + (self.control ? ", NEGATIVE CONTROL (writes not ordered through the log)" : "") + "; in \(directory)")
        if (self.powerHook == nil) != (self.powerData == nil) { throw ValidationError("--power-hook and --power-data go together") }
        let hook = self.powerHook.map(PowerHook.init)
        let chosen =
            try self.faults.map { list in
                try Set(
                    list.split(separator: ",").map { name in
                        guard let fault = Fault.allCases.first(where: { "\($0)" == name }) else {
                            throw ValidationError("no fault is called \(name)")
                        }
                        return fault
                    })
            } ?? Set(Fault.allCases)
        let cluster = try Cluster(directory: directory, daemon: self.daemon, nodes: self.nodes, control: self.control, powerData: self.powerData)
        var passed = false
        defer {
            cluster.remove()
            if passed && !self.keep { _ = system("rm -rf '\(directory)'") }
        }
        var cuts: [String] = []
        for node in cluster.nodes {
            // node-1's first start, of its empty store, may be cut too.
            if let hook, node.index == 0 {
                cuts += try await Self.start(node, hook, phase: "start", round: 1)
            } else {
                try await node.start()
            }
        }
        let history = History()
        let load = Workload(nodes: cluster.nodes, history: history, seed: seed)
        let running = Task { await load.run(workers: self.nodes * self.workersPerNode) }
        var generator = SeededRandom(seed: seed)
        var injected: [Fault: Int] = [:]
        var unclean: [String] = []
        var healed: [(fault: Fault, at: Double)] = []
        for round in 1...self.rounds {
            try await Task.sleep(for: .milliseconds(500 + Int(generator.next() % 1500)))
            // On the power-loss file system, every other round cuts node-1's power.
            let others = Fault.allCases.filter { $0 != .nodePowerCut && chosen.contains($0) }
            let pick = Int(generator.next() % UInt64(hook == nil ? others.count : 2 * others.count))
            let fault = pick < others.count ? others[pick] : .nodePowerCut
            let hold = Duration.milliseconds(500 + Int(generator.next() % 2000))
            let node = fault == .nodePowerCut ? cluster.nodes[0] : cluster.nodes[Int(generator.next() % UInt64(cluster.nodes.count))]
            injected[fault, default: 0] += 1
            let began = history.now
            switch fault {
            case .nodeKilled, .nodeStopped:
                let signal = fault == .nodeKilled ? SIGKILL : SIGTERM
                let status = try await blocking { node.stop(signal) }
                // SIGTERM: the daemon drains and exits 0; anything else is a failure of its own.
                if signal == SIGTERM && status != 0 { unclean.append("\(node.name) ended with wait status \(status) after SIGTERM (round \(round))") }
                try await Task.sleep(for: hold)
                if let hook, node.index == 0 {
                    cuts += try await Self.start(node, hook, phase: "restart", round: round)
                } else {
                    try await node.start()
                }
            case .nodePaused:
                node.pause()
                try await Task.sleep(for: hold)
                node.resume()
            case .nodeCutOff:
                // Longer than the node's 5 s deadlines, at times: its writes are then given up.
                try node.network.cut()
                try await Task.sleep(for: hold * 3)
                try node.network.restore()
            case .databaseStopped, .databaseKilled:
                let server = cluster.primaryServer
                try await blocking { server.stop(immediately: fault == .databaseKilled) }
                try await Task.sleep(for: hold)
                try await blocking { server.start() }
            case .failover:
                try await blocking { try cluster.failOver() }
            case .nodePowerCut:
                guard let hook else { break }
                // Maybe aimed at one of its commits under the load; else cut when the delay ends.
                let pid = node.pid
                try await blocking { try hook.run(["arm", "load", "\(round)", "1"]) }
                try await Task.sleep(for: .milliseconds(200 + Int(generator.next() % 800)))
                try await blocking { try hook.run(["cut", "\(pid)"]) }
                try await blocking { node.stop(SIGKILL) }
                cuts.append(try await blocking { try hook.run(["reset"]) })
                try await Task.sleep(for: hold)
                cuts += try await Self.start(node, hook, phase: "restart", round: round)
            }
            let target = fault == .failover || fault == .databaseStopped || fault == .databaseKilled ? "" : " of \(node.name)"
            say(String(format: "round %d: %@%@ at %.1f s, healed after %.1f s", round, fault.rawValue, target, began, history.now - began))
            healed.append((fault, history.now))
            if self.quietSeconds > 0 { try await Task.sleep(for: .milliseconds(Int(self.quietSeconds * 1000))) }
        }
        try await Task.sleep(for: .seconds(1))
        load.stop.store(true, ordering: .relaxed)
        await running.value
        let loadEnded = history.now

        // Convergence: every node has applied the log's head and all hold the same.
        let events = history.all
        let faces = Dictionary(events.filter { $0.kind == .register }.map { (LoopFace.payload($0.face), $0.face) }, uniquingKeysWith: { a, _ in a })
        var states: [NodeState] = []
        var converged: Double?
        let deadline = ContinuousClock.now + .seconds(self.convergenceSeconds)
        while ContinuousClock.now < deadline {
            let (head, applied) = try await blocking { cluster.logPositions() }
            if cluster.nodes.allSatisfy({ (applied[$0.name] ?? -1) >= head }) {
                states = try await cluster.nodes.asyncMap { try await NodeState.read($0, faces: faces) }
                if states.allSatisfy({ $0 == states[0] }) {
                    converged = history.now - loadEnded
                    break
                }
            }
            try await Task.sleep(for: .milliseconds(250))
        }
        if states.isEmpty { states = try await cluster.nodes.asyncMap { try await NodeState.read($0, faces: faces) } }
        try history.write(to: directory + "/history.jsonl")
        // What each node held (gallery, template id, identifier, face seed: no template data).
        for (node, state) in zip(cluster.nodes, states) {
            try writeFile(node.directory + "/held.txt", state.rows.joined(separator: "\n") + "\n", mode: 0o644)
        }

        let checker = Checker(events: events)
        var findings = checker.check(states: states, nodes: cluster.nodes)
        // Erasure wipes a removed template's pages once a later commit exists and no older reader
        // holds them (a node's snapshot of its state for the fleet is one, for a moment): the files
        // are searched again, each second, for up to 10 s, before what is left counts.
        let erased = checker.erased(states: states)
        let search = ErasedBytes(faces: erased)
        var leftovers: [(node: String, file: String, count: Int)] = []
        let searched = history.now
        for attempt in 0..<10 {
            leftovers = cluster.nodes.flatMap { node in
                search.find(in: node.dataPath).filter { $0.count > 0 }.map { (node.name, $0.file, $0.count) }
            }
            if leftovers.isEmpty { break }
            if attempt < 9 { try await Task.sleep(for: .seconds(1)) }
        }
        say(
            String(
                format: "erased faces (sent, held by no node): %d, searched for in every node's data directory (%.1f s)", erased.count,
                history.now - searched))
        for leftover in leftovers {
            findings.add("resurrected", "\(leftover.node): \(leftover.count) erased faces' bytes in \(leftover.file) 10 s after convergence")
        }
        if converged == nil { findings.add("not converged", "the nodes had not converged \(self.convergenceSeconds) s after the load stopped") }
        for line in unclean { findings.add("unclean stop", line) }
        for event in events where event.outcome == .unknown("no answer") {
            findings.add(
                "unanswered",
                "node-\(event.node + 1): a \(event.kind.rawValue) sent at \(event.start) s had no answer within \(Workload.answerDeadline)")
        }
        Self.report(events: events, injected: injected, findings: findings, converged: converged, held: states.first)
        Self.reportRecovery(events: events, healed: healed, nodes: cluster.nodes.count)
        if hook != nil {
            say("power cuts of node-1: \(cuts.count)")
            for cut in cuts { say("  \(cut)") }
        }
        passed = self.control ? findings.count > 0 : findings.count == 0
        if self.control {
            say(
                passed
                    ? "fleet loop: the negative control failed as it must (\(findings.count) violations found)"
                    : "fleet loop: the negative control found NOTHING: the checker cannot see writes that bypass the log")
        }
        if !passed {
            say("fleet loop: FAILED; the run's history, node logs and data are in \(directory)")
            throw ExitCode(1)
        }
    }

    /// Starts `node` on the power-loss file system, its start perhaps cut (`phase` armed): a start
    /// the cut ended is started again, up to 4 attempts (the last never cut). The cuts' descriptions.
    static func start(_ node: Node, _ hook: PowerHook, phase: String, round: Int) async throws -> [String] {
        var cuts: [String] = []
        for attempt in 1...4 {
            try await blocking { try hook.run(["arm", phase, "\(round)", "\(attempt)"]) }
            do {
                try await node.start()
                // Nothing aimed at what follows the start: the next cut is armed by its round. The
                // start's aim may have been reached in between (the node writes as it catches up,
                // after it answers): then the power is off, the node dead, and this start was cut.
                let idle = try await blocking { try hook.run(["arm", "idle", "\(round)", "\(attempt)"]) }
                if !idle.hasPrefix("the power is off") { return cuts }
                throw LoopError(idle)
            } catch {
                try await blocking { node.stop(SIGKILL) }
                let cut = try await blocking { try hook.run(["reset"]) }
                guard !cut.isEmpty else { throw error }
                cuts.append(cut)
            }
        }
        throw LoopError("node-1 did not start in 4 attempts on the power-loss file system")
    }

    /// After each fault is healed: how long until every node acknowledged a write sent after it
    /// (before the next fault), per kind of fault: the median and the longest, and how many rounds
    /// ended (the next fault began) before some node wrote again.
    static func reportRecovery(events: [Event], healed: [(fault: Fault, at: Double)], nodes: Int) {
        let writes = events.filter { $0.kind != .identify && $0.acknowledged }.sorted { $0.end < $1.end }
        var times: [Fault: [Double]] = [:]
        var unrecovered: [Fault: Int] = [:]
        for (index, round) in healed.enumerated() {
            let next = index + 1 < healed.count ? healed[index + 1].at : Double.infinity
            let again = (0..<nodes).map { node in
                writes.first { $0.node == node && $0.start >= round.at && $0.end < next }.map { $0.end - round.at }
            }
            if again.allSatisfy({ $0 != nil }) {
                times[round.fault, default: []].append(again.map { $0! }.max()!)
            } else {
                unrecovered[round.fault, default: 0] += 1
            }
        }
        for fault in Fault.allCases where times[fault] != nil || unrecovered[fault] != nil {
            let sorted = (times[fault] ?? []).sorted()
            let median = sorted.isEmpty ? "-" : String(format: "%.2f s", sorted[sorted.count / 2])
            let longest = sorted.last.map { String(format: "%.2f s", $0) } ?? "-"
            say(
                "writes on every node again after \(fault.rawValue): median \(median), longest \(longest) (\(sorted.count) rounds); "
                    + "\(unrecovered[fault] ?? 0) rounds ended before every node wrote again")
        }
    }

    static func report(events: [Event], injected: [Fault: Int], findings: Findings, converged: Double?, held: NodeState?) {
        let faults = Fault.allCases.map { "\($0.rawValue) \(injected[$0] ?? 0)" }.joined(separator: ", ")
        say("faults: \(faults)")
        var refused: [String: Int] = [:]
        var unknown: [String: Int] = [:]
        for event in events {
            switch event.outcome {
            case .ok: break
            case .refused(let code): refused[code, default: 0] += 1
            case .unknown(let reason): unknown[reason, default: 0] += 1
            }
        }
        let kinds = Dictionary(grouping: events, by: \.kind).map { "\($0.key.rawValue) \($0.value.count)" }.sorted().joined(separator: ", ")
        say("requests: \(events.count) (\(kinds))")
        say(
            "acknowledged: \(events.count(where: \.acknowledged)); refused: \(refused.values.reduce(0, +)) \(refused.sorted { $0.key < $1.key }); "
                + "outcome unknown: \(unknown.values.reduce(0, +)) \(unknown.sorted { $0.key < $1.key })")
        let templates = held.map { $0.rows.count } ?? 0
        say(
            "held at the end: \(templates) templates; converged \(converged.map { String(format: "%.2f s", $0) } ?? "never") after the load stopped")
        let rules = ["lost", "doubled", "resurrected", "refused but stored", "disagree", "stale read", "not converged", "unclean stop", "unanswered"]
        say("checker: " + rules.map { "\(findings.count($0)) \($0)" }.joined(separator: ", "))
        for rule in rules {
            for detail in (findings.violations[rule] ?? []).prefix(5) { say("  \(rule): \(detail)") }
        }
    }
}

/// Runs `body` (which blocks: pg_ctl, waitpid) on a thread of its own, off the cooperative pool
/// the load's clients run on.
@discardableResult
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let result: Result<T, any Error> = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(returning: Result { try body() })
        }
    }
    return try result.get()
}

extension Array where Element: Sendable {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

/// Prints a line and flushes it, also into a file or a pipe: a long run shows its rounds as they pass.
func say(_ line: String) {
    print(line)
    fflush(nil)
}
