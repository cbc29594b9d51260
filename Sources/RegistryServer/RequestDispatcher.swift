import Logging
import NIOCore
import NIOPosix
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Synchronization

/// Where a request's reply goes: a connection's (made once per connection), or a closure's.
public protocol ReplyReceiver: AnyObject, Sendable {
    /// The reply to the request started under `sequence`.
    func received(_ reply: RequestDispatcher.Reply, for sequence: UInt64)
}

/// A ``ReplyReceiver`` that calls a closure (one-off callers: tests, fuzzing, ``RequestDispatcher/respond(to:from:)``).
public final class ReplyClosure: ReplyReceiver {
    private let body: @Sendable (RequestDispatcher.Reply, UInt64) -> Void

    public init(_ body: @escaping @Sendable (RequestDispatcher.Reply, UInt64) -> Void) {
        self.body = body
    }

    public func received(_ reply: RequestDispatcher.Reply, for sequence: UInt64) {
        self.body(reply, sequence)
    }
}

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

    /// Whether authentications and registrations of the usual shape are read by
    /// ``AuthenticateDecoding`` and ``RegisterDecoding`` rather than by SwiftProtobuf (false only in
    /// the test that compares the two).
    let readsRequestsByHand: Bool

    /// Fleet mode: the node every write of the registry's contents goes through (nil: standalone).
    let fleet: FleetNode?

    public convenience init(
        engine: Engine, logger: Logger, policy: AccessPolicy, metrics: ServerMetrics = ServerMetrics(), fleet: FleetNode? = nil
    ) {
        self.init(engine: engine, logger: logger, policy: policy, metrics: metrics, readsRequestsByHand: true, fleet: fleet)
    }

    init(
        engine: Engine, logger: Logger, policy: AccessPolicy, metrics: ServerMetrics = ServerMetrics(), readsRequestsByHand: Bool,
        fleet: FleetNode? = nil
    ) {
        self.readsRequestsByHand = readsRequestsByHand
        self.fleet = fleet
        self.engine = engine
        self.logger = logger
        self.policy = Mutex(policy)
        self.refusals = RefusalSummary(logger: logger, engine: engine)
        self.metrics = metrics
        self.operations = OperationTable(metrics: metrics)
    }

    /// What every kind of request needs before it is decoded, by its field number in `Request`.
    let operations: OperationTable

    /// What operations run with.
    var context: OperationContext {
        OperationContext(engine: self.engine, logger: self.logger, counters: self.counters, metrics: self.metrics, fleet: self.fleet)
    }

    /// Whether `peer` (nil: no credentials, no right) holds `right` for an operation of `scope`.
    func allows(_ peer: Peer?, _ right: OperationClass, _ scope: OperationScope) -> Bool {
        guard let peer else { return false }
        return self.policy.withLock { policy in
            switch scope {
            case .permittedGalleries: policy.allowsSomewhere(peer, right)
            case .gallery, .store: policy.allows(peer, right, gallery: scope.galleryName)
            }
        }
    }

    /// What to send back, and whether to close the connection after it.
    public struct Reply: Sendable, Equatable {
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

    /// Answers one frame's bytes from `peer` (nil: its credentials could not be read, so it has no
    /// rights): ``start(_:from:draining:on:replyTo:sequence:)``, awaited.
    public func respond(to frame: ByteBuffer, from peer: Peer?) async -> Reply {
        await withCheckedContinuation { continuation in
            self.start(frame, from: peer, on: nil, replyTo: ReplyClosure { reply, _ in continuation.resume(returning: reply) }, sequence: 0)
        }
    }

    /// Runs one request frame and answers it: decodes it, applies the checks every request passes
    /// (version, rights, template shapes), then starts its operation
    /// (``RegistryOperation/start(in:completion:)``). `receiver` gets the reply once, under
    /// `sequence`, on `eventLoop` (nil: on whatever thread finishes the request). It gets it before
    /// this returns when nothing has to wait (a refusal, an authentication that writes nothing): most
    /// of the traffic is answered without a task or a thread switch. (A receiver object rather than a
    /// closure: a connection's is made once, where a closure would be allocated per request.)
    /// - Parameter draining: the daemon is stopping; the request is refused with `SHUTTING_DOWN` and
    ///   not carried out (it was read, but not started).
    public func start(
        _ frame: ByteBuffer, from peer: Peer?, draining: Bool = false, on eventLoop: (any EventLoop)?, replyTo receiver: any ReplyReceiver,
        sequence: UInt64
    ) {
        // The id is 0 until the frame is read (a frame without one is answered with 0).
        var call = Call(
            dispatcher: self, id: 0, peer: peer, start: ContinuousClock.now, draining: draining, eventLoop: eventLoop, receiver: receiver,
            sequence: sequence, frame: frame)
        // Bounds before anything else: no field longer, no count larger than the protocol allows, before
        // the request is decoded, checked for rights, audited or logged (RequestBounds).
        let envelope: RequestBounds.Envelope
        switch RequestBounds.check(frame) {
        case .success(let read): envelope = read
        case .failure(let violation):
            self.counters.requestsServed.add(1, ordering: .relaxed)
            call.id = violation.envelope.id
            return call.reply(
                self.refuse(violation.envelope, call, with: RegistryError(.malformedRequest, "the request breaks a bound: \(violation.reason)")))
        }
        call.id = envelope.id
        // Rights before cost: a peer without the right is refused from the wire bytes read so far,
        // and its request is never decoded.
        if let kind = envelope.operation.flatMap({ self.operations[$0] }), let right = kind.right {
            guard self.allows(peer, right, kind.scope(envelope)) else {
                self.counters.requestsServed.add(1, ordering: .relaxed)
                return call.reply(self.refuse(envelope, call, with: self.permissionDenied(peer, right, kind.scope(envelope))))
            }
            call.rightChecked = true
        }
        // Most traffic: read without the generic decoder when it has the usual shape.
        if self.readsRequestsByHand {
            if let (id, authenticate) = AuthenticateDecoding.decode(frame) {
                self.counters.requestsServed.add(1, ordering: .relaxed)
                call.id = id
                return call.visit(Authenticate(authenticate))
            }
            if let (id, register) = RegisterDecoding.decode(frame) {
                self.counters.requestsServed.add(1, ordering: .relaxed)
                call.id = id
                return call.visit(Register(register))
            }
        }
        let request: Registry_V1_Request
        do {
            request = try Registry_V1_Request(serializedBytes: frame.readableBytesSpan)
        } catch {
            self.metrics.operation(Self.undecodedOperation).refused(code: .malformedRequest, since: call.start)
            return call.reply(self.reply(id: 0, error: RegistryError(.malformedRequest, "the frame is not a valid registry.v1.Request")))
        }
        self.counters.requestsServed.add(1, ordering: .relaxed)
        guard let operation = request.operation else {
            self.metrics.operation(Self.undecodedOperation).refused(code: .malformedRequest, since: call.start)
            return call.reply(self.reply(id: request.id, error: RegistryError(.malformedRequest, "the request carries no operation")))
        }
        if case .hello(let hello) = operation {
            // Who connects, for debugging a deployment; the name is the client's free text, so it is
            // cut short and kept on one line.
            let name = Names.loggable(hello.clientName, maximum: 100)
            self.logger.debug(
                "hello",
                metadata: [
                    "client": "\(name)", "pid": "\(peer.map { String($0.pid) } ?? "?")", "uid": "\(peer.map { String($0.uid) } ?? "?")",
                    "protocol": "\(hello.protocolMajor).\(hello.protocolMinor)",
                ])
        }
        if case .hello(let hello) = operation, hello.protocolMajor != ProtocolVersion.major {
            self.metrics.operation(Registry_V1_Hello.name).refused(code: .unsupportedVersion, since: call.start)
            var reply = self.reply(
                id: request.id,
                error: RegistryError(
                    .unsupportedVersion,
                    "protocol version \(hello.protocolMajor) is not supported; this daemon speaks \(ProtocolVersion.major).\(ProtocolVersion.minor)"))
            reply.closeConnection = true
            return call.reply(reply)
        }
        call.id = request.id
        operation.accept(call)
    }

    /// The frame to refuse when its length prefix announces more than the maximum; the connection
    /// closes after it.
    func refusal(_ error: FrameTooLargeError) -> Reply {
        var reply = self.reply(id: 0, error: RegistryError(.frameTooLarge, error.description))
        reply.closeConnection = true
        return reply
    }

    /// One request on its way: ``start(_:from:draining:on:replyTo:sequence:)`` specialised for each kind
    /// of request (handed to ``Registry_V1_Request/OneOf_Operation/accept(_:)``, where opening an
    /// `any RegistryOperation` would look up generic metadata and call unspecialised code).
    struct Call: OperationVisitor {
        let dispatcher: RequestDispatcher
        var id: UInt64
        let peer: Peer?
        let start: ContinuousClock.Instant
        let draining: Bool
        let eventLoop: (any EventLoop)?
        let receiver: any ReplyReceiver
        let sequence: UInt64
        /// The request as read (fleet mode appends it to the log as it came).
        let frame: ByteBuffer
        /// The peer's right was checked before the request was decoded.
        var rightChecked = false

        func reply(_ reply: Reply) {
            self.receiver.received(reply, for: self.sequence)
        }

        func visit<Operation: RegistryOperation>(_ operation: Operation) {
            self.dispatcher.start(operation, self)
        }
    }

    /// The operation label of frames that decode to no operation.
    static let undecodedOperation = "unknown"

    /// The checks, then the operation started; its reply made on the call's event loop.
    private func start<Operation: RegistryOperation>(_ operation: Operation, _ call: Call) {
        // Checked here only for a kind of request the wire bounds do not know (see OperationTable).
        if let right = Operation.right, !call.rightChecked, !self.allows(call.peer, right, operation.scope) {
            return call.reply(self.refuse(operation, call, with: self.permissionDenied(call.peer, right, operation.scope)))
        }
        do {
            try Self.checkTemplates(operation.templates)
        } catch {
            return call.reply(self.refuse(operation, call, with: error))
        }
        if call.draining {
            return call.reply(
                self.refuse(operation, call, with: RegistryError(.shuttingDown, "the daemon is shutting down; the request was not carried out")))
        }
        var context = self.context
        // Who asked, and the policy, only for an operation that shows what the peer may see: copying
        // them for every request costs the common ones for nothing.
        if case .permittedGalleries = operation.scope {
            context.peer = call.peer
            context.policy = self.policy.withLock { $0 }
        }
        let running = Running(dispatcher: self, operation: operation, call: call)
        if let fleet = self.fleet, Operation.isReplicated, !Engine.unorderedFleetWritesForTesting {
            return fleet.submit(operation, frame: call.frame, context: context, completion: running)
        }
        operation.start(in: context, completion: running)
    }

    /// A started operation's completion: a value, so that an answer given at once allocates
    /// nothing (a closure would, for its captures; measured per authentication).
    struct Running<Operation: RegistryOperation>: Completion {
        let dispatcher: RequestDispatcher
        let operation: Operation
        let call: Call

        func complete(_ result: Swift.Result<Operation.Result, any Error>) {
            // The reply is made on the event loop: the writer thread, which finishes registrations,
            // goes on to its next batch sooner. (No closure when it is there already: most replies.)
            if let eventLoop = self.call.eventLoop, !eventLoop.inEventLoop {
                eventLoop.execute { self.reply(result) }
            } else {
                self.reply(result)
            }
        }

        private func reply(_ result: Swift.Result<Operation.Result, any Error>) {
            switch result {
            case .success(let value): self.call.reply(self.dispatcher.answer(self.operation, self.call, value))
            case .failure(let error): self.call.reply(self.dispatcher.refuse(self.operation, self.call, with: error))
            }
        }
    }

    /// The reply carrying an operation's result, audited and counted.
    fileprivate func answer<Operation: RegistryOperation>(_ operation: Operation, _ call: Call, _ result: Operation.Result) -> Reply {
        let (id, peer, start) = (call.id, call.peer, call.start)
        let outcome = operation.audit(result)
        if Operation.isAudited {
            self.audit(
                Operation.name, gallery: operation.scope.galleryName, identifiers: outcome.identifiers, outcome: outcome.outcome,
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
    fileprivate func refuse<Operation: RegistryOperation>(_ operation: Operation, _ call: Call, with failure: any Error) -> Reply {
        let error: RegistryError
        if let refusal = failure as? RegistryError {
            error = refusal
        } else {
            self.logger.warning("request failed", metadata: ["operation": "\(Operation.name)", "error": "\(failure)"])
            error = RegistryError(.internal, "\(failure)")
        }
        return self.refuse(
            Operation.name, audited: Operation.isAudited, metrics: Operation.metrics(in: self.metrics), gallery: operation.scope.galleryName,
            identifiers: operation.auditedIdentifiers, right: Operation.right, call, with: error)
    }

    /// The reply refusing a request refused before it was decoded: a bound broken, or a right missing.
    private func refuse(_ envelope: RequestBounds.Envelope, _ call: Call, with error: RegistryError) -> Reply {
        guard let kind = envelope.operation.flatMap({ self.operations[$0] }) else {
            // Not a request of a known kind: answered and counted, not audited (as a frame that
            // does not decode), and summarised in the log.
            self.refusals.record(peer: call.peer, operation: Self.undecodedOperation, code: error.code)
            self.metrics.operation(Self.undecodedOperation).refused(code: error.code, since: call.start)
            return self.reply(id: call.id, error: error)
        }
        return self.refuse(
            kind.name, audited: kind.right != nil, metrics: kind.metrics, gallery: kind.scope(envelope).galleryName,
            identifiers: envelope.identifier.isEmpty ? [] : [envelope.identifier], right: kind.right, call, with: error)
    }

    /// A refusal: summarised in the log and, but for decisions about a person, in the audit trail
    /// (``RefusalSummary``); counted; answered.
    private func refuse(
        _ name: String, audited: Bool, metrics: OperationMetrics, gallery: String, identifiers: [String], right: OperationClass?,
        _ call: Call, with error: RegistryError
    ) -> Reply {
        let first = self.refusals.record(
            peer: call.peer, operation: name, code: error.code, gallery: gallery, right: error.code == .permissionDenied ? right : nil,
            audited: audited)
        // A failure inside the daemon (a damaged store row, a failing disk) is the operator's to act
        // on: its message, which names templates by id and never holds their data, is logged, as
        // often as the summary says a refusal (the first per peer, operation and code a minute).
        if first && error.code == .internal {
            self.logger.error(
                "request failed inside the daemon", metadata: ["operation": "\(name)", "error": "\(Names.loggable(error.message, maximum: 1024))"])
        }
        if audited && (first || RefusalSummary.isAuditedEachTime(error.code)) {
            self.audit(
                name, gallery: gallery, identifiers: identifiers, outcome: .refused, score: nil, errorCode: error.code.rawValue, peer: call.peer)
        }
        metrics.refused(code: error.code, since: call.start)
        return self.reply(id: call.id, error: error)
    }

    /// `PERMISSION_DENIED`: names the peer's uid, the missing right and where, nothing about who is enrolled.
    private func permissionDenied(_ peer: Peer?, _ right: OperationClass, _ scope: OperationScope) -> RegistryError {
        let who = peer.map { "uid \($0.uid)" } ?? "a peer without credentials"
        let place =
            switch scope {
            case .gallery: "in gallery '\(Names.cut(scope.galleryName, toBytes: 64))'"
            case .store: "on every gallery"
            case .permittedGalleries: "in any gallery"
            }
        return RegistryError(.permissionDenied, "\(who) lacks the '\(right.rawValue)' right \(place)")
    }

    /// Adds the request to the audit trail: who, what, which identifiers, the outcome. Never templates.
    private func audit(
        _ operation: String, gallery: String, identifiers: [String], outcome: AuditOutcome, score: Float?, errorCode: String?, peer: Peer?
    ) {
        self.engine.recordAudit(
            time: AuditEntry.now(), uid: peer?.uid ?? .max, pid: peer?.pid ?? -1, operation: operation, gallery: gallery,
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
