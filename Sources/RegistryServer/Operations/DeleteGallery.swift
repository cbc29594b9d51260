import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_DeleteGalleryRequest: AsyncRegistryOperation {
    static let name = "delete_gallery"
    static let right: OperationClass? = .admin
    static let isReplicated = true
    static let erases = true
    static func response(_ result: Registry_V1_DeleteGalleryResult) -> Registry_V1_Response.OneOf_Result { .deleteGallery(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    func perform(in context: OperationContext) async throws -> Registry_V1_DeleteGalleryResult {
        let count = try await context.engine.deleteGallery(self.gallery)
        return .with { $0.templatesDeleted = UInt64(count) }
    }
}
