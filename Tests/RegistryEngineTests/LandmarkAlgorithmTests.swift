import Glibc
import RegistryEngine
import SyntheticFaces
import Testing

@testable import RegistryModel

// MARK: - Fixtures

/// A synthetic frontal face in pixel coordinates, mirror-symmetric around the nose (x = 320).
/// Inter-eye distance (LEFT_EYE to RIGHT_EYE) is 80 px; bbox x 210...430, y 160...390, z -40...60.
private let syntheticFace: [(String, Float, Float, Float)] = [
    ("LEFT_EYE", 280, 200, -10),
    ("RIGHT_EYE", 360, 200, -10),
    ("LEFT_EYE_LEFT_CORNER", 260, 200, -5),
    ("LEFT_EYE_RIGHT_CORNER", 300, 200, -5),
    ("RIGHT_EYE_LEFT_CORNER", 340, 200, -5),
    ("RIGHT_EYE_RIGHT_CORNER", 380, 200, -5),
    ("LEFT_EYE_TOP_BOUNDARY", 280, 190, -8),
    ("LEFT_EYE_BOTTOM_BOUNDARY", 280, 210, -8),
    ("RIGHT_EYE_TOP_BOUNDARY", 360, 190, -8),
    ("RIGHT_EYE_BOTTOM_BOUNDARY", 360, 210, -8),
    ("NOSE_TIP", 320, 260, -40),
    ("MIDPOINT_BETWEEN_EYES", 320, 200, -15),
    ("NOSE_BOTTOM_CENTER", 320, 280, -25),
    ("NOSE_BOTTOM_LEFT", 300, 275, -15),
    ("NOSE_BOTTOM_RIGHT", 340, 275, -15),
    ("MOUTH_LEFT", 285, 320, -10),
    ("MOUTH_RIGHT", 355, 320, -10),
    ("UPPER_LIP", 320, 310, -15),
    ("LOWER_LIP", 320, 335, -14),
    ("MOUTH_CENTER", 320, 322, -12),
    ("RIGHT_OF_LEFT_EYEBROW", 300, 170, -10),
    ("LEFT_OF_LEFT_EYEBROW", 255, 175, -5),
    ("LEFT_OF_RIGHT_EYEBROW", 340, 170, -10),
    ("RIGHT_OF_RIGHT_EYEBROW", 385, 175, -5),
    ("CHIN_GNATHION", 320, 390, -10),
    ("LEFT_CHEEK_CENTER", 260, 280, 0),
    ("RIGHT_CHEEK_CENTER", 380, 280, 0),
    ("CHIN_LEFT_GONION", 240, 350, 20),
    ("CHIN_RIGHT_GONION", 400, 350, 20),
    ("FOREHEAD_GLABELLA", 320, 160, -12),
    ("LEFT_EAR_TRAGION", 210, 250, 60),
    ("RIGHT_EAR_TRAGION", 430, 250, 60),
]

private func face() -> [Landmark] {
    syntheticFace.map { Landmark(name: $0.0, x: $0.1, y: $0.2, z: $0.3) }
}

private func face(without names: Set<String>) -> [Landmark] {
    face().filter { !names.contains($0.name) }
}

private func face(only names: Set<String>) -> [Landmark] {
    face().filter { names.contains($0.name) }
}

/// Applies `change` to the landmark called `name`.
private func moving(_ name: String, in landmarks: [Landmark], _ change: (inout Landmark) -> Void) -> [Landmark] {
    landmarks.map { landmark in
        var landmark = landmark
        if landmark.name == name { change(&landmark) }
        return landmark
    }
}

private func dense(_ landmarks: [Landmark]) throws -> DenseLandmarks {
    try LandmarkAlgorithm.dense(from: landmarks)
}

private func slot(_ name: String) -> Int {
    LandmarkVocabulary.slot(of: name)!
}

private func weight(_ name: String) -> Float {
    LandmarkVocabulary.weights[slot(name)]
}

/// Mask with the given slots set.
private func mask(_ slots: some Sequence<Int>) -> UInt32 {
    slots.reduce(0) { $0 | (UInt32(1) << UInt32($1)) }
}

