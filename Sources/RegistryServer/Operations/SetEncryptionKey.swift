import Logging
import NIOPosix
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_SetEncryptionKeyRequest: AsyncRegistryOperation {
    static let name = "set_encryption_key"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_SetEncryptionKeyResult) -> Registry_V1_Response.OneOf_Result { .setEncryptionKey(result) }

    var scope: OperationScope { .store }

    func perform(in context: OperationContext) async throws -> Registry_V1_SetEncryptionKeyResult {
        // The daemon's own file, not the store: read on NIO's blocking pool (the engine reads only its
        // store). One answer for every reason it cannot be used; the reason itself to the log.
        let logger = context.logger
        var key = try await NIOThreadPool.singleton.runIfActive { [keyFile = self.keyFile] in
            try ServerConfiguration.readRequestedKey(path: keyFile) { reason in
                logger.notice(
                    "set_encryption_key refused its key file", metadata: ["path": "\(Names.loggable(keyFile, maximum: 256))", "reason": "\(reason)"])
            }
        }
        defer { KeyMaterial.wipe(&key) }
        let count = try await context.engine.setEncryptionKey(key)
        context.logger.notice("templates encrypted with a new key", metadata: ["templates": "\(count)"])
        return .with { $0.templates = UInt64(count) }
    }
}
