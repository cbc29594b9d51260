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

    /// The daemon writes the copy into a new directory of its backup root, or of the directory the
    /// request names when the configuration allows that one (the engine refuses any other with
    /// `PERMISSION_DENIED`), and answers with the path it wrote.
    func perform(in context: OperationContext) async throws -> Registry_V1_BackupResult {
        let (directory, bytes) = try await context.engine.backup(into: self.directory)
        context.logger.info("backup written", metadata: ["directory": "\(directory)", "bytes": "\(bytes)"])
        return .with {
            $0.bytes = UInt64(bytes)
            $0.directory = directory
        }
    }
}