/// Pointer-level similarity over two normalised arrays.
private func similarity(_ maskA: UInt32, _ a: [Float], _ maskB: UInt32, _ b: [Float]) -> Float {
    a.withUnsafeBufferPointer { pa in
        b.withUnsafeBufferPointer { pb in
            LandmarkAlgorithm.similarity(maskA, pa.baseAddress!, maskB, pb.baseAddress!)
        }
    }
}

/// An arbitrary normalised-looking array: every slot filled with small deterministic values.
private func normalisedFixture() -> [Float] {
    (0..<LandmarkAlgorithm.floatsPerTemplate).map { Float(($0 * 37) % 23) / 23 - 0.5 }
}

/// The CoMa matcher's algorithm written independently, dictionary-based and in Double, for cross-checking the
/// dense implementation. The scale references follow the documented deterministic choice.
private func referenceSimilarity(_ first: [Landmark], _ second: [Landmark]) -> Double {
    func normalise(_ landmarks: [Landmark]) -> [String: (Double, Double, Double)] {
        let xs = landmarks.map { Double($0.x) }
        let ys = landmarks.map { Double($0.y) }
        let zs = landmarks.map { Double($0.z) }
        let cx = (xs.min()! + xs.max()!) / 2
        let cy = (ys.min()! + ys.max()!) / 2
        let cz = (zs.min()! + zs.max()!) / 2
        let byName = Dictionary(uniqueKeysWithValues: landmarks.map { ($0.name, $0) })
        let left = byName["LEFT_EYE"] ?? byName["LEFT_EYE_LEFT_CORNER"]
        let right = byName["RIGHT_EYE"] ?? byName["RIGHT_EYE_RIGHT_CORNER"]
        var scale = -1.0
        if let left, let right {
            scale = hypot(Double(right.x) - Double(left.x), Double(right.y) - Double(left.y))
        }
        if scale < 10 { scale = max(xs.max()! - xs.min()!, ys.max()! - ys.min()!) }
        if scale == 0 { scale = 1 }
        return byName.mapValues { ((Double($0.x) - cx) / scale, (Double($0.y) - cy) / scale, (Double($0.z) - cz) / scale) }
    }
    let weights = Dictionary(uniqueKeysWithValues: zip(LandmarkVocabulary.names, LandmarkVocabulary.weights.map(Double.init)))
    let n1 = normalise(first)
    let n2 = normalise(second)
    var sum = 0.0
    var total = 0.0
    var matched = 0
    for (name, p) in n1 {
        guard let q = n2[name] else { continue }
        let w = weights[name]!
        let dx = p.0 - q.0
        let dy = p.1 - q.1
        let dz = p.2 - q.2
        sum += w * (dx * dx + dy * dy + dz * dz).squareRoot()
        total += w
        matched += 1
    }
    guard matched >= 15 else { return 0 }
    return exp(-2.5 * sum / total)
}

// MARK: - Vocabulary

@Test("vocabulary is the matcher's 32-name weight table in order")
func vocabularyMatchesSeedTable() {
    #expect(LandmarkVocabulary.count == 32)
    #expect(LandmarkVocabulary.names.count == 32)
    #expect(LandmarkVocabulary.weights.count == 32)
    #expect(LandmarkVocabulary.names.first == "LEFT_EYE")
    #expect(LandmarkVocabulary.names.last == "RIGHT_EAR_TRAGION")
    #expect(LandmarkVocabulary.names == syntheticFace.map(\.0))
    #expect(Set(LandmarkVocabulary.names).count == 32)
    #expect(weight("NOSE_TIP") == 2.5)
    #expect(weight("MOUTH_CENTER") == 1.3)
    #expect(weight("FOREHEAD_GLABELLA") == 1.2)
    #expect(weight("LEFT_EAR_TRAGION") == 1.0)
    #expect(abs(LandmarkVocabulary.weights.reduce(0, +) - 53.4) < 1e-4)
    for (index, name) in LandmarkVocabulary.names.enumerated() {
        #expect(LandmarkVocabulary.slot(of: name) == index)
    }
    #expect(LandmarkVocabulary.slot(of: "left_eye") == nil)
    #expect(LandmarkVocabulary.slot(of: "NOSE") == nil)
    #expect(LandmarkAlgorithm.floatsPerTemplate == 96)
    #expect(LandmarkAlgorithm.minimumLandmarks == 15)
    #expect(LandmarkAlgorithm.decay == 2.5)
}

