import Glibc

@testable import RegistryEngine
@testable import RegistryModel

/// A landmark template: every vocabulary landmark on a deterministic pseudo-face, with `jitter`
/// added to landmark `i` as `jitter * sin(i + seed)` (so different seeds give different people).
func landmarkFace(seed: Int = 0, jitter: Float = 0, count: Int = LandmarkVocabulary.count) -> FaceTemplate {
    let landmarks = LandmarkVocabulary.names.prefix(count).enumerated().map { index, name in
        let angle = Float(index) * 0.7
        let wobble = jitter * Float(sin(Double(index + seed)))
        return Landmark(
            name: name, x: 300 + 120 * Float(cos(Double(angle))) + wobble,
            y: 260 + 140 * Float(sin(Double(angle))) - wobble, z: Float(index % 7) * 3 + wobble)
    }
    return FaceTemplate(algorithm: Algorithm.landmarks.version, landmarks: landmarks)
}

/// One run through every kind of write, used to check that the state survives a reopen.
enum Scenario {
    static func run(on engine: Engine) async throws {
        try await engine.defineGallery(twoRegistryGallery("g"))
        // Plain and multi-registry registrations.
        _ = try await engine.register(identifier: "alice", face: Face(arcface([0])))
        _ = try await engine.register(identifier: "alice", face: Face(arcface([1])))
        _ = try await engine.register(identifier: "bob", face: Face(arcface(flips(8, 4)), dlib(flips(8, 4))))
        _ = try await engine.register(identifier: "carol", face: Face(arcface([8])), force: true)
        _ = try await engine.register(identifier: "lena", face: Face(landmarkFace(seed: 1)))
        _ = try await engine.register(gallery: "g", identifier: "dave", face: Face(arcface([0]), dlib([0])))
        _ = try await engine.register(gallery: "g", identifier: "erin", face: Face(dlib(flips(4, 8))))
        // Refusals leave nothing behind.
        _ = try? await engine.register(gallery: "g", identifier: "mallory", face: Face(arcface([0]), dlib([0])))
        // Auto-enrolment through identify and authenticate.
        _ = try await engine.identify(face: Face(arcface([0]), dlib([0])), safe: false)
        _ = try await engine.authenticate(identifier: "lena", face: Face(landmarkFace(seed: 1), arcface(flips(0, 8))))
        // Imports, and deletions of a template, an identifier and a gallery.
        let imported = try await engine.importTemplates([
            ImportItem(identifier: "ivan", template: arcface(flips(2, 7))),
            ImportItem(identifier: "ivan", template: dlib(flips(2, 7))),
            ImportItem(identifier: "judy", template: FaceTemplate(algorithm: 300, vector: signs([3], dimension: 512))),
        ])
        _ = try await engine.deleteTemplate(id: imported[1])
        try await engine.defineGallery(GalleryConfiguration(name: "temporary", registries: [RegistryConfiguration(algorithm: 16)]))
        _ = try await engine.register(gallery: "temporary", identifier: "tom", face: Face(dlib()))
        _ = try await engine.deleteGallery("temporary")
        _ = try await engine.register(identifier: "zoe", face: Face(arcface(flips(0, 16))))
        _ = try await engine.deleteIdentifier(identifier: "zoe")
    }

    /// Read-only identifications over the scenario's state.
    static func identifications(on engine: Engine) async throws -> [Identification] {
        [
            try await engine.identify(face: Face(arcface([0])), safe: false, autoEnrol: false),
            try await engine.identify(face: Face(arcface(flips(8, 4))), safe: false, autoEnrol: false),
            try await engine.identify(face: Face(landmarkFace(seed: 1, jitter: 2)), safe: false, autoEnrol: false),
            try await engine.identify(gallery: "g", face: Face(dlib([0])), autoEnrol: false),
        ]
    }
}
