import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol

/// Authenticate, however its request was read: by ``AuthenticateDecoding`` straight from the wire
/// (the usual shape, most of the traffic), or by SwiftProtobuf (any other shape). Either way it is
/// this one operation on the engine's types (the model `Face`), so a protobuf message is never
/// built only to be converted. Most authentications write nothing and complete at once, on the
/// event loop; one that auto-enrols completes from the writer, carrying on from the same decision.
/// Its result stays the engine's `Authentication` until the reply, which is written by hand
/// (``AuthenticateEncoding``) when it has the common shape.
struct Authenticate: RegistryOperation {
    let request: WireAuthentication
    /// The templates as SwiftProtobuf read them, for the check that none carries both a vector and
    /// landmarks (the hand decoder reads vectors only, so it has none to check).
    let templates: [Registry_V1_Template]

    init(_ request: WireAuthentication) {
        self.request = request
        self.templates = []
    }

    init(_ message: Registry_V1_AuthenticateRequest) {
        self.request = WireAuthentication(
            gallery: message.gallery, identifier: message.identifier, face: message.hasFace ? Face(message.face) : nil,
            autoEnrol: message.hasAutoEnrol ? message.autoEnrol : nil)
        self.templates = message.face.templates
    }

    static let name = "authenticate"
    static let decidesMatches = true
    static let right: OperationClass? = .identify
    static func response(_ result: Authentication) -> Registry_V1_Response.OneOf_Result {
        .authenticate(Registry_V1_AuthenticateResult(result))
    }
    static func framedReply(id: UInt64, _ result: Authentication) -> ByteBuffer? {
        AuthenticateEncoding.framedReply(id: id, result)
    }
    static func metrics(in metrics: ServerMetrics) -> OperationMetrics { metrics.authentications }

    var scope: OperationScope { .gallery(self.request.gallery) }
    var auditedIdentifiers: [String] { [self.request.identifier] }

    func start<Done: Completion<Authentication>>(in context: OperationContext, completion: Done) {
        context.engine.authenticate(
            gallery: RequestDispatcher.gallery(self.request.gallery), identifier: self.request.identifier,
            // No face is a face without templates (as the message reads it), which the engine refuses.
            face: self.request.face ?? Face(templates: []),
            autoEnrol: self.request.autoEnrol ?? true, completion: completion)
    }

    func audit(_ result: Authentication) -> AuditedResult {
        AuditedResult(identifiers: [self.request.identifier], outcome: result.authenticated ? .match : .noMatch, score: result.score)
    }
}
