import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_ListGalleriesRequest: AsyncRegistryOperation {
    static let name = "list_galleries"
    static let right: OperationClass? = nil
    static func response(_ result: Registry_V1_ListGalleriesResult) -> Registry_V1_Response.OneOf_Result { .listGalleries(result) }

    var scope: OperationScope { .store }

    func perform(in context: OperationContext) async throws -> Registry_V1_ListGalleriesResult {
        .with { $0.galleries = context.engine.galleries().map(Registry_V1_Gallery.init) }
    }
}
