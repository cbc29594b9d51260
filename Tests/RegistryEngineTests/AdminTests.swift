import LMDB
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Deletions, listings, migration status and gallery definitions.
@Suite struct AdminTests {
    @Test func deletingATemplateRemovesItFromTheStoreAndFromIdentification() async throws {
        try await withEngine { engine in
            let first = try await engine.register(identifier: "alice", face: Face(arcface()))
            let second = try await engine.register(identifier: "alice", face: Face(arcface([9])))
            #expect(try await engine.deleteTemplate(id: first.stored[0].id))
            #expect(try await engine.deleteTemplate(id: first.stored[0].id) == false)
            #expect(try await engine.templates(identifier: "alice").map(\.id) == [second.stored[0].id])
            let result = try await engine.identify(face: Face(arcface()), autoEnrol: false)
            #expect(result.matches == [IdentifyMatch(identifier: "alice", score: 0.875, templateId: second.stored[0].id)])
            // A template of another gallery is not deleted through this one.
            try await engine.defineGallery(twoRegistryGallery("g"))
            let other = try await engine.register(gallery: "g", identifier: "bob", face: Face(dlib()))
            #expect(try await engine.deleteTemplate(id: other.stored[0].id) == false)
        }
    }

    @Test func deletingAnIdentifierErasesItFromEveryRegistryWithItsLivenessProfile() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))
            _ = try await engine.register(gallery: "g", identifier: "alice", face: Face(arcface(), dlib()))
            _ = try await engine.register(gallery: "g", identifier: "bob", face: Face(arcface(flips(0, 8))))
            let galleryId = try #require(engine.state["g"]?.id)
            let profileKey = Keys.profile(galleryId, "alice")
            try engine.store.environment.write { txn in try txn.put(engine.store.profiles, key: profileKey, value: [1, 2, 3]) }

            #expect(try await engine.deleteIdentifier(gallery: "g", identifier: "alice") == 2)
            await expectRegistryError(.identifierNotRegistered) { _ = try await engine.templates(gallery: "g", identifier: "alice") }
            await expectRegistryError(.identifierNotRegistered) {
                _ = try await engine.authenticate(gallery: "g", identifier: "alice", face: Face(arcface()))
            }
            #expect(try engine.store.environment.read { txn in try txn.get(engine.store.profiles, key: profileKey) } == nil)
            #expect(try engine.migrationStatus(gallery: "g").map(\.identifiersHeld) == [1, 0])
            #expect(try await engine.deleteIdentifier(gallery: "g", identifier: "alice") == 0)
            // The face is free again: registering it under another name is no longer a similar face.
            _ = try await engine.register(gallery: "g", identifier: "carol", face: Face(arcface(), dlib()))
        }
    }

    @Test func deletingAGalleryErasesEverythingInItAndDefaultCannotBeDeleted() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("visitors"))
            _ = try await engine.register(gallery: "visitors", identifier: "vic", face: Face(arcface(), dlib()))
            _ = try await engine.register(identifier: "vic", face: Face(arcface()))
            #expect(try await engine.deleteGallery("visitors") == 2)
            #expect(engine.galleries().map(\.name) == ["default"])
            await expectRegistryError(.unknownGallery) { _ = try await engine.identify(gallery: "visitors", face: Face(arcface())) }
            #expect(try await engine.templates(identifier: "vic").count == 1)  // other galleries untouched
            await expectRegistryError(.malformedRequest) { _ = try await engine.deleteGallery("default") }
            await expectRegistryError(.unknownGallery) { _ = try await engine.deleteGallery("visitors") }
            // A new gallery of the same name starts empty.
            try await engine.defineGallery(twoRegistryGallery("visitors"))
            #expect(try engine.gallery("visitors").identifierCount == 0)
            _ = try await engine.register(gallery: "visitors", identifier: "vic2", face: Face(arcface()))
        }
    }

    @Test func identifiersAreListedInPages() async throws {
        try await withEngine { engine in
            let names = ["ann", "bo", "bob", "bobby", "cy", "dee", "eve"]
            for (index, name) in names.enumerated() {
                var vector = [Float](repeating: 0, count: 128)
                vector[index] = 1
                _ = try await engine.register(identifier: name, face: Face(FaceTemplate(algorithm: 24, vector: vector)))
                var second = vector
                second[index + 64] = 0.2  // a second, matching template: listed once
                _ = try await engine.register(identifier: name, face: Face(FaceTemplate(algorithm: 24, vector: second)))
            }
            var pages: [[String]] = []
            var after: String?
            repeat {
                let page = try await engine.identifiers(after: after, limit: 3)
                pages.append(page.identifiers)
                after = page.next
            } while after != nil
            #expect(pages == [["ann", "bo", "bob"], ["bobby", "cy", "dee"], ["eve"]])
            await expectRegistryError(.malformedRequest) { _ = try await engine.identifiers(limit: 0) }
        }
    }

    @Test func anIdentifiersTemplatesAreListedInRegistrationOrderWithMetadata() async throws {
        try await withEngine { engine in
            let start = Store.now()
            _ = try await engine.register(identifier: "lena", face: Face(landmarkFace(seed: 1), arcface()))
            _ = try await engine.register(identifier: "lena", face: Face(arcface([4])))
            let templates = try await engine.templates(identifier: "lena", includeData: true)
            #expect(templates.map(\.algorithm) == [24, 1000, 24])
            #expect(templates.map(\.id) == templates.map(\.id).sorted())
            #expect(templates.allSatisfy { $0.registeredAt >= start && $0.registeredAt <= Store.now() })
            // Landmark templates carry their symmetry/coverage quality; vectors have none; no capture
            // metadata was sent, so there is no capture quality.
            let landmarkQuality = try #require(templates[1].landmarkQuality)
            #expect(templates[1].quality == nil)
            guard case .landmarks(let sent) = landmarkFace(seed: 1).data else {
                Issue.record("this guard did not hold: case .landmarks(let sent) = landmarkFace(seed: 1).data")
                return
            }
            #expect(landmarkQuality == LandmarkAlgorithm.quality(try LandmarkAlgorithm.dense(from: sent)))
            #expect(templates[0].landmarkQuality == nil)
            // The data comes back: landmarks as sent, vectors as stored.
            #expect(templates[0].template == arcface())
            guard case .landmarks(let stored) = templates[1].template?.data else {
                Issue.record("no landmark data")
                return
            }
            #expect(Set(stored) == Set(sent))
            #expect(try await engine.templates(identifier: "lena").allSatisfy { $0.template == nil })
        }
    }

    @Test func migrationStatusCountsIdentifiersPerRegistryAgainstTheGalleryTotal() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))
            _ = try await engine.register(gallery: "g", identifier: "a", face: Face(arcface(), dlib()))
            _ = try await engine.register(gallery: "g", identifier: "b", face: Face(dlib(flips(0, 8))))
            _ = try await engine.register(gallery: "g", identifier: "c", face: Face(dlib(flips(8, 8))))
            let status = try engine.migrationStatus(gallery: "g")
            #expect(
                status == [
                    MigrationStatus(algorithm: 24, identifiersHeld: 1, galleryIdentifiers: 3),
                    MigrationStatus(algorithm: 16, identifiersHeld: 3, galleryIdentifiers: 3),
                ])
        }
    }

    @Test func redefiningAGalleryChangesPriorityAndThresholdsAndKeepsTemplates() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(twoRegistryGallery("g"))
            _ = try await engine.register(gallery: "g", identifier: "a", face: Face(arcface(), dlib()))
            // dlib first, arcface identification threshold raised to 0.9.
            try await engine.defineGallery(
                GalleryConfiguration(
                    name: "g",
                    registries: [
                        RegistryConfiguration(algorithm: 16),
                        RegistryConfiguration(algorithm: 24, thresholds: Thresholds(authentication: 0.9, identification: 0.9, autoEnrolment: 0.9)),
                    ]))
            let info = try engine.gallery("g")
            #expect(info.registries.map(\.algorithm.version) == [16, 24])
            #expect(info.registries.map(\.templateCount) == [1, 1])
            #expect(info.registries[0].thresholds == Thresholds(defaultsFor: .dlib))
            let result = try await engine.identify(gallery: "g", face: Face(arcface([0])), safe: false, autoEnrol: false)
            #expect(result.matches.isEmpty)  // 0.875 < 0.9
            // A registry holding templates cannot be dropped.
            await expectRegistryError(.malformedRequest) {
                _ = try await engine.defineGallery(GalleryConfiguration(name: "g", registries: [RegistryConfiguration(algorithm: 16)]))
            }
            // Thresholds must be in (0, 1].
            await expectRegistryError(.malformedRequest) {
                _ = try await engine.defineGallery(
                    GalleryConfiguration(
                        name: "g",
                        registries: [
                            RegistryConfiguration(algorithm: 16, thresholds: Thresholds(authentication: 0, identification: 0.5, autoEnrolment: 0.5)),
                            RegistryConfiguration(algorithm: 24),
                        ]))
            }
        }
    }

    @Test func configuredVectorAlgorithmsWorkLikeBuiltInOnes() async throws {
        let model = Algorithm(version: 4242, name: "model512", kind: .vector(dimension: 512), scoreFunction: .cosine, defaultThreshold: 0.5)
        try await withEngine(EngineConfiguration(algorithms: [model])) { engine in
            try await engine.defineGallery(GalleryConfiguration(name: "m", registries: [RegistryConfiguration(algorithm: 4242)]))
            _ = try await engine.register(gallery: "m", identifier: "a", face: Face(FaceTemplate(algorithm: 4242, vector: signs([], dimension: 512))))
            let result = try await engine.identify(
                gallery: "m", face: Face(FaceTemplate(algorithm: 4242, vector: signs([1, 2, 3, 4], dimension: 512))))
            #expect(result.matches.map(\.score) == [0.5])
        }
        #expect(throws: RegistryError.self) {
            _ = try AlgorithmCatalog(configured: [
                Algorithm(version: 24, name: "again", kind: .vector(dimension: 8), scoreFunction: .dot, defaultThreshold: 0.5)
            ])
        }
    }
}