// MARK: - The matcher design's figures

@Test("identical normalised templates have similarity 1.0")
func figureZeroDistance() {
    let a = normalisedFixture()
    let all = UInt32.max
    #expect(similarity(all, a, all, a) == 1.0)
}

@Test("uniform normalised distance d gives exp(-2.5 d): 0.3 → 0.47, 0.5 → 0.29, 1.0 → 0.08")
func seedFigures() {
    let a = normalisedFixture()
    let all = UInt32.max
    for (d, seedFigure) in [(Float(0.3), Float(0.47)), (0.5, 0.29), (1.0, 0.08)] {
        // Every slot moved by exactly d (in z): the weighted mean distance is d whatever the weights.
        var b = a
        for slot in 0..<32 { b[3 * slot + 2] += d }
        let value = similarity(all, a, all, b)
        #expect(abs(value - seedFigure) < 0.005, "d = \(d): \(value)")
        #expect(abs(value - Float(exp(-2.5 * Double(d)))) < 1e-5, "d = \(d): \(value)")
        // Order of the arguments does not matter.
        #expect(similarity(all, b, all, a) == value)
    }
}

@Test("uniform distance over a partial shared set still gives exp(-2.5 d)")
func seedFigurePartialOverlap() {
    let a = normalisedFixture()
    var b = a
    // Distance 0.5 in a 3-4-5 triangle in x/y on every slot.
    for slot in 0..<32 {
        b[3 * slot] += 0.3
        b[3 * slot + 1] -= 0.4
    }
    let maskA = mask(0..<20)
    let maskB = mask(2..<32)  // 18 shared
    #expect(abs(similarity(maskA, a, maskB, b) - Float(exp(-1.25))) < 1e-5)
}

@Test("end to end on raw templates, similarity agrees with an independent implementation of the seed")
func endToEndAgreesWithReference() throws {
    var random = SeededRandom(seed: 0x9E37_79B9_7F4A_7C15)
    func jitter() -> Float {
        Float(random.uniform() * 2 - 1) * 12  // ±12 px
    }
    let original = face()
    for round in 0..<20 {
        var other = original.map { Landmark(name: $0.name, x: $0.x + jitter(), y: $0.y + jitter(), z: $0.z + jitter()) }
        if round % 3 == 1 { other.removeFirst(5) }  // a partial capture
        if round % 3 == 2 { other = other.filter { $0.name != "LEFT_EYE" && $0.name != "RIGHT_EYE" } }
        let expected = referenceSimilarity(original, other)
        let actual = LandmarkAlgorithm.similarity(try dense(original), try dense(other))
        #expect(abs(Double(actual) - expected) < 1e-5, "round \(round)")
        #expect(actual > 0 && actual < 1)
    }
}

@Test("end to end, moving one interior landmark gives exactly exp(-2.5 · w·δ/scale / Σw)")
func endToEndSingleLandmarkMove() throws {
    // MOUTH_CENTER is strictly inside the bounding box in every axis, so moving it by 8 px in z leaves the
    // centre and scale (80 px between the eyes) alone: its normalised distance is 8 / 80 = 0.1.
    let original = face()
    let moved = moving("MOUTH_CENTER", in: original) { $0.z += 8 }
    let expected = exp(-2.5 * 1.3 * 0.1 / 53.4)
    let actual = LandmarkAlgorithm.similarity(try dense(original), try dense(moved))
    #expect(abs(Double(actual) - expected) < 1e-6)
}

// MARK: - Invariance

@Test("translating and uniformly scaling the face leaves similarity at 1")
func translationAndScaleInvariance() throws {
    let original = try dense(face())
    // Scale factors keep the inter-eye distance ≥ 10 px (40 px at ×0.5, 240 px at ×3).
    let transforms: [(factor: Float, offset: (Float, Float, Float))] = [
        (1, (100, -50, 30)),
        (0.5, (0, 0, 0)),
        (3, (0, 0, 0)),
        (0.5, (-200, 640, 12.5)),
        (3, (1000, 1000, -1000)),
    ]
    for (factor, offset) in transforms {
        let transformed = face().map {
            Landmark(name: $0.name, x: $0.x * factor + offset.0, y: $0.y * factor + offset.1, z: $0.z * factor + offset.2)
        }
        let value = LandmarkAlgorithm.similarity(original, try dense(transformed))
        #expect(abs(value - 1) < 1e-5, "×\(factor) + \(offset): \(value)")
    }
}

