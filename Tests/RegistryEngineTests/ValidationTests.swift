import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Every bad input gets its own error and leaves the store exactly as it was.
@Suite struct ValidationTests {
    /// Registers `face` as "newcomer" into a store holding one person, expecting `code` and, for
    /// invalid templates, `problem`; then checks nothing changed.
    private func expectRefused(
        _ face: Face,
        identifier: String = "newcomer",
        gallery: String = "default",
        _ code: RegistryError.Code,
        problem: TemplateProblem? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "alice", face: Face(arcface()))
            let before = try await StoreSnapshot(engine)
            let error = await expectRegistryError(code, sourceLocation: sourceLocation) {
                _ = try await engine.register(gallery: gallery, identifier: identifier, face: face)
            }
            if let problem {
                guard case .invalidTemplate(_, let actual) = error?.details else {
                    Issue.record("no template problem in \(String(describing: error))", sourceLocation: sourceLocation)
                    return
                }
                #expect(actual == problem, sourceLocation: sourceLocation)
            }
            #expect(try await StoreSnapshot(engine) == before, sourceLocation: sourceLocation)
            // Identify and import refuse the same input the same way.
            if code == .invalidTemplate || code == .unknownAlgorithm {
                await expectRegistryError(code, sourceLocation: sourceLocation) {
                    _ = try await engine.identify(gallery: gallery, face: face)
                }
                if let template = face.templates.last {
                    await expectRegistryError(code, sourceLocation: sourceLocation) {
                        _ = try await engine.importTemplates(gallery: gallery, [ImportItem(identifier: "x", template: template)])
                    }
                }
                #expect(try await StoreSnapshot(engine) == before, sourceLocation: sourceLocation)
            }
        }
    }

    @Test func aVectorOfTheWrongDimension() async throws {
        try await self.expectRefused(
            Face(FaceTemplate(algorithm: 24, vector: [Float](repeating: 0.1, count: 127))), .invalidTemplate,
            problem: .wrongDimension(expected: 128, actual: 127))
    }

    @Test func aNaNValue() async throws {
        var values = signs([])
        values[40] = .nan
        try await self.expectRefused(Face(FaceTemplate(algorithm: 24, vector: values)), .invalidTemplate, problem: .nonFiniteValue(index: 40))
    }

    @Test func anInfiniteValue() async throws {
        var values = signs([])
        values[3] = -.infinity
        try await self.expectRefused(Face(FaceTemplate(algorithm: 16, vector: values)), .invalidTemplate, problem: .nonFiniteValue(index: 3))
    }

    @Test func theFirstOfSeveralNonFiniteValuesIsNamed() async throws {
        var values = signs([])
        values[90] = .nan
        values[7] = .infinity
        values[100] = -.infinity
        try await self.expectRefused(Face(FaceTemplate(algorithm: 24, vector: values)), .invalidTemplate, problem: .nonFiniteValue(index: 7))
    }

    @Test func anAllZeroVector() async throws {
        try await self.expectRefused(
            Face(FaceTemplate(algorithm: 24, vector: [Float](repeating: 0, count: 128))), .invalidTemplate, problem: .zeroVector)
    }

    @Test func anUnnormalisedVectorForADotProductAlgorithm() async throws {
        try await self.expectRefused(
            Face(FaceTemplate(algorithm: 300, vector: [Float](repeating: 1, count: 512))), .invalidTemplate,
            problem: .notNormalised(norm: Float(512.0.squareRoot())))
    }

    @Test func fewerThan15Landmarks() async throws {
        try await self.expectRefused(Face(landmarkFace(count: 14)), .invalidTemplate, problem: .tooFewLandmarks(count: 14, minimum: 15))
    }

    @Test func anUnknownLandmarkName() async throws {
        guard case .landmarks(var landmarks) = landmarkFace().data else {
            Issue.record("this guard did not hold: case .landmarks(var landmarks) = landmarkFace().data")
            return
        }
        landmarks[5].name = "THIRD_EYE"
        try await self.expectRefused(
            Face(FaceTemplate(algorithm: 1000, landmarks: landmarks)), .invalidTemplate, problem: .unknownLandmark(name: "THIRD_EYE"))
    }

    @Test func aDuplicateLandmarkName() async throws {
        guard case .landmarks(var landmarks) = landmarkFace().data else {
            Issue.record("this guard did not hold: case .landmarks(var landmarks) = landmarkFace().data")
            return
        }
        landmarks[7].name = landmarks[6].name
        try await self.expectRefused(
            Face(FaceTemplate(algorithm: 1000, landmarks: landmarks)), .invalidTemplate,
            problem: .duplicateLandmark(name: landmarks[6].name))
    }

    @Test func landmarksSentForAVectorAlgorithm() async throws {
        guard case .landmarks(let landmarks) = landmarkFace().data else {
            Issue.record("this guard did not hold: case .landmarks(let landmarks) = landmarkFace().data")
            return
        }
        try await self.expectRefused(
            Face(FaceTemplate(algorithm: 24, landmarks: landmarks)), .invalidTemplate,
            problem: .wrongKind(expected: "a vector of 128 values"))
    }

    @Test func aBadImportItemIsNamedByPositionAndIdentifierAndNothingIsStored() async throws {
        try await withEngine { engine in
            let before = try await StoreSnapshot(engine)
            let items = [
                ImportItem(identifier: "ann", template: arcface([1])),
                ImportItem(identifier: "bob", template: FaceTemplate(algorithm: 24, vector: [Float](repeating: 0.1, count: 127))),
                ImportItem(identifier: "cy", template: arcface([2])),
            ]
            let error = await expectRegistryError(.invalidTemplate) { _ = try await engine.importTemplates(items) }
            #expect(error?.message.hasPrefix("import item 1 ('bob'): ") == true, "\(String(describing: error?.message))")
            guard case .invalidTemplate(_, let problem) = error?.details else {
                Issue.record("the template problem was lost")
                return
            }
            #expect(problem == .wrongDimension(expected: 128, actual: 127))
            #expect(try await StoreSnapshot(engine) == before)
            // An invalid identifier is named by position only.
            let unnamed = await expectRegistryError(.malformedRequest) {
                _ = try await engine.importTemplates([ImportItem(identifier: "a\nb", template: arcface([3]))])
            }
            #expect(unnamed?.message.hasPrefix("import item 0: ") == true)
        }
    }

    @Test func anUnknownAlgorithm() async throws {
        try await self.expectRefused(Face(FaceTemplate(algorithm: 77, vector: signs([]))), .unknownAlgorithm)
    }

    @Test func anAlgorithmTheGalleryHasNoRegistryFor() async throws {
        try await withEngine { engine in
            try await engine.defineGallery(GalleryConfiguration(name: "dlibonly", registries: [RegistryConfiguration(algorithm: 16)]))
            let error = await expectRegistryError(.unknownAlgorithm) {
                _ = try await engine.register(gallery: "dlibonly", identifier: "alice", face: Face(arcface()))
            }
            #expect(error?.message.contains("has no registry for arcface") == true)
        }
    }

    @Test func twoTemplatesOfOneAlgorithmInOneFace() async throws {
        try await self.expectRefused(Face(arcface(), arcface([1])), .malformedRequest)
    }

    @Test func aFaceWithoutTemplates() async throws {
        try await self.expectRefused(Face(templates: []), .malformedRequest)
    }

    @Test func anEmptyIdentifier() async throws {
        try await self.expectRefused(Face(arcface([9])), identifier: "", .malformedRequest)
    }

    @Test func anIdentifierOver256Bytes() async throws {
        try await self.expectRefused(Face(arcface([9])), identifier: String(repeating: "é", count: 129), .malformedRequest)
        // Exactly 256 bytes is fine.
        try await withEngine { engine in
            _ = try await engine.register(identifier: String(repeating: "é", count: 128), face: Face(arcface()))
        }
    }

    @Test func anIdentifierWithAControlCharacter() async throws {
        try await self.expectRefused(Face(arcface([9])), identifier: "bob\u{0}", .malformedRequest)
        try await self.expectRefused(Face(arcface([9])), identifier: "bob\nsmith", .malformedRequest)
    }

    @Test func anUnknownGallery() async throws {
        try await self.expectRefused(Face(arcface([9])), gallery: "nowhere", .unknownGallery)
    }

    @Test func templatesNeverAppearInDescriptionsOrErrors() async throws {
        var values = signs([])
        values[0] = 0.123456
        let template = FaceTemplate(algorithm: 24, vector: values)
        #expect("\(template)" == "FaceTemplate(algorithm: 24, 128 values)")
        #expect(!"\(Face(template))".contains("0.12"))
        var dumped = ""
        dump(template, to: &dumped)
        #expect(!dumped.contains("0.12"))
        values[1] = .nan
        let error = await expectRegistryError(.invalidTemplate) {
            try await withEngine { engine in _ = try await engine.register(identifier: "x", face: Face(FaceTemplate(algorithm: 24, vector: values))) }
        }
        #expect(error.map { !"\($0)".contains("0.12") } == true)
    }
}
