import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_DefineGalleryRequest: AsyncRegistryOperation {
    static let name = "define_gallery"
    static let right: OperationClass? = .admin
    static let isReplicated = true
    static func response(_ result: Registry_V1_Gallery) -> Registry_V1_Response.OneOf_Result { .defineGallery(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    func perform(in context: OperationContext) async throws -> Registry_V1_Gallery {
        Registry_V1_Gallery(try await context.engine.defineGallery(GalleryConfiguration(self)))
    }
}
