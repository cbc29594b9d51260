import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol

/// Register, however its request was read: by ``RegisterDecoding`` straight from the wire (the usual
/// shape) or by SwiftProtobuf (any other shape: capture metadata, depth frames, landmarks). Either
/// way it is this one operation on the engine's types, as ``Authenticate`` is; its reply is written
/// by hand (``RegisterEncoding``) when it has the common shape.
struct Register: RegistryOperation {
    let request: WireRegistration
    /// The templates as SwiftProtobuf read them, for the check that none carries both a vector and
    /// landmarks (the hand decoder reads vectors only, so it has none to check).
    let templates: [Registry_V1_Template]

    init(_ request: WireRegistration) {
        self.request = request
        self.templates = []
    }

    init(_ message: Registry_V1_RegisterRequest) {
        self.request = WireRegistration(
            gallery: message.gallery, identifier: message.identifier, face: message.hasFace ? Face(message.face) : nil,
            force: message.force)
        self.templates = message.face.templates
    }

    static let name = "register"
    static let right: OperationClass? = .enrol
    static let isReplicated = true
    static let isPipelinedInTheFleet = true
    /// The engine's result, converted for the wire when the reply is made (on the event loop), not
    /// in the completion (on the writer thread, whose time every registration shares).
    static func response(_ result: Registration) -> Registry_V1_Response.OneOf_Result { .register(Registry_V1_RegisterResult(result)) }
    static func framedReply(id: UInt64, _ result: Registration) -> ByteBuffer? { RegisterEncoding.framedReply(id: id, result) }

    var scope: OperationScope { .gallery(self.request.gallery) }

    var auditedIdentifiers: [String] { [self.request.identifier] }

    func start<Done: Completion<Registration>>(in context: OperationContext, completion: Done) {
        context.engine.register(
            gallery: RequestDispatcher.gallery(self.request.gallery), identifier: self.request.identifier,
            // No face is a face without templates (as the message reads it), which the engine refuses.
            face: self.request.face ?? Face(templates: []), force: self.request.force, completion: completion)
    }
}
