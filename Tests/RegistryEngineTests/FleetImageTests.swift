import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// A fleet state image (docs/fleet.md, "Compaction"): a replica that loads another's image is that
/// replica, record for record (template ids, registration times, galleries, profiles, counters),
/// so the entries after the image decide alike on both; what the loading store held before is
/// erased; a damaged or foreign image changes nothing.
@Suite struct FleetImageTests {
    /// Runs `body` as the log entry at `position` (its writes record the position).
    static func at<T: Sendable>(_ position: Int64, _ body: () async throws -> T) async rethrows -> T {
        try await FleetApplication.$current.withValue(
            FleetApplication(position: position, previous: position - 1, committedAt: 1_700_000_000_000_000 + position) {}
        ) {
            try await body()
        }
    }

    static func randomFace(_ generator: inout some RandomNumberGenerator) -> Face {
        Face(FaceTemplate(algorithm: Algorithm.arcface.version, vector: (0..<128).map { _ in Float.random(in: -1...1, using: &generator) }))
    }

    /// Every gallery's templates as export shows them (ids, identifiers, times, data), and profiles.
    static func contents(_ engine: Engine) async throws -> [String] {
        var lines: [String] = []
        for gallery in engine.galleries().map(\.name).sorted() {
            let page = try await engine.exportTemplates(gallery: gallery, limit: 10_000)
            for template in page.templates {
                lines.append(
                    "\(gallery) \(template.id) \(template.identifier) \(template.registeredAt) \(template.source) \(String(describing: template.template))"
                )
            }
            let profiles = try await engine.exportLivenessProfiles(gallery: gallery)
            lines += profiles.profiles.map { "\(gallery) profile \($0.identifier) \($0.profile.encoded())" }
        }
        return lines
    }

