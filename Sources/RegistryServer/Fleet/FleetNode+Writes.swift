import Logging
import RegistryEngine
import RegistryFleet
import RegistryModel
import RegistryProtocol
import Synchronization

extension FleetNode {
    // MARK: Writes through the log

    /// Appends `write` to the log with the other writes waiting now (one PostgreSQL transaction, one
    /// fleet-wide position each), then leaves it to the follower, which applies it with its own
    /// operation and completion. Refused with `FLEET_UNAVAILABLE` when PostgreSQL does not take it.
    /// A node that cannot apply the log (an entry fails here alone) or is far behind it refuses
    /// writes before they reach the log: its own would wait behind everything it has not applied.
    func submit(_ write: FleetWrite) {
        let refusal: RegistryError? = self.state.withLock { state in
            if let reason = state.failedHere ?? state.stuck?.reason {
                return RegistryError(
                    .fleetUnavailable,
                    "this node cannot apply the fleet's log at the moment (\(Names.loggable(reason, maximum: 200))): "
                        + "the write was not carried out; reads go on, retry the write later")
            }
            if state.head - state.followed > Self.maximumLagForWrites {
                return RegistryError(
                    .fleetUnavailable,
                    "this node is \(state.head - state.followed) entries behind the fleet's log and catching up: "
                        + "the write was not carried out; reads go on, retry the write later")
            }
            return nil
        }
        if let refusal { return write.refuse(refusal) }
        let flush = self.state.withLock { state in
            state.pending.append(write)
            defer { state.flushing = true }
            return !state.flushing
        }
        if flush { Task { await self.flush() } }
    }

    /// Entries behind the log's head past which a node refuses writes (about a second of applying).
    static let maximumLagForWrites: Int64 = 10_000
    /// How long a write in the log waits to be applied here before its client is told where it is.
    static let applyDeadline: Duration = .seconds(10)

