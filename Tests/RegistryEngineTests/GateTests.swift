import Glibc
import LMDB
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// A printed photo held 0.45 m away: a flat plane, whatever the frame.
func photoFrames(count: Int = 4) -> [DepthFrame] {
    (0..<count).map { DepthFrame(depths: [Float](repeating: 0.45, count: 100), timestampMillis: Int64($0) * 600) }
}

/// Capture metadata scoring `excellent`: confident, frontal, large, sharp, well lit.
let goodCapture = CaptureMetadata(
    detectorConfidence: 0.99, faceBox: FaceBox(x: 100, y: 80, width: 300, height: 360), imageWidth: 640, imageHeight: 720,
    yaw: 2, pitch: -3, roll: 1, sharpness: 400, brightnessMean: 130, brightnessStdDev: 45)

/// Capture metadata scoring `poor`: a doubtful detection of a small face turned away.
let poorCapture = CaptureMetadata(
    detectorConfidence: 0.3, faceBox: FaceBox(x: 0, y: 0, width: 40, height: 40), imageWidth: 1920, imageHeight: 1080,
    yaw: 40, pitch: 0, roll: 0)

/// The capture gates (README) enforced by the engine.
@Suite struct GateTests {
    static let gated = GalleryConfiguration(
        name: "gated",
        registries: [
            RegistryConfiguration(algorithm: 24, minimumQuality: 0.6),
            RegistryConfiguration(algorithm: 16, minimumAutoEnrolmentQuality: 0.6),
        ])

    @Test func aRegistryRequiringQualityRefusesPoorAndMissingCaptureMetadataAndStoresTheScore() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(Self.gated)
            let missing = await expectRegistryError(.qualityTooLow) {
                _ = try await engine.register(gallery: "gated", identifier: "alice", face: Face(arcface()))
            }
            guard case .qualityTooLow(let algorithm, let minimum, nil, _) = missing?.details else {
                Issue.record("expected quality details without an assessment, got \(String(describing: missing?.details))")
                return
            }
            #expect(algorithm == 24 && minimum == 0.6)

            let poor = await expectRegistryError(.qualityTooLow) {
                _ = try await engine.register(gallery: "gated", identifier: "alice", face: Face(templates: [arcface()], capture: poorCapture))
            }
            guard case .qualityTooLow(_, _, let assessment?, _) = poor?.details else {
                Issue.record("expected an assessment")
                return
            }
            #expect(assessment.rating == .poor)
            #expect(assessment == CaptureQuality.assess(poorCapture))
            #expect(poor?.message.contains("weakest component") == true)

