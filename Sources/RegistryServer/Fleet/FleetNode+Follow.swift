import Logging
import PostgresNIO
import RegistryEngine
import RegistryFleet
import RegistryModel
import RegistryProtocol
import ServiceLifecycle
import SwiftProtobuf
import Synchronization

extension FleetNode: Service {
    // MARK: Following the log

    /// Keeps the connection pool, follows the log and reports the node's position, until the
    /// daemon's graceful shutdown (after the server's drain: the daemon lists this service first, so
    /// it stops last and the writes still being answered are applied).
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.follow() }
            group.addTask { await self.listen() }
            group.addTask { await self.report() }
            group.addTask { await self.proposeConfiguredGalleries() }
            group.addTask { await self.compactRegularly() }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        self.pool.cancel()
    }

    /// Proposes the configured galleries to the fleet once it answers (a define_gallery entry each,
    /// applied by every node as a request would be), retrying until they are applied here.
    private func proposeConfiguredGalleries() async {
        while !Task.isCancelled {
            do {
                try await self.proposeGalleries(self.configuredGalleries)
                return
            } catch {
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Proposes `galleries` to the fleet and waits until they are applied here.
    func proposeGalleries(_ galleries: [GalleryConfiguration]) async throws {
        guard !galleries.isEmpty else { return }
        let frames = try galleries.map { configuration in
            (
                gallery: configuration.name,
                frame: try Registry_V1_Request.with { $0.defineGallery = Registry_V1_DefineGalleryRequest(configuration) }.serializedBytes()
                    as [UInt8]
            )
        }
        try await self.propose(frames)
        self.logger.info("the configured galleries are proposed to the fleet and applied here", metadata: ["galleries": "\(frames.count)"])
    }

    /// Applies the log's entries in order, from the store's position, for good.
    func follow() async {
        var next: Int64 = (try? self.engine.fleetPosition()) ?? 0
        var tickets: [FleetTicket] = []
        var lastFailure: String?
        // Every entry started ends before the store's position says where to go on.
        func settle() async {
            for ticket in tickets { _ = await ticket.outcome() }
            tickets = []
        }
        // This node cannot go on past `position` for a reason of its own: logged once per reason,
        // and writes refused (``State/stuck``) until the store's position passes it.
        func halt(at position: Int64, _ reason: String, _ message: Logger.Message, _ metadata: Logger.Metadata) {
            if reason != lastFailure {
                self.logger.error(message, metadata: metadata.merging(["error": "\(Names.loggable(reason, maximum: 512))"]) { $1 })
            }
            lastFailure = reason
            self.state.withLock { $0.stuck = (position, reason) }
        }
        while !Task.isCancelled {
            do {
                // Entries started before that failed here alone (their failure can come after their
                // write was queued, or when nothing follows them): the log is applied again from the
                // store's position, once every entry started has ended.
                tickets.removeAll { ticket in
                    guard let outcome = ticket.ended else { return false }
                    if case .failedHere(let reason) = outcome { self.state.withLock { $0.failedHere = $0.failedHere ?? reason } }
                    return true
                }
                if let reason = self.state.withLock({ $0.failedHere }) {
                    await settle()
                    next = (try? self.engine.fleetPosition()) ?? next
                    halt(
                        at: next + 1, reason, "a fleet entry failed on this node; applying the log again from the store's position",
                        ["position": "\(next + 1)"])
                    let followed = next
                    self.state.withLock { state in
                        state.failedHere = nil
                        state.followed = followed
                    }
                    try await Task.sleep(for: .milliseconds(500))
                } else if let stuck = self.state.withLock({ $0.stuck }), (try? self.engine.fleetPosition()) ?? 0 >= stuck.position {
                    // The entry it stopped at is applied at last.
                    lastFailure = nil
                    self.state.withLock { $0.stuck = nil }
                }
                if self.state.withLock({ $0.seal == nil }) {
                    try await withinDeadline(.seconds(5)) { try await self.prepareAgain() }
                }
                let after = next
                let (entries, trimmed) = try await withinDeadline(.seconds(5)) { try await self.log.read(after: after, limit: Self.page) }
                // The log trimmed past this node's position (it is new, or was away longer than the
                // retention time): the entries it lacks are gone, the newest snapshot replaces them.
                // Read in one statement with the entries, a trimmed start at or below the position
                // means that what was read is all there is.
                if trimmed > after {
                    await settle()
                    do {
                        next = try await self.loadSnapshot(trimmed: trimmed)
                    } catch {
                        halt(
                            at: after + 1, (error as? RegistryError)?.message ?? "\(error)",
                            "this node is behind the fleet's trimmed log and could not load the fleet's snapshot",
                            ["position": "\(after)", "trimmed": "\(trimmed)"])
                        try await Task.sleep(for: .seconds(1))
                        continue
                    }
                    self.state.withLock { state in
                        state.followed = next
                        state.head = max(state.head, next)
                    }
                    continue
                }
                self.state.withLock { state in
                    state.reachable = true
                    if let last = entries.last { state.head = max(state.head, last.position) }
                }
                if entries.isEmpty {
                    self.state.withLock { $0.followed = max($0.followed, after) }
                    // Woken by an append's notification; looking again each second all the same
                    // (a notification is lost while the listening connection is re-made).
                    await self.waitForEntries(.seconds(1))
                    continue
                }
                for entry in entries {
                    if self.state.withLock({ $0.failedHere != nil }) { break }
                    let ticket = await self.apply(entry, after: next, behind: tickets)
                    tickets.append(ticket)
                    next = entry.position
                    self.state.withLock { $0.followed = next }
                    // Failed before it wrote: the entries after it would only fail behind it.
                    if case .failedHere(let reason)? = ticket.ended { self.state.withLock { $0.failedHere = $0.failedHere ?? reason } }
                }
            } catch is CancellationError {
                return
            } catch {
                if self.state.withLock({ $0.reachable }) {
                    self.logger.warning("the fleet's database stopped answering", metadata: ["error": "\(String(reflecting: error).prefix(300))"])
                }
                self.state.withLock { $0.reachable = false }
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    /// The schema and join, when PostgreSQL did not answer at start.
    private func prepareAgain() async throws {
        let prepared = try await self.database.withPrimary { try await FleetSchema.prepare($0, logger: self.logger) }
        try await self.engine.joinFleet(id: prepared.fleetId)
        self.state.withLock { state in
            state.fleetId = prepared.fleetId
            state.seal = FleetSeal(key: self.settings.key, fleetId: prepared.fleetId)
        }
    }

    /// Starts applying one entry and returns once its write is queued behind the previous ones (so
    /// the next can start), or its operation ended without writing (then its position is recorded
    /// alone, when the refusal is the same on every replica). An entry that is not pipelined
    /// (``RegistryOperation/isPipelinedInTheFleet``) starts once the entries `behind` which it comes
    /// have ended, and has ended when this returns: what it reads before it writes, and what the
    /// next entry reads, is then the same on every replica, however its writer batches the entries.
    private func apply(_ entry: FleetEntry, after previous: Int64, behind ahead: [FleetTicket]) async -> FleetTicket {
        let ticket = FleetTicket(position: entry.position)
        let application = FleetApplication(position: entry.position, previous: previous, committedAt: entry.committedAt) { ticket.queued() }
        guard let seal = self.state.withLock({ $0.seal }) else {
            ticket.failed(RegistryError(.internal, "the fleet's seal is not known yet"))
            return ticket
        }
        let payload: (token: UInt64, frame: ArraySlice<UInt8>)
        let kind: FleetEntryKind
        do {
            guard let known = FleetEntryKind(rawValue: entry.kind) else {
                throw RegistryError(.internal, "fleet entry \(entry.position) is of a kind this registryd does not know (\(entry.kind))")
            }
            guard let decoded = FleetPayload.decode(try seal.open(entry.entry)) else {
                throw RegistryError(.internal, "fleet entry \(entry.position) is too short to be an entry")
            }
            (payload, kind) = (decoded, known)
        } catch {
            // Not for this node to skip: every replica must apply it. Stopped here until it can.
            ticket.failed(RegistryError(.internal, "\(error)"))
            return ticket
        }
        let start: @Sendable (FleetApplication, FleetTicket) -> Void
        let pipelined: Bool
        if entry.node == self.settings.node, let write = self.claim(token: payload.token) {
            (start, pipelined) = (write.apply, write.pipelined)
        } else if kind == .autoEnrolment {
            // It reads the identifier's templates before it writes: never pipelined.
            let frame = Array(payload.frame)
            start = { application, ticket in self.applyAutoEnrolment(frame, application: application, ticket: ticket, answer: nil) }
            pipelined = false
        } else if let dispatcher = self.dispatcher {
            let operation = dispatcher.fleetOperation(Array(payload.frame))
            start = { application, ticket in dispatcher.applyFleetEntry(operation, application: application, ticket: ticket) }
            pipelined = operation.map { type(of: $0.operation).isPipelinedInTheFleet } ?? false
        } else {
            ticket.failed(RegistryError(.internal, "the node is not serving yet"))
            return ticket
        }
        if !pipelined {
            for earlier in ahead { _ = await earlier.outcome() }
        }
        start(application, ticket)
        let started = await ticket.started()
        if !started.queued, started.outcome == .done {
            // Refused before it wrote, as on every replica: its position alone is recorded, in order.
            FleetApplication.$current.withValue(application) {
                self.engine.recordFleetPosition { result in
                    if case .failure(let error) = result {
                        self.state.withLock { $0.failedHere = $0.failedHere ?? ((error as? RegistryError)?.message ?? "\(error)") }
                    }
                }
            }
        }
        if !pipelined { _ = await ticket.outcome() }
        return ticket
    }

    /// Wakes the follower whenever an append commits anywhere in the fleet.
    private func listen() async {
        while !Task.isCancelled {
            do {
                try await self.log.listen { self.wakeFollower() }
            } catch {
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    /// Waits until an append committed (this node's, or another's notification), or `limit` passed.
    private func waitForEntries(_ limit: Duration) async {
        let timer = Task {
            // Not when cancelled: a wake-up left behind would end the next wait at once.
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            self.wakeFollower()
        }
        // Cancellation (the daemon's stop) ends the wait too: it would otherwise hold the stop for
        // up to `limit`, which the drain deadline counts.
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = self.state.withLock { state -> Bool in
                    if state.woken {
                        state.woken = false
                        return true
                    }
                    state.wake = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.wakeFollower()
        }
        self.state.withLock { $0.woken = false }
        timer.cancel()
    }

    /// Every second: the log's head, how old its oldest entry not applied here is, and this node's
    /// position recorded in the database (the log's trimming waits for the slowest node).
    private func report() async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .seconds(1))
                let applied = try self.engine.fleetPosition()
                let (head, oldest) = try await withinDeadline(.seconds(5)) { try await self.log.lag(after: applied) }
                try await withinDeadline(.seconds(5)) { try await self.log.recordApplied(applied) }
                self.state.withLock { state in
                    state.head = max(state.head, head)
                    state.oldestUnapplied = oldest
                    state.reachable = true
                }
            } catch is CancellationError {
                return
            } catch {
                self.state.withLock { $0.reachable = false }
            }
            self.gauges.record(self.status())
        }
    }
}
