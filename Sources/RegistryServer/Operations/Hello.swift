import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_Hello: AsyncRegistryOperation {
    static let name = "hello"
    static let right: OperationClass? = nil
    static func response(_ result: Registry_V1_HelloResult) -> Registry_V1_Response.OneOf_Result { .hello(result) }

    var scope: OperationScope { .store }

    /// The version check happens before any operation runs (the dispatcher refuses another major and
    /// closes the connection); here only the answer.

    func perform(in context: OperationContext) async throws -> Registry_V1_HelloResult {
        .with {
            $0.protocolMajor = ProtocolVersion.major
            $0.protocolMinor = ProtocolVersion.minor
            $0.serverVersion = RequestDispatcher.serverVersion
        }
    }
}
