import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_AuthenticateRequest: RegistryOperation {
    static let name = "authenticate"
    static let decidesMatches = true
    static let right: OperationClass? = .identify
    static func response(_ result: Registry_V1_AuthenticateResult) -> Registry_V1_Response.OneOf_Result { .authenticate(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }
    var templates: [Registry_V1_Template] { self.face.templates }

    /// Most authentications write nothing: answered on the event loop, without a task switch.
    func performImmediately(in context: OperationContext) throws -> Registry_V1_AuthenticateResult? {
        try context.engine.authenticateImmediately(
            gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier, face: Face(self.face),
            autoEnrol: self.hasAutoEnrol ? self.autoEnrol : true
        ).map(Registry_V1_AuthenticateResult.init)
    }

    func perform(in context: OperationContext) async throws -> Registry_V1_AuthenticateResult {
        Registry_V1_AuthenticateResult(
            try await context.engine.authenticate(
                gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier, face: Face(self.face),
                autoEnrol: self.hasAutoEnrol ? self.autoEnrol : true))
    }

    func audit(_ result: Registry_V1_AuthenticateResult) -> AuditOutcome {
        AuditOutcome(identifiers: [self.identifier], outcome: result.authenticated ? "match" : "no-match", score: result.score)
    }
}
