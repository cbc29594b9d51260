import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_ExportRequest: AsyncRegistryOperation {
    static let name = "export"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_ExportResult) -> Registry_V1_Response.OneOf_Result { .export(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    func perform(in context: OperationContext) async throws -> Registry_V1_ExportResult {
        let engine = context.engine
        let limit = self.limit == 0 ? 1000 : Int(self.limit)
        if self.livenessProfiles {
            let page = try await engine.exportLivenessProfiles(
                gallery: RequestDispatcher.gallery(self.gallery), after: self.afterIdentifier.isEmpty ? nil : self.afterIdentifier,
                limit: limit)
            return .with {
                $0.livenessProfiles = page.profiles.map(Registry_V1_LivenessProfileEntry.init)
                if let next = page.next { $0.nextAfterIdentifier = next }
            }
        }
        let page = try await engine.exportTemplates(gallery: RequestDispatcher.gallery(self.gallery), after: self.afterTemplateID, limit: limit)
        return .with {
            $0.templates = page.templates.map(Registry_V1_StoredTemplate.init)
            $0.nextAfterTemplateID = page.next ?? 0
        }
    }
}
