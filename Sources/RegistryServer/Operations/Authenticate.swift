import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_AuthenticateRequest: RegistryOperation {
    static let name = "authenticate"
    static let decidesMatches = true
    static let right: OperationClass? = .identify
    static func response(_ result: Registry_V1_AuthenticateResult) -> Registry_V1_Response.OneOf_Result { .authenticate(result) }

    static func metrics(in metrics: ServerMetrics) -> OperationMetrics { metrics.authentications }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }
    var templates: [Registry_V1_Template] { self.face.templates }

    /// Most authentications write nothing: answered on the event loop, without a task switch.
    func performImmediately(in context: OperationContext) throws -> Registry_V1_AuthenticateResult? {
        try Self.authenticateImmediately(
            in: context, gallery: self.gallery, identifier: self.identifier, face: Face(self.face), autoEnrol: self.autoEnrolOrDefault
        ).map(Registry_V1_AuthenticateResult.init)
    }

    func perform(in context: OperationContext) async throws -> Registry_V1_AuthenticateResult {
        Registry_V1_AuthenticateResult(
            try await Self.authenticate(
                in: context, gallery: self.gallery, identifier: self.identifier, face: Face(self.face), autoEnrol: self.autoEnrolOrDefault))
    }

    func audit(_ result: Registry_V1_AuthenticateResult) -> AuditOutcome {
        Self.audit(authenticated: result.authenticated, score: result.score, identifier: self.identifier)
    }

    private var autoEnrolOrDefault: Bool { self.hasAutoEnrol ? self.autoEnrol : true }

    // Shared with ``WireAuthenticate``: the operation, whichever way its request was read.

    static func authenticateImmediately(
        in context: OperationContext, gallery: String, identifier: String, face: Face, autoEnrol: Bool
    ) throws -> Authentication? {
        try context.engine.authenticateImmediately(
            gallery: RequestDispatcher.gallery(gallery), identifier: identifier, face: face, autoEnrol: autoEnrol)
    }

    static func authenticate(
        in context: OperationContext, gallery: String, identifier: String, face: Face, autoEnrol: Bool
    ) async throws -> Authentication {
        try await context.engine.authenticate(
            gallery: RequestDispatcher.gallery(gallery), identifier: identifier, face: face, autoEnrol: autoEnrol)
    }

    static func audit(authenticated: Bool, score: Float, identifier: String) -> AuditOutcome {
        AuditOutcome(identifiers: [identifier], outcome: authenticated ? "match" : "no-match", score: score)
    }
}

/// An authentication read by ``AuthenticateDecoding`` (the usual shape, most of the traffic): the
/// same operation as ``Registry_V1_AuthenticateRequest``, on the request as the engine's types, so
/// that it is never built as a protobuf message only to be converted. Its templates are vectors (the
/// decoder reads nothing else), so the mixed-template check has nothing to find. Its result stays the
/// engine's `Authentication` until the reply, which is written by hand when it has the common shape.
struct WireAuthenticate: RegistryOperation {
    typealias Message = Registry_V1_AuthenticateRequest
    let request: WireAuthentication

    init(_ request: WireAuthentication) {
        self.request = request
    }

    static var name: String { Message.name }
    static var decidesMatches: Bool { Message.decidesMatches }
    static var right: OperationClass? { Message.right }
    static func response(_ result: Authentication) -> Registry_V1_Response.OneOf_Result {
        .authenticate(Registry_V1_AuthenticateResult(result))
    }
    static func framedReply(id: UInt64, _ result: Authentication) -> ByteBuffer? {
        AuthenticateEncoding.framedReply(id: id, result)
    }
    static func metrics(in metrics: ServerMetrics) -> OperationMetrics { metrics.authentications }

    var scope: OperationScope { .gallery(self.request.gallery) }
    var auditedIdentifiers: [String] { [self.request.identifier] }

    func performImmediately(in context: OperationContext) throws -> Authentication? {
        try Message.authenticateImmediately(
            in: context, gallery: self.request.gallery, identifier: self.request.identifier, face: self.face, autoEnrol: self.autoEnrol)
    }

    func perform(in context: OperationContext) async throws -> Authentication {
        try await Message.authenticate(
            in: context, gallery: self.request.gallery, identifier: self.request.identifier, face: self.face, autoEnrol: self.autoEnrol)
    }

    func audit(_ result: Authentication) -> AuditOutcome {
        Message.audit(authenticated: result.authenticated, score: result.score, identifier: self.request.identifier)
    }

    /// No face is a face without templates (as the message reads it), which the engine refuses.
    private var face: Face { self.request.face ?? Face(templates: []) }
    private var autoEnrol: Bool { self.request.autoEnrol ?? true }
}
