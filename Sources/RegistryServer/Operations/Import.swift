import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_ImportRequest: AsyncRegistryOperation {
    static let name = "import"
    static let right: OperationClass? = .admin
    static let isReplicated = true
    static func response(_ result: Registry_V1_ImportResult) -> Registry_V1_Response.OneOf_Result { .import(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var templates: [Registry_V1_Template] { self.items.map(\.template) }

    func perform(in context: OperationContext) async throws -> Registry_V1_ImportResult {
        var profiles: [ProfileEntry] = []
        for (index, entry) in self.livenessProfiles.enumerated() {
            guard let profile = LivenessProfile(entry.profile) else {
                throw RegistryError.malformedRequest("import liveness profile \(index): a statistic is missing or a range is inverted")
            }
            profiles.append(ProfileEntry(identifier: entry.identifier, profile: profile))
        }
        let outcome = try await context.engine.importTemplates(
            gallery: RequestDispatcher.gallery(self.gallery), self.items.map(ImportItem.init), skipExisting: self.skipExisting,
            profiles: profiles)
        return .with {
            $0.templateIds = outcome.templateIds
            $0.skipped = UInt32(outcome.skipped)
            $0.livenessProfilesStored = UInt32(outcome.profilesStored)
            $0.livenessProfilesSkipped = UInt32(outcome.profilesSkipped)
        }
    }
}