    /// Appends what is pending, a group at a time, until nothing is.
    private func flush() async {
        while true {
            let taken: (writes: [FleetWrite], tokens: [UInt64], seal: FleetSeal?)? = self.state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.flushing = false
                    return nil
                }
                let writes = Array(state.pending.prefix(Self.maximumAppend))
                state.pending.removeFirst(writes.count)
                // Waiting before the append: the follower may read the entries before it returns.
                var tokens: [UInt64] = []
                for write in writes {
                    state.nextToken &+= 1
                    tokens.append(state.nextToken)
                    state.waiting[state.nextToken] = write
                }
                return (writes, tokens, state.seal)
            }
            guard let (writes, tokens, seal) = taken else { return }
            let progress = FleetAppendProgress()
            do {
                guard let seal else { throw FleetTimeout() }
                let entries = try zip(writes, tokens).map { write, token in
                    (gallery: write.gallery, kind: write.kind.rawValue, entry: try seal.seal(FleetPayload.encode(token: token, frame: write.frame)))
                }
                _ = try await withinDeadline(.seconds(5)) { try await self.log.append(entries, progress: progress) }
                self.state.withLock { $0.reachable = true }
                self.wakeFollower()
                // Every request answered: one that this node has not applied in time (it is stuck
                // behind an entry it cannot apply) is told that it is in the log, once.
                Task {
                    try? await Task.sleep(for: Self.applyDeadline)
                    self.refuse(
                        tokens,
                        with: RegistryError(
                            .internal,
                            "the write is in the fleet's log, but this node has not applied it within \(Self.applyDeadline) (it is behind, "
                                + "or cannot apply an entry before it: see its log); it takes effect on every node, this one once it applies it"))
                }
            } catch {
                self.state.withLock { $0.reachable = false }
                // A timeout gives the append up wherever it was: in its COMMIT (it may have committed),
                // or before (waiting for a connection, or for the order lock): then it never sends one.
                let mayHaveCommitted =
                    (error as? FleetAppendError)?.mayHaveCommitted ?? !progress.giveUp()
                self.logger.warning(
                    mayHaveCommitted
                        ? "fleet writes unconfirmed: the fleet's database did not confirm their commit"
                        : "fleet writes refused: the fleet's database did not take them",
                    metadata: ["writes": "\(writes.count)", "error": "\(String(reflecting: error).prefix(300))"])
                if mayHaveCommitted {
                    Task { await self.resolve(tokens) }
                } else {
                    self.refuse(tokens, with: Self.unavailable)
                }
            }
        }
    }

    static let unavailable = RegistryError(
        .fleetUnavailable, "this node cannot reach the fleet's database: the write was not carried out; reads go on, retry the write later")

    /// Answers the writes still waiting under `tokens` with `error` (those the follower found in the
    /// log meanwhile it answers itself).
    private func refuse(_ tokens: [UInt64], with error: RegistryError) {
        for token in tokens {
            if let write = self.claim(token: token) { write.refuse(error) }
        }
    }

    /// Writes whose commit PostgreSQL did not confirm: committed or not, the log says. Once the
    /// database answers again, its head is read, and the follower reads up to it: a write that was
    /// committed is then found there and answered as applied; one that was not is refused. Positions
    /// commit in their order, and the head is read once every append in progress has ended (``FleetLog/head()``), so nothing of
    /// this node's can commit behind that head.
    /// Should the database stay silent for `limit`, the answer says the outcome is unknown.
    func resolve(_ tokens: [UInt64], limit: Duration = .seconds(30)) async {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            guard let head = try? await withinDeadline(.seconds(5), { try await self.log.head() }) else {
                try? await Task.sleep(for: .milliseconds(500))
                continue
            }
            while ContinuousClock.now < deadline && self.state.withLock({ $0.followed }) < head {
                try? await Task.sleep(for: .milliseconds(10))
            }
            if self.state.withLock({ $0.followed }) >= head {
                return self.refuse(tokens, with: Self.unavailable)
            }
        }
        self.refuse(
            tokens,
            with: RegistryError(
                .internal,
                "the fleet's database did not confirm the write and has not answered since: it may have been carried out (then on "
                    + "every node); look (identify, list) before writing again"))
    }

    /// Writes `frames` (requests this node makes of itself: its configured galleries) through the
    /// log as a client's writes go, and returns once this node has applied them; throws when one
    /// was refused, or failed here.
    func propose(_ frames: [(gallery: String, frame: [UInt8])]) async throws {
        guard let dispatcher = self.dispatcher else { throw RegistryError(.internal, "the node is not serving yet") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (gallery, frame) in frames {
                group.addTask {
                    try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
                        self.submit(
                            FleetWrite(
                                gallery: gallery, frame: frame,
                                apply: { application, ticket in
                                    dispatcher.applyFleetEntry(dispatcher.fleetOperation(frame), application: application, ticket: ticket)
                                    Task {
                                        if case .failedHere(let reason) = await ticket.outcome() {
                                            return done.resume(throwing: RegistryError(.internal, reason))
                                        }
                                        done.resume()
                                    }
                                },
                                refuse: { done.resume(throwing: $0) }))
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// The daemon stops, its connections closed at `deadline`: a write of this node still waiting
    /// then (its commit unconfirmed and being settled from the log, or appended and not applied here
    /// yet) is answered a second before it, as of unknown outcome, rather than left unanswered (and
    /// the stop failed) because PostgreSQL cannot settle it in time. Writes settled before are
    /// answered as usual.
    func drainBegins(deadline: ContinuousClock.Instant) {
        Task {
            try? await Task.sleep(until: deadline - .seconds(1))
            let waiting = self.state.withLock { state in
                defer { state.waiting = [:] }
                return Array(state.waiting.values)
            }
            for write in waiting {
                write.refuse(
                    RegistryError(
                        .internal,
                        "registryd is stopping and the fleet's database has not confirmed this write: it may have been carried out "
                            + "(then on every node); look (identify, list) before writing again"))
            }
        }
    }

    /// Takes the write this node made under `token`, if it still waits (whoever takes it answers it).
    func claim(token: UInt64) -> FleetWrite? {
        self.state.withLock { $0.waiting.removeValue(forKey: token) }
    }

    func wakeFollower() {
        let waiter = self.state.withLock { state in
            state.woken = true
            defer { state.wake = nil }
            return state.wake
        }
        waiter?.resume()
    }
}

/// The kinds of entries in the log.
enum FleetEntryKind: Int16 {
    /// A client's request (a `registry.v1.Request`), applied as the node that took it applies it.
    case request = 1
    /// An auto-enrolment a node's identify or authenticate triggered (``FleetAutoEnrolment``).
    case autoEnrolment = 2
    /// A client's request that removes data (a deletion): applied as ``request`` is; told apart so
    /// that a snapshot follows it soon and compaction takes the removed data out of the log.
    case erasure = 3
}

/// An entry's payload before sealing: the writing node's token for it (how it finds its waiting
/// write), then the request.
enum FleetPayload {
    static func encode(token: UInt64, frame: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: token.bigEndian, Array.init) + frame
    }

    static func decode(_ payload: [UInt8]) -> (token: UInt64, frame: ArraySlice<UInt8>)? {
        guard payload.count >= 8 else { return nil }
        let token = payload.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return (token, payload.dropFirst(8))
    }
}