@Suite struct ShutdownTests {
    @Test func callsAfterCloseFailWithShuttingDownInsteadOfCrashing() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let engine = try Engine(path: directory.path)
        _ = try await engine.register(identifier: "alice", face: Face(arcface()))
        engine.close()
        await expectRegistryError(.shuttingDown) { _ = try await engine.register(identifier: "bob", face: Face(arcface(flips(0, 8)))) }
        await expectRegistryError(.shuttingDown) { _ = try await engine.identifiers() }
        await expectRegistryError(.shuttingDown) { _ = try await engine.templates(identifier: "alice") }
        // What was acknowledged before the close is there on the next open.
        let reopened = try Engine(path: directory.path)
        defer { reopened.close() }
        #expect(try await reopened.templates(identifier: "alice").count == 1)
    }
}

@Suite struct IdentifierBytesTests {
    @Test func canonicallyEquivalentButDifferentlyEncodedIdentifiersAreTwoIdentities() async throws {
        let composed = "Jos\u{E9}"  // é as one code point
        let decomposed = "Jose\u{301}"  // e + combining acute accent
        #expect(composed == decomposed)  // Swift says equal; the store's keys differ
        try await withEngine { engine in
            _ = try await engine.register(identifier: composed, face: Face(arcface()))
            _ = try await engine.register(identifier: decomposed, face: Face(arcface(flips(0, 8))))
            #expect(try engine.gallery("default").identifierCount == 2)
            #expect(try await engine.deleteIdentifier(identifier: decomposed) == 1)
            // Erasing one encoding leaves exactly the other, in the store and in the index.
            #expect(try engine.gallery("default").identifierCount == 1)
            let remaining = try await engine.templates(identifier: composed)
            #expect(remaining.count == 1 && remaining[0].identifier.utf8.elementsEqual(composed.utf8))
            let result = try await engine.identify(face: Face(arcface(flips(0, 8))), autoEnrol: false)
            #expect(result.matches.isEmpty, "the erased identity must not be found through the other's ordinal")
        }
    }

