import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_DeleteLivenessProfileRequest: AsyncRegistryOperation {
    static let name = "delete_liveness_profile"
    static let right: OperationClass? = .admin
    static let isReplicated = true
    static let erases = true
    static func response(_ result: Registry_V1_DeleteLivenessProfileResult) -> Registry_V1_Response.OneOf_Result { .deleteLivenessProfile(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }

    func perform(in context: OperationContext) async throws -> Registry_V1_DeleteLivenessProfileResult {
        let deleted = try await context.engine.deleteLivenessProfile(gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier)
        return .with { $0.deleted = deleted }
    }
}
