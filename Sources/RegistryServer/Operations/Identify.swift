import RegistryEngine
import RegistryModel
import RegistryProtocol

extension Registry_V1_IdentifyRequest: RegistryOperation {
    static let name = "identify"
    static let decidesMatches = true
    static let right: OperationClass? = .identify
    /// The engine's result, converted for the wire when the reply is made (on the event loop), not
    /// in the completion (on the engine's read pool or writer thread).
    static func response(_ result: Identification) -> Registry_V1_Response.OneOf_Result { .identify(Registry_V1_IdentifyResult(result)) }

    var scope: OperationScope { .gallery(self.gallery) }

    var templates: [Registry_V1_Template] { self.face.templates }

    /// Started without a task: the engine scans on its own read pool and answers through `completion`.
    func start<Done: Completion<Identification>>(in context: OperationContext, completion: Done) {
        context.engine.identify(
            gallery: RequestDispatcher.gallery(self.gallery), face: Face(self.face), safe: self.hasSafe ? self.safe : true,
            autoEnrol: self.hasAutoEnrol ? self.autoEnrol : true, limit: self.limit == 0 ? nil : Int(self.limit), completion: completion)
    }

    /// The identifiers found, best first; the top score decides.
    func audit(_ result: Identification) -> AuditedResult {
        AuditedResult(
            identifiers: result.matches.map(\.identifier), outcome: result.matches.isEmpty ? .noMatch : .match,
            score: result.matches.first?.score)
    }
}