            let good = try await engine.register(gallery: "gated", identifier: "alice", face: Face(templates: [arcface()], capture: goodCapture))
            let expected = try #require(CaptureQuality.assess(goodCapture))
            #expect(good.quality == expected)
            #expect(expected.rating == .excellent)
            #expect(try await engine.templates(gallery: "gated", identifier: "alice").map(\.quality) == [expected.score])
            // The registry without a minimum (dlib) takes any capture.
            _ = try await engine.register(gallery: "gated", identifier: "bob", face: Face(dlib(flips(0, 8))))
        }
    }

    @Test func autoEnrolmentRespectsTheTargetRegistrysMinimumQuality() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(Self.gated)
            _ = try await engine.register(gallery: "gated", identifier: "alice", face: Face(templates: [arcface()], capture: goodCapture))
            // No capture metadata: dlib's auto-enrolment gate refuses, the identification stands.
            let refused = try await engine.identify(gallery: "gated", face: Face(arcface(), dlib()))
            #expect(refused.matches.map(\.identifier) == ["alice"])
            #expect(refused.autoEnrolment == [AutoEnrolmentOutcome(algorithm: 16, result: .qualityTooLow(score: nil, minimum: 0.6))])
            // A good capture is enrolled, and its score is stored with the template.
            let enrolled = try await engine.identify(gallery: "gated", face: Face(templates: [arcface(), dlib()], capture: goodCapture))
            guard case .enrolled = enrolled.autoEnrolment.first?.result else {
                Issue.record("expected an enrolment, got \(enrolled.autoEnrolment)")
                return
            }
            let stored = try await engine.templates(gallery: "gated", identifier: "alice")
            #expect(stored.last?.quality == CaptureQuality.assess(goodCapture)?.score)
        }
    }

    @Test func aGalleryRequiringLivenessRefusesAuthenticationWithoutALiveFace() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(
                GalleryConfiguration(
                    name: "door", registries: [RegistryConfiguration(algorithm: 24)], liveness: LivenessPolicy(authenticate: true)))
            _ = try await engine.register(gallery: "door", identifier: "alice", face: Face(arcface()))  // register needs no liveness here
            // Not registered comes before liveness.
            await expectRegistryError(.identifierNotRegistered) {
                _ = try await engine.authenticate(gallery: "door", identifier: "zed", face: Face(arcface()))
            }
            let noFrames = await expectRegistryError(.livenessFailed) {
                _ = try await engine.authenticate(gallery: "door", identifier: "alice", face: Face(arcface()))
            }
            #expect(noFrames?.message.contains("liveness") == true)
            let photo = await expectRegistryError(.livenessFailed) {
                _ = try await engine.authenticate(
                    gallery: "door", identifier: "alice", face: Face(templates: [arcface()], depthFrames: photoFrames()))
            }
            guard case .livenessFailed(let verdict) = photo?.details else {
                Issue.record("expected a verdict")
                return
            }
            #expect(!verdict.live)
            #expect(verdict.failed.contains(.edgeVariation))
            let live = try await engine.authenticate(
                gallery: "door", identifier: "alice", face: Face(templates: [arcface()], depthFrames: liveFrames()))
            #expect(live.authenticated)
            #expect(live.liveness?.live == true)
            #expect(live.liveness?.thresholds == .fixed)
            // Identify is not gated in this gallery: a photo still identifies, with its verdict reported.
            let identified = try await engine.identify(gallery: "door", face: Face(templates: [arcface()], depthFrames: photoFrames()))
            #expect(identified.matches.map(\.identifier) == ["alice"])
            #expect(identified.liveness?.live == false)
        }
    }

    @Test func aLivenessProfileIsUsedForItsIdentifierAndErasedWithIt() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(
                GalleryConfiguration(
                    name: "door", registries: [RegistryConfiguration(algorithm: 24)], liveness: LivenessPolicy(authenticate: true),
                    livenessK: 3))
            _ = try await engine.register(gallery: "door", identifier: "alice", face: Face(arcface()))
            var poses: [EnrolmentPose: [DepthFrame]] = [:]
            for (index, pose) in EnrolmentPose.allCases.enumerated() {
                let distance: Float = pose == .closer ? 0.35 : pose == .further ? 0.6 : 0.45
                poses[pose] = liveFrames(count: 5, distance: distance, seed: UInt64(index + 1))
            }
            await expectRegistryError(.identifierNotRegistered) {
                _ = try await engine.enrolLivenessProfile(gallery: "door", identifier: "zed", frames: poses)
            }
            var tooFew = poses
            tooFew[.left] = Array(poses[.left]!.prefix(2))
            let refusal = await expectRegistryError(.malformedRequest) {
                _ = try await engine.enrolLivenessProfile(gallery: "door", identifier: "alice", frames: tooFew)
            }
            #expect(refusal?.message.contains("left") == true)

            let profile = try await engine.enrolLivenessProfile(gallery: "door", identifier: "alice", frames: poses)
            #expect(profile.k == 3)  // the gallery's k
            #expect(try engine.livenessProfile(gallery: "door", identifier: "alice") == profile)
            let result = try await engine.authenticate(
                gallery: "door", identifier: "alice", face: Face(templates: [arcface()], depthFrames: liveFrames(seed: 99)))
            #expect(result.liveness?.thresholds == .personalised)
            #expect(result.liveness?.live == true)

            _ = try await engine.deleteIdentifier(gallery: "door", identifier: "alice")
            #expect(try engine.livenessProfile(gallery: "door", identifier: "alice") == nil)
            let galleryId = try #require(engine.state["door"]?.id)
            #expect(try engine.store.environment.read { txn in try txn.get(engine.store.profiles, key: Keys.profile(galleryId, "alice")) } == nil)
        }
    }

    @Test func gatePoliciesAndProfilesSurviveAReopen() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let configuration = GalleryConfiguration(
            name: "door",
            registries: [RegistryConfiguration(algorithm: 24, minimumQuality: 0.5, minimumAutoEnrolmentQuality: 0.7)],
            liveness: LivenessPolicy(authenticate: true, identify: false, register: true), livenessK: 2.5)
        var profile: LivenessProfile?
        do {
            let engine = try Engine(path: directory.path)
            try await engine.defineGallery(configuration)
            _ = try await engine.register(
                gallery: "door", identifier: "alice", face: Face(templates: [arcface()], capture: goodCapture, depthFrames: liveFrames()))
            var poses: [EnrolmentPose: [DepthFrame]] = [:]
            for pose in EnrolmentPose.allCases { poses[pose] = liveFrames(count: 5, distance: pose == .closer ? 0.35 : 0.45) }
            profile = try await engine.enrolLivenessProfile(gallery: "door", identifier: "alice", frames: poses)
            engine.close()
        }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        let info = try engine.gallery("door")
        #expect(info.liveness == configuration.liveness)
        #expect(info.livenessK == 2.5)
        #expect(info.registries.first?.minimumQuality == 0.5)
        #expect(info.registries.first?.minimumAutoEnrolmentQuality == 0.7)
        #expect(try engine.livenessProfile(gallery: "door", identifier: "alice") == profile)
        // register is gated: a photo is refused.
        await expectRegistryError(.livenessFailed) {
            _ = try await engine.register(
                gallery: "door", identifier: "bob", face: Face(templates: [arcface(flips(0, 8))], capture: goodCapture, depthFrames: photoFrames()))
        }
    }

    @Test func aSchemaVersion1StoreIsMigrated() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        // Write a store as schema 1 did: gallery records without gates, landmark quality in the quality slot.
        do {
            let engine = try Engine(path: directory.path)
            _ = try await engine.register(identifier: "lena", face: Face(landmarkFace(seed: 1)))
            try engine.store.environment.write { txn in
                var galleries: [([UInt8], GalleryRecord)] = []
                try txn.forEach(engine.store.galleries) { key, value in
                    galleries.append((Array(key), try GalleryRecord(decoding: value)))
                    return .continue
                }
                for (key, record) in galleries {
                    var writer = ByteWriter()  // the schema 1 layout
                    writer.append(record.id)
                    writer.append(UInt16(record.registries.count))
                    for registry in record.registries {
                        writer.append(registry.id)
                        writer.append(registry.algorithm)
                        writer.append(registry.thresholds.authentication)
                        writer.append(registry.thresholds.identification)
                        writer.append(registry.thresholds.autoEnrolment)
                    }
                    try txn.put(engine.store.galleries, key: key, value: writer.bytes)
                }
                var templates: [([UInt8], TemplateRecord)] = []
                try txn.forEach(engine.store.templates) { key, value in
                    templates.append((Array(key), try TemplateRecord(decoding: value, id: try Store.templateId(key))))
                    return .continue
                }
                for (key, record) in templates {
                    var writer = ByteWriter()
                    writer.append(record.registryId)
                    writer.append(record.galleryId)
                    writer.append(record.registeredAt)
                    writer.append(record.source.rawValue)
                    writer.append(record.landmarkQuality ?? .nan)
                    writer.append(string: record.identifier)
                    try txn.put(engine.store.templates, key: key, value: writer.bytes)
                }
                try engine.store.writeInteger(txn, Keys.schemaVersion, UInt32(1))
            }
            engine.close()
        }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        let version = try engine.store.environment.read { txn in try engine.store.readUInt32(txn, Keys.schemaVersion) }
        #expect(version == Store.schemaVersion)
        // The store as it was before the upgrade, kept beside it: still schema 1.
        let copies = try #require(directoryEntries(directory.path)).filter { $0.hasPrefix("before-schema-1-") }
        #expect(copies.count == 1)
        if let copy = copies.first {
            let before = try Store(path: directory.path + "/" + copy, configuration: EngineConfiguration())
            defer { before.close() }
            #expect(try before.environment.read { txn in try before.readUInt32(txn, Keys.schemaVersion) } == 1)
        }
        #expect(try await engine.verify().problems.isEmpty)
        let lena = try await engine.templates(identifier: "lena")
        guard case .landmarks(let sent) = landmarkFace(seed: 1).data else {
            Issue.record("this guard did not hold: case .landmarks(let sent) = landmarkFace(seed: 1).data")
            return
        }
        #expect(lena.first?.landmarkQuality == LandmarkAlgorithm.quality(try LandmarkAlgorithm.dense(from: sent)))
        #expect(lena.first?.quality == nil)
        #expect(try engine.gallery("default").registries.count == 4)
        let result = try await engine.identify(face: Face(landmarkFace(seed: 1)), autoEnrol: false)
        #expect(result.matches.map(\.identifier) == ["lena"])
    }
}

