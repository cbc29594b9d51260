import Logging
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_BackupRequest: AsyncRegistryOperation {
    static let name = "backup"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_BackupResult) -> Registry_V1_Response.OneOf_Result { .backup(result) }

    var scope: OperationScope { .store }

    func perform(in context: OperationContext) async throws -> Registry_V1_BackupResult {
        guard !self.directory.isEmpty else { throw RegistryError.malformedRequest("backup needs a directory") }
        let bytes = try await context.engine.backup(to: self.directory)
        context.logger.info("backup written", metadata: ["directory": "\(self.directory)", "bytes": "\(bytes)"])
        return .with { $0.bytes = UInt64(bytes) }
    }
}