@Test("normalised coordinates do not depend on the order landmarks were sent in")
func inputOrderIndependence() throws {
    let forward = try dense(face())
    let backward = try dense(face().reversed())
    #expect(forward == backward)
    #expect(LandmarkAlgorithm.normalised(forward) == LandmarkAlgorithm.normalised(backward))
}

// MARK: - Weights

@Test("a high-weight landmark (NOSE_TIP 2.5) moved costs more than a low-weight one (LEFT_EAR_TRAGION 1.0)")
func weightsApplied() throws {
    // Both landmarks are interior in y; a 16 px move in y is 16 / 80 = 0.2 normalised and changes neither
    // the bounding box nor the inter-ocular scale.
    let original = try dense(face())
    let noseMoved = try dense(moving("NOSE_TIP", in: face()) { $0.y += 16 })
    let earMoved = try dense(moving("LEFT_EAR_TRAGION", in: face()) { $0.y += 16 })

    let noseSimilarity = LandmarkAlgorithm.similarity(original, noseMoved)
    let earSimilarity = LandmarkAlgorithm.similarity(original, earMoved)
    #expect(noseSimilarity < earSimilarity)

    let totalWeight = 53.4  // sum of the matcher's 32 weights
    #expect(abs(Double(noseSimilarity) - exp(-2.5 * 2.5 * 0.2 / totalWeight)) < 1e-6)
    #expect(abs(Double(earSimilarity) - exp(-2.5 * 1.0 * 0.2 / totalWeight)) < 1e-6)
}

@Test("weights are taken over the shared set only")
func weightsOverSharedSet() {
    // Hand-built normalised arrays: slots 0..<16 shared, only NOSE_TIP (slot 10) differs, by 0.4.
    let a = normalisedFixture()
    var b = a
    b[3 * slot("NOSE_TIP") + 1] += 0.4
    let shared = mask(0..<16)
    let sharedWeight = LandmarkVocabulary.weights[0..<16].reduce(0, +)
    #expect(abs(sharedWeight - 30.1) < 1e-4)  // 19 (eyes) + 9.3 (nose) + 1.8 (MOUTH_LEFT)
    let expected = exp(-2.5 * 2.5 * 0.4 / 30.1)
    #expect(abs(Double(similarity(shared, a, UInt32.max, b)) - expected) < 1e-6)
}

// MARK: - Minimum shared landmarks

@Test("only 14 shared landmarks never matches, even with identical coordinates; 15 does")
func minimumSharedLandmarksNormalised() {
    let a = normalisedFixture()
    #expect(similarity(mask(0..<18), a, mask(4..<32), a) == 0)  // 14 shared
    #expect(similarity(mask(0..<18), a, mask(3..<32), a) == 1)  // 15 shared
    #expect(similarity(mask(0..<14), a, mask(0..<14), a) == 0)
}

@Test("raw templates with ≥ 15 landmarks each but only 14 in common score 0; 15 in common score > 0")
func minimumSharedLandmarksRaw() throws {
    let names = LandmarkVocabulary.names
    let first = try dense(face(only: Set(names[0..<18])))  // 18 landmarks
    let second14 = try dense(face(only: Set(names[4..<32])))  // 28 landmarks, 14 shared
    let second15 = try dense(face(only: Set(names[3..<32])))  // 29 landmarks, 15 shared
    #expect(LandmarkAlgorithm.similarity(first, second14) == 0)
    #expect(LandmarkAlgorithm.similarity(first, second15) > 0)
}

// MARK: - Validation

@Test("an unknown landmark name is refused by name")
func validationUnknownName() {
    let landmarks = face() + [Landmark(name: "LEFT_EAR_LOBE", x: 1, y: 2, z: 3)]
    #expect(throws: TemplateProblem.unknownLandmark(name: "LEFT_EAR_LOBE")) { try LandmarkAlgorithm.dense(from: landmarks) }
    let lowercase = moving("NOSE_TIP", in: face()) { $0.name = "nose_tip" }
    #expect(throws: TemplateProblem.unknownLandmark(name: "nose_tip")) { try LandmarkAlgorithm.dense(from: lowercase) }
}

