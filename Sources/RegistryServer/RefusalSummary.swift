import Logging
import RegistryEngine
import RegistryModel
import ServiceLifecycle
import Synchronization

/// Refusals (an answer with an error code: a similar face, a face that does not match, a bad
/// template…) summarised in the log at notice, so that an operator sees them without a flood: the
/// first refusal of each kind (operation and code) in a period is logged when it happens, the rest
/// are counted and reported together when the period ends (`flush`, every minute). Never a template,
/// never an identifier: the audit trail has the details.
final class RefusalSummary: Sendable {
    private struct State {
        var counts: [String: Int] = [:]
        /// When the period being counted began.
        var since: ContinuousClock.Instant
    }
    private let state: Mutex<State>
    private let logger: Logger

    init(logger: Logger, since start: ContinuousClock.Instant = .now) {
        self.logger = logger
        self.state = Mutex(State(since: start))
    }

    func record(operation: String, code: String) {
        let key = "\(operation) \(code)"
        let first = self.state.withLock { state in
            state.counts[key, default: 0] += 1
            return state.counts[key] == 1
        }
        if first { self.logger.notice("request refused", metadata: ["operation": "\(operation)", "code": "\(code)"]) }
    }

    /// Logs the refusals not logged one by one since the last flush, and starts a new period.
    /// - Returns: the line's kinds and counts (for tests), empty when there was nothing more to say.
    @discardableResult
    func flush(now: ContinuousClock.Instant = .now) -> [(kind: String, count: Int)] {
        let (counts, since) = self.state.withLock { state in
            defer {
                state.counts = [:]
                state.since = now
            }
            return (state.counts, state.since)
        }
        let repeated = counts.filter { $0.value > 1 }.sorted { $0.key < $1.key }.map { (kind: $0.key, count: $0.value) }
        guard !repeated.isEmpty else { return [] }
        let text = repeated.map { "\($0.kind) ×\($0.count)" }.joined(separator: ", ")
        self.logger.notice("requests refused in the last \(Self.describe(now - since))", metadata: ["refusals": "\(text)"])
        return repeated
    }

    /// The period as people say it: whole minutes as such ("1 min" for the periodic flush), else
    /// seconds (the last, shorter period at shutdown).
    static func describe(_ period: Duration) -> String {
        let seconds = max(1, Int((Double(period.components.seconds) + Double(period.components.attoseconds) / 1e18).rounded()))
        return seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds) s"
    }
}

/// Once a minute: the refusal summary to the log, and a fresh `STATUS=` line for systemd
/// (`systemctl status registryd` shows it) — the one sent at start would otherwise say how many
/// templates there were then, for ever.
struct PeriodicReportService: Service {
    let engine: Engine
    let dispatcher: RequestDispatcher
    let period: Duration
    /// Where the status line goes: systemd (tests pass their own).
    var notify: @Sendable (String) -> Void = { Systemd.notify($0) }

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            // Woken early by a graceful shutdown, so that stopping never waits for the minute.
            guard (try? await cancelWhenGracefulShutdown({ try await Task.sleep(for: self.period) })) != nil else { break }
            self.dispatcher.refusals.flush()
            self.notify("STATUS=\(Self.status(self.engine, self.dispatcher.counters))")
        }
        self.dispatcher.refusals.flush()
    }

    static func status(_ engine: Engine, _ counters: ServerCounters) -> String {
        let galleries = engine.galleries()
        let templates = galleries.reduce(0) { $0 + $1.registries.reduce(0) { $0 + $1.templateCount } }
        return "serving \(templates) templates in \(galleries.count) galleries; "
            + "\(counters.connections.load(ordering: .relaxed)) connections open, "
            + "\(counters.requestsServed.load(ordering: .relaxed)) requests served"
    }
}