@Suite struct StrictLivenessTests {
    /// The same live-looking frame repeated: a static mask.
    func staticMask() -> [DepthFrame] {
        let frame = liveFrames(count: 1)[0]
        return (0..<4).map { DepthFrame(depths: frame.depths, timestampMillis: Int64($0) * 600) }
    }

    @Test func aStaticMaskPassesTheSeedsRulesButNotStrictMode() async throws {
        try await withEngine { engine in
            for strict in [false, true] {
                let name = strict ? "strict" : "lenient"
                try await engine.defineGallery(
                    GalleryConfiguration(
                        name: name, registries: [RegistryConfiguration(algorithm: 24)],
                        liveness: LivenessPolicy(authenticate: true, strict: strict)))
                _ = try await engine.register(gallery: name, identifier: "alice", face: Face(arcface()))
            }
            // The depth liveness design's rule: 4 mandatory + 3 of 5 optional; the mask fails only microMovement.
            let lenient = try await engine.authenticate(
                gallery: "lenient", identifier: "alice", face: Face(templates: [arcface()], depthFrames: self.staticMask()))
            #expect(lenient.liveness?.live == true)
            #expect(lenient.liveness?.failed == [.microMovement])
            let refused = await expectRegistryError(.livenessFailed) {
                _ = try await engine.authenticate(
                    gallery: "strict", identifier: "alice", face: Face(templates: [arcface()], depthFrames: self.staticMask()))
            }
            #expect(refused?.message.contains("strict liveness requires microMovement") == true)
            // A live face passes both.
            let live = try await engine.authenticate(
                gallery: "strict", identifier: "alice", face: Face(templates: [arcface()], depthFrames: liveFrames()))
            #expect(live.liveness?.live == true)
            #expect(try engine.gallery("strict").liveness.strict)
        }
    }
}