@Test("a repeated landmark name is refused by name")
func validationDuplicateName() {
    let landmarks = face() + [Landmark(name: "NOSE_TIP", x: 320, y: 260, z: -40)]
    #expect(throws: TemplateProblem.duplicateLandmark(name: "NOSE_TIP")) { try LandmarkAlgorithm.dense(from: landmarks) }
}

@Test("a NaN coordinate is refused with its index 3·position + axis")
func validationNaN() {
    var landmarks = face()
    landmarks[5].y = .nan
    #expect(throws: TemplateProblem.nonFiniteValue(index: 16)) { try LandmarkAlgorithm.dense(from: landmarks) }
}

@Test("an infinite coordinate is refused with its index 3·position + axis")
func validationInfinity() {
    var landmarks = face()
    landmarks[0].z = .infinity
    #expect(throws: TemplateProblem.nonFiniteValue(index: 2)) { try LandmarkAlgorithm.dense(from: landmarks) }
    landmarks = face()
    landmarks[31].x = -.infinity
    #expect(throws: TemplateProblem.nonFiniteValue(index: 93)) { try LandmarkAlgorithm.dense(from: landmarks) }
}

@Test("14 landmarks are refused as too few; 15 are accepted")
func validationTooFew() throws {
    let fourteen = Array(face().prefix(14))
    #expect(throws: TemplateProblem.tooFewLandmarks(count: 14, minimum: 15)) { try LandmarkAlgorithm.dense(from: fourteen) }
    #expect(throws: TemplateProblem.tooFewLandmarks(count: 0, minimum: 15)) { try LandmarkAlgorithm.dense(from: []) }
    let fifteen = try dense(Array(face().prefix(15)))
    #expect(fifteen.count == 15)
    #expect(fifteen.mask == 0x7FFF)
}

@Test("validation problems are reported in priority order: unknown, duplicate, non-finite, too few")
func validationOrder() {
    // Ten landmarks (too few), one NaN first, a duplicate, then an unknown name at the end.
    var landmarks = Array(face().prefix(10))
    landmarks[0].x = .nan
    landmarks.append(landmarks[3])
    #expect(throws: TemplateProblem.duplicateLandmark(name: "LEFT_EYE_RIGHT_CORNER")) { try LandmarkAlgorithm.dense(from: landmarks) }
    landmarks.append(Landmark(name: "TOOTH", x: 0, y: 0, z: 0))
    #expect(throws: TemplateProblem.unknownLandmark(name: "TOOTH")) { try LandmarkAlgorithm.dense(from: landmarks) }
    let nanAndFew = {
        var l = Array(face().prefix(10))
        l[9].z = .nan
        return l
    }()
    #expect(throws: TemplateProblem.nonFiniteValue(index: 29)) { try LandmarkAlgorithm.dense(from: nanAndFew) }
}

@Test("the dense form keeps raw coordinates in vocabulary slots, zeros elsewhere")
func denseLayout() throws {
    let template = try dense(face(without: ["LEFT_EYE", "CHIN_GNATHION"]))
    #expect(template.count == 30)
    #expect(template.coordinates.count == 96)
    #expect(template.mask == UInt32.max & ~mask([slot("LEFT_EYE"), slot("CHIN_GNATHION")]))
    let nose = slot("NOSE_TIP")
    #expect(Array(template.coordinates[3 * nose..<3 * nose + 3]) == [320, 260, -40])
    let chin = slot("CHIN_GNATHION")
    #expect(Array(template.coordinates[3 * chin..<3 * chin + 3]) == [0, 0, 0])
}

// MARK: - Normalisation and scale fallback

private func expectNormalised(
    _ normalised: [Float], _ name: String, _ expected: (Double, Double, Double),
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let s = slot(name)
    let actual = (Double(normalised[3 * s]), Double(normalised[3 * s + 1]), Double(normalised[3 * s + 2]))
    #expect(abs(actual.0 - expected.0) < 1e-6, "\(name).x", sourceLocation: sourceLocation)
    #expect(abs(actual.1 - expected.1) < 1e-6, "\(name).y", sourceLocation: sourceLocation)
    #expect(abs(actual.2 - expected.2) < 1e-6, "\(name).z", sourceLocation: sourceLocation)
}

