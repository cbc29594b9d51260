import Logging
import NIOCore
import NIOPosix
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Synchronization

/// Turns one request frame into one response frame: decodes the request, runs the operation on the
/// engine, encodes the result or the error. Never throws: every failure becomes an error response.
///
/// Template values never reach the log: requests are logged by operation, gallery and outcome only.
public final class RequestDispatcher: Sendable {
    /// The daemon's version, reported by hello and stats.
    public static let serverVersion = RegistryVersion.current

    let engine: Engine
    let logger: Logger
    /// Who may do what; replaced on SIGHUP.
    let policy: Mutex<AccessPolicy>
    let counters = ServerCounters()
    /// Refusals for the log, summarised (`PeriodicReportService` flushes them).
    let refusals: RefusalSummary
    /// Requests counted by operation, outcome, error code and gallery, and timed.
    let metrics: ServerMetrics

    public init(engine: Engine, logger: Logger, policy: AccessPolicy, metrics: ServerMetrics = ServerMetrics()) {
        self.engine = engine
        self.logger = logger
        self.policy = Mutex(policy)
        self.refusals = RefusalSummary(logger: logger)
        self.metrics = metrics
    }

    /// What operations run with.
    var context: OperationContext {
        OperationContext(engine: self.engine, logger: self.logger, counters: self.counters, metrics: self.metrics)
    }

    /// What to send back, and whether to close the connection after it.
    public struct Reply: Sendable {
        /// The reply as written: its length prefix, then the response.
        public var framed: ByteBuffer
        public var closeConnection: Bool

        /// The response's bytes, without the length prefix.
        public var frame: ByteBuffer {
            self.framed.getSlice(at: self.framed.readerIndex + 4, length: max(0, self.framed.readableBytes - 4)) ?? ByteBuffer()
        }
    }

    /// Replaces the access policy (SIGHUP).
    public func update(policy: AccessPolicy) {
        self.policy.withLock { $0 = policy }
    }

    /// A decoded request that passed the checks and still has to run (see ``begin(_:from:)``).
    public struct Pending: Sendable {
        let id: UInt64
        let operation: any RegistryOperation
        /// When its frame was decoded, for the latency histogram.
        let start: ContinuousClock.Instant

        /// Whether ``RequestDispatcher/finish(_:from:on:completion:)`` runs it (without a task).
        var startsWithoutTask: Bool { type(of: self.operation).startsWithoutTask }
    }

    /// The outcome of ``begin(_:from:)``: a reply already, or an operation to run with ``finish(_:from:)``.
    public enum Start: Sendable {
        case reply(Reply)
        case pending(Pending)
    }

    /// Answers one frame's bytes from `peer` (nil: its credentials could not be read, so it has no rights).
    public func respond(to frame: ByteBuffer, from peer: Peer?) async -> Reply {
        switch self.begin(frame, from: peer) {
        case .reply(let reply): return reply
        case .pending(let pending): return await self.finish(pending, from: peer)
        }
    }

    /// Decodes a frame and applies the checks every request passes (version, rights, template
    /// shapes); answers at once what needs no waiting: refusals, and operations that can answer
    /// without a task switch (authentications that write nothing, the common case).
    public func begin(_ frame: ByteBuffer, from peer: Peer?) -> Start {
        let start = ContinuousClock.now
        // Most traffic: read without the generic decoder when it has the usual shape.
        if let (id, authenticate) = AuthenticateDecoding.decode(frame) {
            self.counters.requestsServed.add(1, ordering: .relaxed)
            return self.begin(WireAuthenticate(authenticate), id: id, from: peer, start: start)
        }
        let request: Registry_V1_Request
        do {
            request = try Registry_V1_Request(serializedBytes: frame.readableBytesSpan)
        } catch {
            self.metrics.operation(Self.undecodedOperation).refused(code: .malformedRequest, since: start)
            return .reply(self.reply(id: 0, error: RegistryError(.malformedRequest, "the frame is not a valid registry.v1.Request")))
        }
        self.counters.requestsServed.add(1, ordering: .relaxed)
        guard let operation = request.operation else {
            self.metrics.operation(Self.undecodedOperation).refused(code: .malformedRequest, since: start)
            return .reply(self.reply(id: request.id, error: RegistryError(.malformedRequest, "the request carries no operation")))
        }
        if case .hello(let hello) = operation {
            // Who connects, for debugging a deployment; the name is the client's free text, so it is
            // cut short and kept on one line.
            let name = String(
                hello.clientName.unicodeScalars.prefix(100).map { $0.properties.isPatternWhitespace || $0.value < 0x20 ? " " : Character($0) })
            self.logger.debug(
                "hello",
                metadata: [
                    "client": "\(name)", "pid": "\(peer.map { String($0.pid) } ?? "?")", "uid": "\(peer.map { String($0.uid) } ?? "?")",
                    "protocol": "\(hello.protocolMajor).\(hello.protocolMinor)",
                ])
        }
        if case .hello(let hello) = operation, hello.protocolMajor != ProtocolVersion.major {
            self.metrics.operation(Registry_V1_Hello.name).refused(code: .unsupportedVersion, since: start)
            var reply = self.reply(
                id: request.id,
                error: RegistryError(
                    .unsupportedVersion,
                    "protocol version \(hello.protocolMajor) is not supported; this daemon speaks \(ProtocolVersion.major).\(ProtocolVersion.minor)"))
            reply.closeConnection = true
            return .reply(reply)
        }
        return operation.accept(Begin(dispatcher: self, id: request.id, peer: peer, start: start))
    }