    /// Two canonically equivalent pairs (precomposed ë / e + combining diaeresis, 한 / its
    /// conjoining jamo) and two other names, in the store's byte order: "Zoe\u{308}" (5A 6F 65 CC 88)
    /// sorts right before "Zo\u{EB}" (5A 6F C3 AB), so the two meet inside a page or across a page
    /// boundary; so do the jamo (E1 84 92 …) and the syllable (ED 95 9C).
    static let listed = ["Zoe", "Zoey\u{308}", "Zoe\u{308}", "Zo\u{EB}", "\u{1112}\u{1161}\u{11AB}", "\u{D55C}"]

    @Test func identifierPageListsCanonicallyEquivalentIdentifiersApartInByteOrder() async throws {
        let names = Self.listed.map { Array($0.utf8) }
        #expect(names == names.sorted { $0.lexicographicallyPrecedes($1) }, "the list is in byte order")
        try await withEngine { engine in
            // Registered out of order, each with two templates (one listing entry per identifier).
            for (index, identifier) in Self.listed.enumerated().reversed() {
                for extra in [Float(0), 0.2] {
                    var vector = [Float](repeating: 0, count: 128)
                    (vector[index], vector[index + 64]) = (1, extra)
                    _ = try await engine.register(identifier: identifier, face: Face(FaceTemplate(algorithm: 24, vector: vector)))
                }
            }
            let galleryId = try engine.gallery(named: "default").id
            func page(after: String?, limit: Int) throws -> (identifiers: [[UInt8]], more: Bool) {
                let (identifiers, more) = try engine.store.environment.read { txn in
                    try engine.store.identifierPage(txn, galleryId: galleryId, after: after, limit: limit)
                }
                return (identifiers.map { Array($0.utf8) }, more)
            }
            let all = try page(after: nil, limit: 100)
            #expect(all.identifiers == names && !all.more)
            // Every page size: pages end between twins and hold both of a pair.
            for limit in 1...names.count {
                var pages: [[UInt8]] = []
                var after: String?
                while pages.count <= names.count {
                    let next = try page(after: after, limit: limit)
                    pages += next.identifiers
                    guard next.more, let last = next.identifiers.last else { break }
                    after = String(decoding: last, as: UTF8.self)
                }
                #expect(pages == names, "pages of \(limit)")
            }
            // After one spelling comes the other: `after` is exclusive by bytes, not by equivalence.
            #expect(try page(after: "Zoe\u{308}", limit: 1).identifiers == [Array("Zo\u{EB}".utf8)])
            #expect(try page(after: "\u{1112}\u{1161}\u{11AB}", limit: 1).identifiers == [Array("\u{D55C}".utf8)])
            #expect(try await engine.identifiers(limit: 100).identifiers.map { Array($0.utf8) } == names)
        }
    }