@Test("normalisation: bbox centre and LEFT_EYE–RIGHT_EYE scale (80 px)")
func normaliseFullFace() throws {
    // Centre (320, 275, 10), scale 80.
    let n = LandmarkAlgorithm.normalised(try dense(face()))
    expectNormalised(n, "NOSE_TIP", (0, -15.0 / 80, -50.0 / 80))
    expectNormalised(n, "LEFT_EAR_TRAGION", (-110.0 / 80, -25.0 / 80, 50.0 / 80))
    expectNormalised(n, "LEFT_EYE", (-0.5, -75.0 / 80, -20.0 / 80))
}

@Test("with LEFT_EYE absent, LEFT_EYE_LEFT_CORNER is the left scale reference")
func normaliseLeftCornerFallback() throws {
    // LEFT_EYE_LEFT_CORNER (260, 200) to RIGHT_EYE (360, 200): scale 100; bbox and centre unchanged.
    let n = LandmarkAlgorithm.normalised(try dense(face(without: ["LEFT_EYE"])))
    expectNormalised(n, "NOSE_TIP", (0, -0.15, -0.5))
    expectNormalised(n, "RIGHT_EAR_TRAGION", (1.1, -0.25, 0.5))
    expectNormalised(n, "LEFT_EYE", (0, 0, 0))  // absent slot stays zero
}

@Test("with both eye centres absent, the outer eye corners are the scale references")
func normaliseBothCornersFallback() throws {
    // LEFT_EYE_LEFT_CORNER (260) to RIGHT_EYE_RIGHT_CORNER (380): scale 120.
    let n = LandmarkAlgorithm.normalised(try dense(face(without: ["LEFT_EYE", "RIGHT_EYE"])))
    expectNormalised(n, "NOSE_TIP", (0, -15.0 / 120, -50.0 / 120))
}

@Test("with no left eye reference at all, scale is the bbox's larger x/y extent")
func normaliseNoReferenceFallback() throws {
    // bbox 220 wide, 230 tall: scale 230.
    let n = LandmarkAlgorithm.normalised(try dense(face(without: ["LEFT_EYE", "LEFT_EYE_LEFT_CORNER"])))
    expectNormalised(n, "NOSE_TIP", (0, -15.0 / 230, -50.0 / 230))
}

@Test("an inter-eye distance below 10 falls back to the bbox's larger x/y extent")
func normaliseSmallInterOcularFallback() throws {
    // The face at a tenth of the size: eyes 8 apart (< 10), bbox 22 × 23 → scale 23, centre (32, 27.5, 1).
    let tiny = face().map { Landmark(name: $0.name, x: $0.x / 10, y: $0.y / 10, z: $0.z / 10) }
    let n = LandmarkAlgorithm.normalised(try dense(tiny))
    expectNormalised(n, "NOSE_TIP", (0, -1.5 / 23, -5.0 / 23))
    expectNormalised(n, "CHIN_GNATHION", (0, 11.5 / 23, -2.0 / 23))
}

@Test("a degenerate face with zero x/y extent uses scale 1")
func normaliseZeroScale() throws {
    let flat = face().prefix(15).enumerated().map { Landmark(name: $0.element.name, x: 5, y: 7, z: Float($0.offset)) }
    let n = LandmarkAlgorithm.normalised(try dense(flat))
    // z from 0 to 14: centre 7, scale 1.
    expectNormalised(n, "LEFT_EYE", (0, 0, -7))
    expectNormalised(n, "NOSE_BOTTOM_RIGHT", (0, 0, 7))
}

@Test("the pointer form of normalise overwrites every output float")
func normalisePointerOverwrites() throws {
    let template = try dense(face(without: ["NOSE_TIP"]))
    var output = [Float](repeating: .nan, count: LandmarkAlgorithm.floatsPerTemplate)
    template.coordinates.withUnsafeBufferPointer { raw in
        output.withUnsafeMutableBufferPointer { out in
            LandmarkAlgorithm.normalise(mask: template.mask, raw: raw.baseAddress!, into: out.baseAddress!)
        }
    }
    #expect(output.allSatisfy { $0.isFinite })
    #expect(output == LandmarkAlgorithm.normalised(template))
    let nose = slot("NOSE_TIP")
    #expect(Array(output[3 * nose..<3 * nose + 3]) == [0, 0, 0])
}

