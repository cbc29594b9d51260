import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_RegisterRequest: RegistryOperation {
    static let name = "register"
    static let right: OperationClass? = .enrol
    static let isReplicated = true
    static let isPipelinedInTheFleet = true
    /// The engine's result, converted for the wire when the reply is made (on the event loop), not
    /// in the completion (on the writer thread, whose time every registration shares).
    static func response(_ result: Registration) -> Registry_V1_Response.OneOf_Result { .register(Registry_V1_RegisterResult(result)) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }
    var templates: [Registry_V1_Template] { self.face.templates }

    func start<Done: Completion<Registration>>(in context: OperationContext, completion: Done) {
        context.engine.register(
            gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier, face: Face(self.face), force: self.force,
            completion: completion)
    }
}
