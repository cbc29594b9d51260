import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_ListIdentifiersRequest: AsyncRegistryOperation {
    static let name = "list_identifiers"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_ListIdentifiersResult) -> Registry_V1_Response.OneOf_Result { .listIdentifiers(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    func perform(in context: OperationContext) async throws -> Registry_V1_ListIdentifiersResult {
        let page = try await context.engine.identifiers(
            gallery: RequestDispatcher.gallery(self.gallery), after: self.after.isEmpty ? nil : self.after,
            limit: self.limit == 0 ? 100 : Int(self.limit))
        return .with {
            $0.identifiers = page.identifiers
            if let next = page.next { $0.next = next }
        }
    }
}