    @Test(arguments: [false, true])
    func aLoadedImageMakesTheSameReplicaAndErasesWhatWasThere(encryptedTarget: Bool) async throws {
        var generator = SystemRandomNumberGenerator()
        let source = TemporaryDirectory()
        defer { source.remove() }
        let a = try Engine(path: source.path)
        defer { a.close() }
        try await a.joinFleet(id: 9)
        try await Self.at(1) { _ = try await a.defineGallery(twoRegistryGallery("visitors")) }
        var position: Int64 = 1
        var faces: [Face] = []
        for index in 0..<40 {
            let face = Self.randomFace(&generator)
            faces.append(face)
            position += 1
            _ = try await Self.at(position) {
                try await a.register(gallery: index.isMultiple(of: 2) ? "visitors" : "default", identifier: "p\(index)", face: face)
            }
        }
        position += 1
        _ = try await Self.at(position) { try await a.deleteIdentifier(gallery: "visitors", identifier: "p4") }
        position += 1
        _ = try await Self.at(position) {
            try await a.importTemplates(
                gallery: "visitors", [], skipExisting: false,
                profiles: [ProfileEntry(identifier: "p6", profile: DepthLivenessEncodingTests.profile)])
        }
        #expect(try a.fleetPosition() == position)
        let (imagePosition, image) = try await a.fleetImage()
        #expect(imagePosition == position)

        let target = TemporaryDirectory()
        defer { target.remove() }
        var configuration = EngineConfiguration()
        if encryptedTarget { configuration.encryptionKey = [UInt8](repeating: 0x3C, count: 32) }
        let b = try Engine(path: target.path, configuration: configuration)
        defer { b.close() }
        try await b.joinFleet(id: 9)
        // What b held before: another history (a lagging node's), whose template must not survive.
        let stale = Self.randomFace(&generator)
        let staleId = try await Self.at(1) { try await b.register(identifier: "stale", face: stale) }.stored[0].id
        let staleTraces = try ErasureTests.traces(of: [staleId], in: b)

        #expect(try await b.loadFleetImage(image) == position)
        #expect(try b.fleetPosition() == position)
        #expect(try await Self.contents(b) == Self.contents(a))
        // Identify finds the same people with the same scores.
        for index in [0, 1, 8, 9] {
            let gallery = index.isMultiple(of: 2) ? "visitors" : "default"
            let left = try await a.identify(gallery: gallery, face: faces[index])
            let right = try await b.identify(gallery: gallery, face: faces[index])
            #expect(left.matches.map(\.identifier) == ["p\(index)"] && right.matches.map(\.identifier) == left.matches.map(\.identifier))
            #expect(right.matches.map(\.score) == left.matches.map(\.score))
        }
        // The entry after the image decides alike: the same id, the same similar-face refusal.
        let next = Self.randomFace(&generator)
        let onA = try await Self.at(position + 1) { try await a.register(identifier: "next", face: next) }
        let onB = try await Self.at(position + 1) { try await b.register(identifier: "next", face: next) }
        #expect(onA.stored.map(\.id) == onB.stored.map(\.id))
        for engine in [a, b] {
            let refused = await #expect(throws: RegistryError.self) {
                _ = try await Self.at(position + 2) { try await engine.register(identifier: "other", face: faces[1]) }
            }
            #expect(refused?.code == .similarFaceRegistered)
        }
        #expect(try await Self.contents(b) == Self.contents(a))
        // The stale template is gone from the index and, once erased, from b's data file.
        #expect(try await b.identify(face: stale).matches.isEmpty)
        try await ErasureTests.awaitErasure(b)
        #expect(try ErasureTests.found(staleTraces, in: target.path) == 0)
        _ = try await b.verify()
    }

    @Test func aDamagedOrForeignImageChangesNothing() async throws {
        try await withEngine { a in
            try await a.joinFleet(id: 3)
            _ = try await FleetImageTests.at(1) { try await a.register(identifier: "alice", face: Face(arcface())) }
            let (_, image) = try await a.fleetImage()
            try await withEngine { b in
                try await b.joinFleet(id: 3)
                _ = try await FleetImageTests.at(1) { try await b.register(identifier: "bob", face: Face(arcface(flips(0, 8)))) }
                var flipped = image
                flipped[flipped.count / 2] ^= 0x01
                var foreign = image
                foreign.replaceSubrange(4..<8, with: [0x63, 0, 0, 0])  // another store schema
                for bad in [flipped, Array(image.prefix(image.count - 9)), foreign, []] {
                    let error = await #expect(throws: RegistryError.self) { try await b.loadFleetImage(bad) }
                    #expect(error?.message.contains("image") == true)
                }
                #expect(try await b.identifiers().identifiers == ["bob"])
                #expect(try b.fleetPosition() == 1)
            }
        }
    }

    /// Nodes configured with different algorithms: the image is refused before anything is
    /// written (an index that could not be built from it would leave the node empty).
    @Test func anImageOfAlgorithmsThisNodeDefinesOtherwiseChangesNothing() async throws {
        let model512 = Algorithm(version: 5000, name: "model512", kind: .vector(dimension: 512), scoreFunction: .cosine, defaultThreshold: 0.5)
        var model256 = model512
        model256.kind = .vector(dimension: 256)
        try await withEngine(EngineConfiguration(algorithms: [model512])) { a in
            try await a.joinFleet(id: 5)
            _ = try await Self.at(1) {
                try await a.defineGallery(GalleryConfiguration(name: "m", registries: [RegistryConfiguration(algorithm: 5000)]))
            }
            let vector = (0..<512).map { Float($0 % 7) - 3 }
            _ = try await Self.at(2) {
                try await a.register(gallery: "m", identifier: "alice", face: Face(FaceTemplate(algorithm: 5000, vector: vector)))
            }
            let (_, image) = try await a.fleetImage()
            for (configuration, code) in [
                (EngineConfiguration(), RegistryError.Code.unknownAlgorithm), (EngineConfiguration(algorithms: [model256]), .internal),
            ] {
                try await withEngine(configuration) { b in
                    try await b.joinFleet(id: 5)
                    _ = try await Self.at(1) { try await b.register(identifier: "bob", face: Face(arcface())) }
                    let error = await #expect(throws: RegistryError.self) { try await b.loadFleetImage(image) }
                    #expect(error?.code == code, "\(error?.message ?? "")")
                    #expect(try await b.identifiers().identifiers == ["bob"])
                    #expect(try b.fleetPosition() == 1)
                }
            }
        }
    }
}
