import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_MigrationStatusRequest: AsyncRegistryOperation {
    static let name = "migration_status"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_MigrationStatusResult) -> Registry_V1_Response.OneOf_Result { .migrationStatus(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    func perform(in context: OperationContext) async throws -> Registry_V1_MigrationStatusResult {
        let status = try context.engine.migrationStatus(gallery: RequestDispatcher.gallery(self.gallery))
        return .with { $0.registries = status.map(Registry_V1_MigrationStatusResult.Entry.init) }
    }
}
