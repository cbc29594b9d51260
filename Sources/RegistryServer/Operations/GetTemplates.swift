import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_GetTemplatesRequest: AsyncRegistryOperation {
    static let name = "get_templates"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_GetTemplatesResult) -> Registry_V1_Response.OneOf_Result { .getTemplates(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }

    func perform(in context: OperationContext) async throws -> Registry_V1_GetTemplatesResult {
        let templates = try await context.engine.templates(
            gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier, includeData: self.includeData)
        return .with { $0.templates = templates.map(Registry_V1_StoredTemplate.init) }
    }
}
