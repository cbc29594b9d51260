import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_RegisterRequest: RegistryOperation {
    static let name = "register"
    static let right: OperationClass? = .enrol
    static func response(_ result: Registry_V1_RegisterResult) -> Registry_V1_Response.OneOf_Result { .register(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }
    var templates: [Registry_V1_Template] { self.face.templates }

    func perform(in context: OperationContext) async throws -> Registry_V1_RegisterResult {
        Registry_V1_RegisterResult(
            try await context.engine.register(
                gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier, face: Face(self.face), force: self.force))
    }
}
