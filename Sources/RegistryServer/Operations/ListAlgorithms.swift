import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_ListAlgorithmsRequest: AsyncRegistryOperation {
    static let name = "list_algorithms"
    static let right: OperationClass? = nil
    static func response(_ result: Registry_V1_ListAlgorithmsResult) -> Registry_V1_Response.OneOf_Result { .listAlgorithms(result) }

    var scope: OperationScope { .store }

    func perform(in context: OperationContext) async throws -> Registry_V1_ListAlgorithmsResult {
        .with { $0.algorithms = context.engine.catalog.all.map(Registry_V1_Algorithm.init) }
    }
}