@Suite struct GateFollowUpTests {
    @Test func autoEnrolmentInAGalleryThatRequiresLivenessToRegisterNeedsALiveFace() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(
                GalleryConfiguration(
                    name: "g", registries: [RegistryConfiguration(algorithm: 24), RegistryConfiguration(algorithm: 16)],
                    liveness: LivenessPolicy(register: true)))
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(templates: [arcface()], depthFrames: liveFrames()))
            // Identify is not gated, but enrolling a photo's template would be a registration without liveness.
            let photo = try await engine.identify(gallery: "g", face: Face(templates: [arcface(), dlib()], depthFrames: photoFrames()))
            #expect(photo.matches.map(\.identifier) == ["alice"])
            #expect(photo.autoEnrolment == [AutoEnrolmentOutcome(algorithm: 16, result: .livenessRequired)])
            let live = try await engine.identify(gallery: "g", face: Face(templates: [arcface(), dlib()], depthFrames: liveFrames()))
            guard case .enrolled = live.autoEnrolment.first?.result else {
                Issue.record("expected an enrolment, got \(live.autoEnrolment)")
                return
            }
        }
    }

    @Test func deletingAnIdentifiersLastTemplateErasesItsProfile() async throws {
        try await withEngine { engine in
            let registration = try await engine.register(identifier: "alice", face: Face(arcface()))
            var poses: [EnrolmentPose: [DepthFrame]] = [:]
            for pose in EnrolmentPose.allCases { poses[pose] = liveFrames(count: 5, distance: pose == .closer ? 0.35 : 0.45) }
            _ = try await engine.enrolLivenessProfile(identifier: "alice", frames: poses)
            #expect(try await engine.deleteTemplate(id: registration.stored[0].id))
            #expect(try engine.livenessProfile(identifier: "alice") == nil)
        }
    }

    @Test func aLivenessKBeyondTheMaximumIsRefused() async throws {
        _ = try await withEngine { engine in
            await expectRegistryError(.malformedRequest) {
                _ = try await engine.defineGallery(
                    GalleryConfiguration(
                        name: "g", registries: [RegistryConfiguration(algorithm: 24)], livenessK: 1e37))
            }
        }
    }
}
