import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_GetLivenessProfileRequest: AsyncRegistryOperation {
    static let name = "get_liveness_profile"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_LivenessProfileResult) -> Registry_V1_Response.OneOf_Result { .getLivenessProfile(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }

    func perform(in context: OperationContext) async throws -> Registry_V1_LivenessProfileResult {
        let profile = try context.engine.livenessProfile(gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier)
        return .with { if let profile { $0.profile = Registry_V1_LivenessProfile(profile) } }
    }
}