    /// ``begin(_:id:from:start:)`` specialised for each kind of request.
    private struct Begin: OperationVisitor {
        let dispatcher: RequestDispatcher
        let id: UInt64
        let peer: Peer?
        let start: ContinuousClock.Instant

        func visit<Operation: RegistryOperation>(_ operation: Operation) -> Start {
            self.dispatcher.begin(operation, id: self.id, from: self.peer, start: self.start)
        }
    }

    /// The operation label of frames that decode to no operation.
    static let undecodedOperation = "unknown"

    /// The checks and the immediate answer of one decoded operation (generic, so that its result
    /// type is known).
    private func begin<Operation: RegistryOperation>(_ operation: Operation, id: UInt64, from peer: Peer?, start: ContinuousClock.Instant) -> Start {
        if let right = Operation.right {
            let gallery = operation.scope.galleryName
            let allowed = peer.map { peer in self.policy.withLock { $0.allows(peer, right, gallery: gallery) } } ?? false
            guard allowed else {
                // Names the missing right only: nothing about who is enrolled.
                let who = peer.map { "uid \($0.uid)" } ?? "a peer without credentials"
                let scope = gallery.isEmpty ? "on every gallery" : "in gallery '\(gallery)'"
                self.logger.notice(
                    "permission denied",
                    metadata: [
                        "uid": "\(peer.map { String($0.uid) } ?? "?")", "pid": "\(peer.map { String($0.pid) } ?? "?")",
                        "operation": "\(Operation.name)", "right": "\(right.rawValue)", "gallery": "\(gallery)",
                    ])
                return .reply(
                    self.refuse(
                        operation, id: id, with: RegistryError(.permissionDenied, "\(who) lacks the '\(right.rawValue)' right \(scope)"),
                        from: peer, start: start))
            }
        }
        do {
            try Self.checkTemplates(operation.templates)
            if let result = try operation.performImmediately(in: self.context) {
                return .reply(self.answer(operation, id: id, result, peer: peer, start: start))
            }
        } catch {
            return .reply(self.refuse(operation, id: id, with: error, from: peer, start: start))
        }
        return .pending(Pending(id: id, operation: operation, start: start))
    }

    /// Answers a pending request with an error without running it (the daemon is draining).
    public func refuse(_ pending: Pending, with error: RegistryError, from peer: Peer?) -> Reply {
        self.refuse(pending.operation, id: pending.id, with: error, from: peer, start: pending.start)
    }

    /// Runs a pending operation and answers it.
    public func finish(_ pending: Pending, from peer: Peer?) async -> Reply {
        await self.finish(pending.operation, id: pending.id, from: peer, start: pending.start)
    }

    /// Runs a pending operation that ``Pending/startsWithoutTask`` (registrations) without a task:
    /// `completion` runs once with the reply, on `eventLoop` (at once, before this returns, when it is
    /// refused before it is queued and this is called on `eventLoop`). Others: ``finish(_:from:)``.
    public func finish(_ pending: Pending, from peer: Peer?, on eventLoop: any EventLoop, completion: @escaping @Sendable (Reply) -> Void) {
        self.start(pending.operation, id: pending.id, from: peer, start: pending.start, on: eventLoop, completion: completion)
    }

    private func start<Operation: RegistryOperation>(
        _ operation: Operation, id: UInt64, from peer: Peer?, start: ContinuousClock.Instant, on eventLoop: any EventLoop,
        completion: @escaping @Sendable (Reply) -> Void
    ) {
        operation.start(in: self.context) { result in
            let reply = {
                switch result {
                case .success(let value): completion(self.answer(operation, id: id, value, peer: peer, start: start))
                case .failure(let error): completion(self.refuse(operation, id: id, with: error, from: peer, start: start))
                }
            }
            // The reply is made on the event loop: the writer thread, which usually runs this, goes on
            // to its next batch sooner.
            if eventLoop.inEventLoop { reply() } else { eventLoop.execute(reply) }
        }
    }

