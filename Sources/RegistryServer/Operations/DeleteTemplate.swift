import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_DeleteTemplateRequest: AsyncRegistryOperation {
    static let name = "delete_template"
    static let right: OperationClass? = .admin
    static let isReplicated = true
    static let erases = true
    static func response(_ result: Registry_V1_DeleteTemplateResult) -> Registry_V1_Response.OneOf_Result { .deleteTemplate(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    func perform(in context: OperationContext) async throws -> Registry_V1_DeleteTemplateResult {
        let deleted = try await context.engine.deleteTemplate(gallery: RequestDispatcher.gallery(self.gallery), id: self.templateID)
        return .with { $0.deleted = deleted }
    }
}