// MARK: - Quality

@Test("quality: a symmetric full face scores 1.0")
func qualitySymmetricFullFace() throws {
    #expect(abs(LandmarkAlgorithm.quality(try dense(face())) - 1.0) < 1e-6)
}

@Test("quality: 15 symmetric landmarks score 0.6 + 0.4 · 0.5 = 0.8")
func qualityFifteenLandmarks() throws {
    let fifteen = face(only: [
        "NOSE_TIP", "LEFT_EYE", "RIGHT_EYE", "LEFT_EYE_LEFT_CORNER", "RIGHT_EYE_RIGHT_CORNER",
        "MOUTH_LEFT", "MOUTH_RIGHT", "LEFT_CHEEK_CENTER", "RIGHT_CHEEK_CENTER",
        "MIDPOINT_BETWEEN_EYES", "UPPER_LIP", "LOWER_LIP", "CHIN_GNATHION", "CHIN_LEFT_GONION", "CHIN_RIGHT_GONION",
    ])
    #expect(fifteen.count == 15)
    #expect(abs(LandmarkAlgorithm.quality(try dense(fifteen)) - 0.8) < 1e-6)
}

@Test("quality: an asymmetric face loses the computed amount")
func qualityAsymmetric() throws {
    // RIGHT_EYE 10 px further from the nose: that pair scores 1 - 10/50 = 0.8, symmetry (0.8 + 3) / 4 = 0.95,
    // quality 0.95 · 0.6 + 0.4 = 0.97.
    let asymmetric = moving("RIGHT_EYE", in: face()) { $0.x += 10 }
    #expect(abs(LandmarkAlgorithm.quality(try dense(asymmetric)) - 0.97) < 1e-6)
    // Also both mouth corners 35 px to the left: MOUTH_LEFT is 70 px from the nose, MOUTH_RIGHT 0 → pair 0;
    // symmetry (0.8 + 1 + 0 + 1) / 4 = 0.7, quality 0.7 · 0.6 + 0.4 = 0.82.
    let worse = moving("MOUTH_RIGHT", in: moving("MOUTH_LEFT", in: asymmetric) { $0.x -= 35 }) { $0.x -= 35 }
    #expect(abs(LandmarkAlgorithm.quality(try dense(worse)) - 0.82) < 1e-6)
}

@Test("quality: no NOSE_TIP scores 0.5")
func qualityNoNoseTip() throws {
    #expect(LandmarkAlgorithm.quality(try dense(face(without: ["NOSE_TIP"]))) == 0.5)
}

@Test("quality: no symmetry pair present uses symmetry 0.5")
func qualityNoPairs() throws {
    let withoutPairs = face(without: [
        "LEFT_EYE", "RIGHT_EYE", "LEFT_EYE_LEFT_CORNER", "RIGHT_EYE_RIGHT_CORNER",
        "MOUTH_LEFT", "MOUTH_RIGHT", "LEFT_CHEEK_CENTER", "RIGHT_CHEEK_CENTER",
    ])
    // 24 landmarks: 0.5 · 0.6 + (24 / 30) · 0.4 = 0.62.
    #expect(abs(LandmarkAlgorithm.quality(try dense(withoutPairs)) - 0.62) < 1e-6)
}

@Test("quality: fewer than 10 landmarks scores 0")
func qualityTooFew() throws {
    // dense(from:) refuses fewer than 15, so build a stored-form template directly.
    let full = try dense(face())
    let nine = DenseLandmarks(mask: mask(0..<9), coordinates: full.coordinates)
    #expect(LandmarkAlgorithm.quality(nine) == 0)
    let ten = DenseLandmarks(mask: mask(0..<10), coordinates: full.coordinates)
    #expect(LandmarkAlgorithm.quality(ten) == 0.5)  // ten landmarks, but no NOSE_TIP (slot 10)
}
