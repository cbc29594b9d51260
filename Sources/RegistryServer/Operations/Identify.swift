import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_IdentifyRequest: AsyncRegistryOperation {
    static let name = "identify"
    static let decidesMatches = true
    static let right: OperationClass? = .identify
    static func response(_ result: Registry_V1_IdentifyResult) -> Registry_V1_Response.OneOf_Result { .identify(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var templates: [Registry_V1_Template] { self.face.templates }

    func perform(in context: OperationContext) async throws -> Registry_V1_IdentifyResult {
        Registry_V1_IdentifyResult(
            try await context.engine.identify(
                gallery: RequestDispatcher.gallery(self.gallery), face: Face(self.face), safe: self.hasSafe ? self.safe : true,
                autoEnrol: self.hasAutoEnrol ? self.autoEnrol : true, limit: self.limit == 0 ? nil : Int(self.limit)))
    }

    /// The identifiers found, best first; the top score decides.
    func audit(_ result: Registry_V1_IdentifyResult) -> AuditedResult {
        AuditedResult(
            identifiers: result.matches.map(\.identifier), outcome: result.matches.isEmpty ? .noMatch : .match,
            score: result.matches.first?.score)
    }
}
