import Logging
import RegistryEngine
import RegistryModel
import ServiceLifecycle
import Synchronization

/// Refusals (an answer with an error code: a similar face, a face that does not match, a bad
/// template, a missing right…), summarised in the log and in the audit trail so that a flood of them
/// costs the peer that sends it, not the store or the log: any peer that can open the socket can send
/// tens of thousands of refused requests a second.
///
/// Refusals are counted per kind — the peer's uid, the operation and the error code — per period (a
/// minute: ``PeriodicReportService`` calls ``flush(now:)``). The first of each kind in a period is
/// logged at notice when it happens (uid, pid, operation, code, the gallery cut short and escaped),
/// and audited in full by the dispatcher; the rest are counted, and when the period ends each kind
/// with more gets one log line and one audit entry carrying the count (``AuditEntry/count``). A flood
/// therefore adds at most two audit entries and two log lines per kind and period, whatever its rate.
///
/// Except in the audit trail, the refusals that are decisions about a person: a similar face
/// registered, a face that does not match, a liveness or quality refusal, an identifier not registered.
/// Each of those stays an entry of its own (who tried what against whom is what the trail is for);
/// only a peer holding the operation's right can cause them. Never a template, never an identifier in
/// the log: the audit trail has the details.
final class RefusalSummary: Sendable {
    struct Kind: Hashable {
        var uid: UInt32?
        var operation: String
        var code: RegistryError.Code
    }

    /// What is known of the refusals of one kind beyond the first, in this period.
    private struct Tally {
        var count = 0
        var pid: Int32?
        /// Their gallery when they all named the same one, else "" (the summary then names none).
        var gallery: String?
        var audited: Bool
    }

    private struct State {
        var tallies: [Kind: Tally] = [:]
        /// Refusals of kinds beyond ``maximumKinds`` this period, by code.
        var overflow: [RegistryError.Code: Int] = [:]
        /// When the period being counted began.
        var since: ContinuousClock.Instant
    }

    /// Kinds counted per period at most: uids are the machine's users and operations and codes a
    /// fixed list, so this is never reached by honest peers; beyond it refusals are counted by code alone.
    static let maximumKinds = 4_096

    private let state: Mutex<State>
    private let logger: Logger
    /// Where summaries are audited (nil: log only, as in tests of the log alone).
    private let engine: Engine?

    init(logger: Logger, engine: Engine? = nil, since start: ContinuousClock.Instant = .now) {
        self.logger = logger
        self.engine = engine
        self.state = Mutex(State(since: start))
    }

    /// Whether every refusal with `code` is audited on its own (a decision about a person), rather
    /// than the first of its kind per period and then a count.
    static func isAuditedEachTime(_ code: RegistryError.Code) -> Bool {
        switch code {
        case .similarFaceRegistered, .faceMismatch, .livenessFailed, .qualityTooLow, .identifierNotRegistered: true
        default: false
        }
    }

    /// Counts one refusal. Returns whether it is the first of its kind in this period (then logged
    /// here, and to be audited in full by the caller when `audited`).
    /// - Parameters:
    ///   - gallery: the gallery the request named (cut short by the request's bounds), "" for none.
    ///   - right: the missing right, for a `PERMISSION_DENIED` (logged).
    ///   - audited: whether the operation is audited at all (hello and connections are not).
    @discardableResult
    func record(
        peer: Peer?, operation: String, code: RegistryError.Code, gallery: String = "", right: OperationClass? = nil, audited: Bool = false
    ) -> Bool {
        let kind = Kind(uid: peer?.uid, operation: operation, code: code)
        let first = self.state.withLock { state -> Bool in
            if var tally = state.tallies[kind] {
                tally.count += 1
                tally.pid = peer?.pid
                // By bytes: a name that only Swift's equivalence calls the same is another gallery.
                if !(tally.gallery?.sameIdentifier(as: gallery) ?? false) { tally.gallery = tally.count == 1 ? gallery : "" }
                state.tallies[kind] = tally
                return false
            }
            guard state.tallies.count < Self.maximumKinds else {
                state.overflow[code, default: 0] += 1
                return false
            }
            state.tallies[kind] = Tally(audited: audited)
            return true
        }
        if first {
            var metadata: Logger.Metadata = [
                "uid": "\(peer.map { String($0.uid) } ?? "?")", "pid": "\(peer.map { String($0.pid) } ?? "?")",
                "operation": "\(Names.loggable(operation))", "code": "\(code.rawValue)",
            ]
            if !gallery.isEmpty { metadata["gallery"] = "\(Names.loggable(gallery))" }
            if let right { metadata["right"] = "\(right.rawValue)" }
            self.logger.notice(code == .permissionDenied ? "permission denied" : "request refused", metadata: metadata)
        }
        return first
    }

    /// Logs, and audits where they are summarised, the refusals not logged one by one since the last
    /// flush, and starts a new period.
    /// - Returns: the line's kinds and counts (for tests), empty when there was nothing more to say.
    @discardableResult
    func flush(now: ContinuousClock.Instant = .now) -> [(kind: String, count: Int)] {
        let (tallies, overflow, since) = self.state.withLock { state in
            defer {
                state.tallies = [:]
                state.overflow = [:]
                state.since = now
            }
            return (state.tallies, state.overflow, state.since)
        }
        let time = AuditEntry.now()
        var repeated: [(kind: String, count: Int)] = []
        // In a fixed order (uid, operation, code): the trail's summaries are the same for the same refusals.
        let ordered = tallies.sorted {
            ($0.key.uid ?? .max, $0.key.operation, $0.key.code.rawValue) < ($1.key.uid ?? .max, $1.key.operation, $1.key.code.rawValue)
        }
        for (kind, tally) in ordered where tally.count > 0 {
            // The log counts them all, the first included; the audit entry those beyond the first.
            repeated.append((kind: "uid \(kind.uid.map(String.init) ?? "?") \(kind.operation) \(kind.code.rawValue)", count: tally.count + 1))
            if tally.audited && !Self.isAuditedEachTime(kind.code) {
                self.engine?.recordAudit(
                    time: time, uid: kind.uid ?? .max, pid: tally.pid ?? -1, operation: kind.operation, gallery: tally.gallery ?? "",
                    identifiers: [], outcome: .refused, score: nil, errorCode: kind.code.rawValue, count: UInt32(clamping: tally.count))
            }
        }
        for (code, count) in overflow.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            repeated.append((kind: "other \(code.rawValue)", count: count))
            self.engine?.recordAudit(
                time: time, uid: .max, pid: -1, operation: "various", gallery: "", identifiers: [], outcome: .refused, score: nil,
                errorCode: code.rawValue, count: UInt32(clamping: count))
        }
        guard !repeated.isEmpty else { return [] }
        repeated.sort { $0.kind < $1.kind }
        // One line, bounded: the most frequent kinds, then how many more.
        let shown = repeated.sorted { $0.count > $1.count }.prefix(32).sorted { $0.kind < $1.kind }
        var text = shown.map { "\($0.kind) ×\($0.count)" }.joined(separator: ", ")
        if repeated.count > shown.count { text += " and \(repeated.count - shown.count) more kinds" }
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
