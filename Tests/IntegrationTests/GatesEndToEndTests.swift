import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Testing

/// Depth frames of a face-like surface (an ellipsoid with a nose ridge, moving a little between
/// frames 600 ms apart) or, with `flat`, of a photo.
private func frames(count: Int = 4, distance: Float = 0.45, flat: Bool = false) -> [DepthFrame] {
    (0..<count).map { index in
        var depths: [Float] = []
        for row in 0..<10 {
            for column in 0..<10 {
                let x = (Float(column) - 4.5 + Float(index) * 0.15) / 5
                let y = (Float(row) - 4.5) / 5
                let bulge = flat ? 0 : max(0, 1 - x * x - y * y).squareRoot() * 0.15
                let nose: Float = !flat && abs(x) < 0.15 && abs(y) < 0.4 ? 0.02 : 0
                let noise = flat ? 0 : Float((row * 7 + column * 13 + index * 5) % 11) * 0.0002 - 0.001
                depths.append(distance - bulge - nose + noise)
            }
        }
        return DepthFrame(depths: depths, timestampMillis: Int64(index) * 600)
    }
}

/// The capture gates (README) through the daemon: details survive the wire.
@Suite struct GatesEndToEndTests {
    @Test func qualityAndLivenessGatesWithAProfileThroughTheDaemon() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        try await client.defineGallery(
            GalleryConfiguration(
                name: "door", registries: [RegistryConfiguration(algorithm: 24, minimumQuality: 0.6)],
                liveness: LivenessPolicy(authenticate: true)))
        let template = FaceTemplate(algorithm: 24, vector: axis(0))
        let poor = CaptureMetadata(
            detectorConfidence: 0.3, faceBox: FaceBox(x: 0, y: 0, width: 40, height: 40), imageWidth: 1920, imageHeight: 1080,
            yaw: 40, pitch: 0, roll: 0)
        let good = CaptureMetadata(
            detectorConfidence: 0.99, faceBox: FaceBox(x: 100, y: 80, width: 300, height: 360), imageWidth: 640,
            imageHeight: 720, yaw: 2, pitch: -3, roll: 1)
        do {
            _ = try await client.register(gallery: "door", identifier: "alice", face: Face(templates: [template], capture: poor))
            Issue.record("expected QUALITY_TOO_LOW")
        } catch let error as RegistryError {
            #expect(error.code == .qualityTooLow)
            guard case .qualityTooLow(24, 0.6, let assessment?, _) = error.details else {
                Issue.record("details lost on the wire: \(error.details)")
                return
            }
            #expect(assessment == CaptureQuality.assess(poor))
        }
        let registration = try await client.register(gallery: "door", identifier: "alice", face: Face(templates: [template], capture: good))
        #expect(registration.quality == CaptureQuality.assess(good))
        #expect(try await client.templates(gallery: "door", identifier: "alice").first?.quality == CaptureQuality.assess(good)?.score)

        var poses: [EnrolmentPose: [DepthFrame]] = [:]
        for pose in EnrolmentPose.allCases {
            poses[pose] = frames(count: 5, distance: pose == .closer ? 0.35 : pose == .further ? 0.6 : 0.45)
        }
        let profile = try await client.enrolLivenessProfile(gallery: "door", identifier: "alice", frames: poses)
        #expect(try await client.livenessProfile(gallery: "door", identifier: "alice") == profile)

        do {
            _ = try await client.authenticate(
                gallery: "door", identifier: "alice", face: Face(templates: [template], depthFrames: frames(flat: true)))
            Issue.record("expected LIVENESS_FAILED")
        } catch let error as RegistryError {
            #expect(error.code == .livenessFailed)
            guard case .livenessFailed(let verdict) = error.details else {
                Issue.record("verdict lost on the wire")
                return
            }
            #expect(!verdict.live)
            #expect(!verdict.failed.isEmpty)
            #expect(verdict.checks.count == LivenessCheck.allCases.count)
        }
        let live = try await client.authenticate(gallery: "door", identifier: "alice", face: Face(templates: [template], depthFrames: frames()))
        #expect(live.authenticated)
        #expect(live.liveness?.live == true)
        #expect(live.liveness?.thresholds == .personalised)

        #expect(try await client.deleteLivenessProfile(gallery: "door", identifier: "alice"))
        #expect(try await client.livenessProfile(gallery: "door", identifier: "alice") == nil)
        let gallery = try await client.galleries().first { $0.name == "door" }
        #expect(gallery?.liveness == LivenessPolicy(authenticate: true))
        #expect(gallery?.registries.first?.minimumQuality == 0.6)
        await client.close()
    }
}
