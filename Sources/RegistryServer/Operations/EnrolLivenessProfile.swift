import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

extension Registry_V1_EnrolLivenessProfileRequest: AsyncRegistryOperation {
    static let name = "enrol_liveness_profile"
    static let right: OperationClass? = .enrol
    static let isReplicated = true
    static func response(_ result: Registry_V1_LivenessProfileResult) -> Registry_V1_Response.OneOf_Result { .enrolLivenessProfile(result) }

    var scope: OperationScope { .gallery(self.gallery) }

    var auditedIdentifiers: [String] { [self.identifier] }

    func perform(in context: OperationContext) async throws -> Registry_V1_LivenessProfileResult {
        var frames: [EnrolmentPose: [DepthFrame]] = [:]
        for pose in self.poses {
            guard let key = EnrolmentPose(rawValue: pose.pose) else {
                throw RegistryError.malformedRequest(
                    "unknown pose '\(pose.pose.prefix(32))'; poses are \(EnrolmentPose.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            frames[key, default: []] += pose.frames.map(DepthFrame.init)
        }
        let profile = try await context.engine.enrolLivenessProfile(
            gallery: RequestDispatcher.gallery(self.gallery), identifier: self.identifier, frames: frames, k: self.hasK ? self.k : nil)
        return .with { $0.profile = Registry_V1_LivenessProfile(profile) }
    }
}
