import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_DeleteIdentifierRequest: AsyncRegistryOperation {
    static let name = "delete_identifier"
    static let right: OperationClass? = .admin
    static let isReplicated = true
    static let erases = true
    static func response(_ result: Registry_V1_DeleteIdentifierResult) -> Registry_V1_Response.OneOf_Result { .deleteIdentifier(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }

    func perform(in context: OperationContext) async throws -> Registry_V1_DeleteIdentifierResult {
        let count = try await context.engine.deleteIdentifier(gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier)
        return .with { $0.templatesDeleted = UInt64(count) }
    }
}
