import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_RegisterRequest: RegistryOperation {
    static let name = "register"
    static let right: OperationClass? = .enrol
    static let startsWithoutTask = true
    static func response(_ result: Registry_V1_RegisterResult) -> Registry_V1_Response.OneOf_Result { .register(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }
    var templates: [Registry_V1_Template] { self.face.templates }

    func perform(in context: OperationContext) async throws -> Registry_V1_RegisterResult {
        try await self.performStarted(in: context)
    }

    func start(
        in context: OperationContext, completion: @escaping @Sendable (Result<Registry_V1_RegisterResult, any Error>) -> Void
    ) -> Bool {
        context.engine.register(
            gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier, face: Face(self.face), force: self.force
        ) { completion($0.map(Registry_V1_RegisterResult.init)) }
        return true
    }
}
