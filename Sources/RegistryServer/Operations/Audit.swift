import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_AuditQueryRequest: AsyncRegistryOperation {
    static let name = "audit"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_AuditQueryResult) -> Registry_V1_Response.OneOf_Result { .audit(result) }

    var scope: OperationScope { .store }

    var auditedIdentifiers: [String] { self.identifier.isEmpty ? [] : [self.identifier] }

    /// The outcomes entries are written with (a filter naming another would silently match nothing).
    static let outcomes: Set<String> = ["ok", "match", "no-match", "refused"]

    func perform(in context: OperationContext) async throws -> Registry_V1_AuditQueryResult {
        guard self.outcome.isEmpty || Self.outcomes.contains(self.outcome) else {
            throw RegistryError.malformedRequest("unknown outcome filter (ok, match, no-match or refused)")
        }
        let query = AuditQuery(
            identifier: self.identifier.isEmpty ? nil : self.identifier, since: self.sinceMicros == 0 ? nil : self.sinceMicros,
            until: self.untilMicros == 0 ? nil : self.untilMicros, outcome: self.outcome.isEmpty ? nil : self.outcome,
            limit: self.limit == 0 ? 100 : Int(self.limit))
        let engine = context.engine
        // Entries waiting for their lazy flush first, so the answer includes every operation
        // finished before the query; then the scan, which may read many pages.
        try await engine.flushAudit()
        let entries = try await context.blocking { try engine.auditEntriesFlushed(query) }
        return .with { $0.entries = entries.map(Registry_V1_AuditEntry.init) }
    }
}
