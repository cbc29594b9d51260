import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_VerifyRequest: AsyncRegistryOperation {
    static let name = "verify"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_VerifyResult) -> Registry_V1_Response.OneOf_Result { .verify(result) }

    var scope: OperationScope { .store }

    func perform(in context: OperationContext) async throws -> Registry_V1_VerifyResult {
        let (checked, problems) = try await context.engine.verify()
        return .with {
            $0.templatesChecked = UInt64(checked)
            $0.problems = problems
        }
    }
}