    @Test func aGalleryNameOnlyCanonicallyEquivalentToADefinedOneIsUnknown() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(GalleryConfiguration(name: "Kiosk", registries: [RegistryConfiguration(algorithm: 24)]))
            _ = try await engine.register(gallery: "Kiosk", identifier: "ann", face: Face(arcface()))
            let kelvin = "\u{212A}iosk"  // KELVIN SIGN, canonically equivalent to K
            #expect(kelvin == "Kiosk")
            await expectRegistryError(.unknownGallery) { _ = try engine.gallery(kelvin) }
            await expectRegistryError(.unknownGallery) { _ = try await engine.identifiers(gallery: kelvin) }
            await expectRegistryError(.unknownGallery) { _ = try await engine.exportTemplates(gallery: kelvin) }
            await expectRegistryError(.unknownGallery) { _ = try await engine.templates(gallery: kelvin, identifier: "ann") }
            #expect(try await engine.identifiers(gallery: "Kiosk").identifiers == ["ann"])
        }
    }

    @Test func verifyReportsAnIdentifierIndexEntryUnderACanonicallyEquivalentSpelling() async throws {
        try await withEngine { engine in
            let id = try await engine.register(identifier: "Zo\u{EB}", face: Face(arcface())).stored[0].id
            #expect(try await engine.verify().problems.isEmpty)
            let galleryId = try engine.gallery(named: "default").id
            try engine.store.environment.write { txn in
                // The record still says Zo\u{EB}; its index entry now says Zoe\u{308}.
                let value = try #require(
                    try txn.get(engine.store.identifiers, key: Keys.identifierEntry(galleryId, "Zo\u{EB}", id)).map { Array($0) })
                #expect(try txn.delete(engine.store.identifiers, key: Keys.identifierEntry(galleryId, "Zo\u{EB}", id)))
                try txn.put(engine.store.identifiers, key: Keys.identifierEntry(galleryId, "Zoe\u{308}", id), value: value)
            }
            let problems = try await engine.verify().problems
            #expect(problems.contains { $0.contains("disagree on its gallery, identifier or registry") }, "\(problems)")
        }
    }
}
