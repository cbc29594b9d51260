import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_AuditQueryRequest: AsyncRegistryOperation {
    static let name = "audit"
    static let right: OperationClass? = .admin
    static func response(_ result: Registry_V1_AuditQueryResult) -> Registry_V1_Response.OneOf_Result { .audit(result) }

    /// Entries of the galleries the peer is an admin of, and of operations on the whole store when it
    /// is an admin of every gallery: an admin of `*` whom a gallery's own entry leaves out learns
    /// nothing of that gallery here either.
    var scope: OperationScope { .permittedGalleries }

    var auditedIdentifiers: [String] { self.identifier.isEmpty ? [] : [self.identifier] }

    func perform(in context: OperationContext) async throws -> Registry_V1_AuditQueryResult {
        // Only the outcomes entries are written with: a filter naming another would silently match nothing.
        let outcome = self.outcome.isEmpty ? nil : AuditOutcome(rawValue: self.outcome)
        guard outcome.map(AuditOutcome.known.contains) ?? true else {
            throw RegistryError.malformedRequest(
                "unknown outcome filter (\(AuditOutcome.known.map(\.rawValue).joined(separator: ", ")))")
        }
        let query = AuditQuery(
            identifier: self.identifier.isEmpty ? nil : self.identifier, since: self.sinceMicros == 0 ? nil : self.sinceMicros,
            until: self.untilMicros == 0 ? nil : self.untilMicros, outcome: outcome,
            limit: self.limit == 0 ? 100 : Int(self.limit))
        let entries = try await context.engine.auditEntries(query) { gallery in context.peerHolds(.admin, gallery: gallery) }
        return .with { $0.entries = entries.map(Registry_V1_AuditEntry.init) }
    }
}