    private func finish<Operation: RegistryOperation>(
        _ operation: Operation, id: UInt64, from peer: Peer?, start: ContinuousClock.Instant
    ) async -> Reply {
        do {
            return self.answer(operation, id: id, try await operation.perform(in: self.context), peer: peer, start: start)
        } catch {
            return self.refuse(operation, id: id, with: error, from: peer, start: start)
        }
    }

    /// The reply carrying an operation's result, audited and counted.
    private func answer<Operation: RegistryOperation>(
        _ operation: Operation, id: UInt64, _ result: Operation.Result, peer: Peer?, start: ContinuousClock.Instant
    ) -> Reply {
        let outcome = operation.audit(result)
        if Operation.isAudited {
            self.audit(
                Operation.self, gallery: operation.scope.galleryName, identifiers: outcome.identifiers, outcome: outcome.outcome,
                score: outcome.score, errorCode: nil, peer: peer)
        }
        let frame =
            Operation.framedReply(id: id, result)
            ?? {
                var response = Registry_V1_Response()
                response.id = id
                response.result = Operation.response(result)
                return Self.encode(response)
            }()
        let metrics = Operation.metrics(in: self.metrics)
        if case .gallery = operation.scope {
            // Answered, so the gallery exists (or existed, for delete_gallery).
            metrics.answered(inGallery: operation.scope.galleryName, labels: self.metrics)
        }
        metrics.answered(outcome: outcome.outcome, since: start)
        return Reply(framed: frame, closeConnection: false)
    }

    /// The reply carrying an operation's refusal or failure, logged by code (never with templates) and audited.
    private func refuse<Operation: RegistryOperation>(
        _ operation: Operation, id: UInt64, with failure: any Error, from peer: Peer?, start: ContinuousClock.Instant
    ) -> Reply {
        let error: RegistryError
        if let refusal = failure as? RegistryError {
            if refusal.code != .permissionDenied {  // logged with the peer where it is decided
                self.refusals.record(operation: Operation.name, code: refusal.code.rawValue)
            }
            error = refusal
        } else {
            self.logger.warning("request failed", metadata: ["operation": "\(Operation.name)", "error": "\(failure)"])
            error = RegistryError(.internal, "\(failure)")
        }
        if Operation.isAudited {
            self.audit(
                Operation.self, gallery: operation.scope.galleryName, identifiers: operation.auditedIdentifiers, outcome: "refused",
                score: nil, errorCode: error.code.rawValue, peer: peer)
        }
        let reply = self.reply(id: id, error: error)
        Operation.metrics(in: self.metrics).refused(code: error.code, since: start)
        return reply
    }

    /// Adds the request to the audit trail: who, what, which identifiers, the outcome. Never templates.
    private func audit<Operation: RegistryOperation>(
        _: Operation.Type, gallery: String, identifiers: [String], outcome: String, score: Float?, errorCode: String?, peer: Peer?
    ) {
        self.engine.recordAudit(
            time: AuditEntry.now(), uid: peer?.uid ?? .max, pid: peer?.pid ?? -1, operation: Operation.name, gallery: gallery,
            identifiers: identifiers, outcome: outcome, score: score, errorCode: errorCode)
    }

    /// A response carrying only an error.
    public func reply(id: UInt64, error: RegistryError) -> Reply {
        var response = Registry_V1_Response()
        response.id = id
        response.result = .error(Registry_V1_Error(error))
        return Reply(framed: Self.encode(response), closeConnection: false)
    }

    /// The whole frame of a response, length prefix included.
    static func encode(_ response: Registry_V1_Response) -> ByteBuffer {
        // Encoding a message built from valid values cannot fail; fall back to an empty frame (a
        // zero length) if it ever does.
        (try? ByteBuffer(frameOf: response)) ?? ByteBuffer(integer: UInt32(0))
    }

    /// A template is a vector or landmarks, never both: refuse instead of silently dropping one.
    static func checkTemplates(_ templates: [Registry_V1_Template]) throws(RegistryError) {
        if let mixed = templates.first(where: { !$0.vector.isEmpty && !$0.landmarks.isEmpty }) {
            throw .malformedRequest("the template for algorithm \(mixed.algorithm) carries both a vector and landmarks")
        }
    }

    /// An empty gallery field means the default gallery.
    static func gallery(_ name: String) -> String {
        name.isEmpty ? GalleryConfiguration.defaultName : name
    }
}
