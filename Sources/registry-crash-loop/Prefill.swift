import Glibc
import RegistryProtocol

/// Round 0 (--prefill): registrations made before the first round, so that the store is large
/// enough for what only large stores do (the index snapshot at a clean stop, from 100 000
/// templates). Every one must be acknowledged, and the daemon must stop cleanly after them; round 1
/// deletes among them, and the final check reads them back with the rest.
enum Prefill {
    /// Registers `count` templates `r0-c{connection}-{n}`; returns their identifiers, sorted.
    static func run(settings: RoundSettings, count: Int) throws -> [String] {
        var cuts: [String] = []
        let daemon = try settings.startDaemon(phase: "prefill-start", round: 0, cuts: &cuts)
        defer { daemon.killHard() }
        let connections = try (0..<settings.connections).map { _ in try FrameConnection(path: settings.socketPath) }
        defer { for connection in connections { connection.close() } }
        let quota = connections.indices.map { count / connections.count + ($0 < count % connections.count ? 1 : 0) }
        var sent = Array(repeating: 0, count: connections.count)
        var answered = Array(repeating: 0, count: connections.count)
        while answered != quota {
            for (index, connection) in connections.enumerated() {
                while sent[index] < quota[index] && sent[index] - answered[index] < settings.window {
                    let registration = Registration(round: 0, connection: index, sequence: sent[index])
                    try connection.enqueue(CrashRound.registerRequest(registration, seed: settings.seed))
                    sent[index] += 1
                }
                connection.flush()
            }
            Poll.wait(connections, milliseconds: 20)
            for (index, connection) in connections.enumerated() {
                for reply in try connection.receive() {
                    guard case .register(let result)? = reply.result, result.stored.count == 1 else {
                        throw CrashLoopError("prefill: registration \(answered[index]) on connection \(index): \(CrashRound.describe(reply))")
                    }
                    answered[index] += 1
                }
                if connection.readClosed && answered[index] < quota[index] {
                    throw CrashLoopError(
                        "prefill: the daemon closed connection \(index) with \(quota[index] - answered[index]) registrations unanswered")
                }
            }
        }
        try settings.hook?.arm("prefill-stop", round: 0)
        daemon.signal(SIGTERM)
        // A clean stop of a large store writes the index snapshot: allow it more than the drain deadline.
        let status = daemon.wait(seconds: settings.drainDeadlineSeconds + 120)
        guard status == .exited(0) else {
            throw CrashLoopError("prefill: the daemon ended with \(status.map { "\($0)" } ?? "nothing (still running)") after SIGTERM")
        }
        return connections.indices.flatMap { index in
            (0..<quota[index]).map { Registration(round: 0, connection: index, sequence: $0).identifier }
        }.sorted()
    }
}
