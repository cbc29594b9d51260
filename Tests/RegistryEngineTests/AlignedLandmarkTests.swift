import CScanKernels
import Glibc
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// The aligned landmark algorithm (version 1001): alignment, invariances, symmetry, flat landmarks,
/// validation, and the scan through the engine.
@Suite struct AlignedLandmarkTests {
    typealias Point = (x: Double, y: Double, z: Double)

    /// A synthetic person's frontal capture without noise: exact coordinates.
    static func exactCapture(seed: UInt64, _ pose: SyntheticFaces.Pose = .init(noise: 0, depthNoise: 0)) -> [Landmark] {
        var random = SeededRandom(seed: seed)
        let person = SyntheticFaces.person(&random)
        return SyntheticFaces.capture(person, pose, &random)
    }

    static func dense(_ landmarks: [Landmark]) throws -> DenseLandmarks {
        try LandmarkAlgorithm.dense(from: landmarks)
    }

    /// `landmarks` moved by scale · R · p + t, R = rotation(yaw, pitch, roll).
    static func moved(_ landmarks: [Landmark], yaw: Double, pitch: Double, roll: Double, scale: Double, by t: Point) -> [Landmark] {
        let r = SyntheticFaces.rotation(yaw: yaw, pitch: pitch, roll: roll)
        return landmarks.map { landmark in
            let p = SIMD3(Double(landmark.x), Double(landmark.y), Double(landmark.z))
            let q = (r.0 * p.x + r.1 * p.y + r.2 * p.z) * scale + SIMD3(t.x, t.y, t.z)
            return Landmark(name: landmark.name, x: Float(q.x), y: Float(q.y), z: Float(q.z))
        }
    }

    static func similarity(_ a: [Landmark], _ b: [Landmark]) throws -> Float {
        LandmarkMatcher.aligned.similarity(try dense(a), try dense(b))
    }

    @Test("alignment recovers a known rotation, translation and scale from noise-free landmarks")
    func alignmentRecoversTheTransform() throws {
        let stored = Self.exactCapture(seed: 11)
        for (yaw, pitch, roll, scale) in [(20.0, -10.0, 7.0, 0.6), (-35, 15, -20, 1.7), (0, 0, 90, 1), (170, 0, 0, 2.5)] {
            let t: Point = (-250, 80, 400)
            let query = Self.moved(stored, yaw: yaw, pitch: pitch, roll: roll, scale: scale, by: t)
            let alignment = try #require(AlignedLandmarkAlgorithm.alignment(of: try Self.dense(query), onto: try Self.dense(stored)))
            // The inverse transform: R⁻¹ = Rᵀ, scale 1/s, translation −Rᵀt/s.
            let r = SyntheticFaces.rotation(yaw: yaw, pitch: pitch, roll: roll)
            let expected = [r.0.x, r.0.y, r.0.z, r.1.x, r.1.y, r.1.z, r.2.x, r.2.y, r.2.z]  // rows of Rᵀ = columns of R
            for (found, wanted) in zip(alignment.rotation, expected) { #expect(abs(found - wanted) < 1e-5) }
            #expect(abs(alignment.scale - 1 / scale) < 1e-5 / scale)
            for (q, s) in zip(query, stored) {
                let p = alignment.apply((Double(q.x), Double(q.y), Double(q.z)))
                // f32 inputs a few hundred px large: agreement to a thousandth of a pixel.
                #expect(abs(p.x - Double(s.x)) < 1e-3 && abs(p.y - Double(s.y)) < 1e-3 && abs(p.z - Double(s.z)) < 1e-3)
            }
            #expect(alignment.distance < 1e-5)
            #expect(try Self.similarity(query, stored) > 0.9999)
        }
    }

    @Test("the score does not change under rigid motion and uniform scale of either side")
    func invariantToPoseAndSize() throws {
        var random = SeededRandom(seed: 5)
        for _ in 0..<20 {
            let alice = SyntheticFaces.capture(SyntheticFaces.person(&random), .frontal, &random)
            let bob = SyntheticFaces.capture(SyntheticFaces.person(&random), .frontal, &random)
            let before = try Self.similarity(alice, bob)
            let angles = (random.uniform() * 360, random.uniform() * 180 - 90, random.uniform() * 360)
            let scale = 0.3 + 3 * random.uniform()
            let t: Point = (random.uniform() * 1000, random.uniform() * 1000, random.uniform() * 100)
            let movedAlice = Self.moved(alice, yaw: angles.0, pitch: angles.1, roll: angles.2, scale: scale, by: t)
            let movedBob = Self.moved(bob, yaw: angles.2, pitch: -angles.1, roll: angles.0, scale: 1 / scale, by: t)
            #expect(abs(try Self.similarity(movedAlice, bob) - before) < 1e-5)
            #expect(abs(try Self.similarity(alice, movedBob) - before) < 1e-5)
            #expect(abs(try Self.similarity(movedAlice, movedBob) - before) < 1e-5)
        }
    }

    @Test("the score is symmetric (to 1e-6) and independent of landmark order (bit for bit), also with partial and flat templates")
    func symmetricAndOrderFree() throws {
        var random = SeededRandom(seed: 9)
        for trial in 0..<200 {
            let pose = SyntheticFaces.Pose(
                yaw: random.uniform() * 40 - 20, pitch: random.uniform() * 30 - 15, missing: trial % 3 == 0 ? 8 : 0, flat: trial % 5 == 0)
            let a = SyntheticFaces.capture(SyntheticFaces.person(&random), .frontal, &random)
            let b = SyntheticFaces.capture(SyntheticFaces.person(&random), pose, &random)
            let ab = try Self.similarity(a, b)
            let ba = try Self.similarity(b, a)
            #expect(abs(ab - ba) <= 1e-6)
            var shuffled = b
            for index in shuffled.indices.reversed() { shuffled.swapAt(index, Int(random.next() % UInt64(index + 1))) }
            #expect(try Self.similarity(a, shuffled).bitPattern == ab.bitPattern)
        }
    }

    @Test("λ is the largest trace(R·M) over rotations: no random rotation beats it, the eigenvector's rotation reaches it")
    func lambdaIsTheMaximumOverRotations() throws {
        var random = SeededRandom(seed: 3)
        for _ in 0..<50 {
            let m = AlignedLandmarkAlgorithm.Matrix3(
                xx: random.gaussian(), xy: random.gaussian(), xz: random.gaussian(), yx: random.gaussian(), yy: random.gaussian(),
                yz: random.gaussian(), zx: random.gaussian(), zy: random.gaussian(), zz: random.gaussian())
            // Scale M so that λ ≤ 1 as for unit-spread point sets (‖M‖ bounds the largest singular values' sum / √3).
            let norm =
                (m.xx * m.xx + m.xy * m.xy + m.xz * m.xz + m.yx * m.yx + m.yy * m.yy + m.yz * m.yz + m.zx * m.zx + m.zy * m.zy
                + m.zz * m.zz).squareRoot() * 3.0.squareRoot()
            let n = AlignedLandmarkAlgorithm.Matrix3(
                xx: m.xx / norm, xy: m.xy / norm, xz: m.xz / norm, yx: m.yx / norm, yy: m.yy / norm, yz: m.yz / norm, zx: m.zx / norm,
                zy: m.zy / norm, zz: m.zz / norm)
            let entries = [n.xx, n.xy, n.xz, n.yx, n.yy, n.yz, n.zx, n.zy, n.zz]
            func trace(_ r: [Double]) -> Double {
                var sum = 0.0
                for i in 0..<3 {
                    for j in 0..<3 { sum += r[3 * i + j] * entries[3 * j + i] }
                }
                return sum
            }
            let lambda = try #require(AlignedLandmarkAlgorithm.spatialLambda(n))
            for _ in 0..<200 {
                let r = SyntheticFaces.rotation(yaw: random.uniform() * 360, pitch: random.uniform() * 360, roll: random.uniform() * 360)
                #expect(trace([r.0.x, r.1.x, r.2.x, r.0.y, r.1.y, r.2.y, r.0.z, r.1.z, r.2.z]) <= lambda + 1e-12)
            }
            let best = AlignedLandmarkAlgorithm.rotationMatrix(
                quaternion: AlignedLandmarkAlgorithm.topEigenvector(AlignedLandmarkAlgorithm.hornMatrix(n), lambda))
            #expect(abs(trace(best) - lambda) < 1e-9)
        }
    }

    @Test("2-D landmarks: roll, position and size are undone in the image plane; a mirror image does not match")
    func flatLandmarks() throws {
        let flat = Self.exactCapture(seed: 21, .init(noise: 0, depthNoise: 0, flat: true))
        let rolled = Self.moved(flat, yaw: 0, pitch: 0, roll: 25, scale: 1.3, by: (40, -60, 0))
        #expect(try Self.similarity(flat, rolled) > 0.9999)
        // Turning a flat set over (180° about the vertical axis) is its mirror image: no 3-D rotation
        // may be used to match it.
        let mirrored = flat.map { Landmark(name: $0.name, x: 640 - $0.x, y: $0.y, z: 0) }
        #expect(try Self.similarity(flat, mirrored) < 0.65)
        // A 2-D query against a 3-D template compares x and y: the frontal query matches.
        let spatial = Self.exactCapture(seed: 21)
        #expect(try Self.similarity(flat, spatial) > 0.9999)
    }

    @Test("too few shared landmarks or a degenerate template score 0")
    func degenerateInputsScoreZero() throws {
        let full = Self.exactCapture(seed: 4)
        let first = Array(full.prefix(16))
        let last = Array(full.suffix(16))  // 0 shared with `first`
        #expect(try Self.similarity(first, last) == 0)
        let point = full.map { Landmark(name: $0.name, x: 5, y: 5, z: 5) }
        #expect(try Self.similarity(point, full) == 0)
        #expect(try Self.similarity(full, full) > 0.9999)
    }

    @Test("a different person scores below a genuine capture in a turned pose")
    func genuineAboveImpostor() throws {
        var random = SeededRandom(seed: 77)
        let alice = SyntheticFaces.person(&random)
        let bob = SyntheticFaces.person(&random)
        let enrolled = SyntheticFaces.capture(alice, .frontal, &random)
        let turned = SyntheticFaces.capture(alice, .init(yaw: 20, pitch: 10), &random)
        let other = SyntheticFaces.capture(bob, .init(yaw: 20, pitch: 10), &random)
        let genuine = try Self.similarity(turned, enrolled)
        #expect(genuine >= Algorithm.alignedLandmarks.defaultThreshold)
        #expect(try Self.similarity(other, enrolled) < genuine)
        // Version 1000 does not undo the turn.
        #expect(LandmarkMatcher.coma.similarity(try Self.dense(turned), try Self.dense(enrolled)) < Algorithm.landmarks.defaultThreshold)
    }

    /// Version 1000's scores, pinned bit for bit: adding the aligned algorithm must not move them.
    @Test("version 1000 scores are unchanged")
    func comaScoresArePinned() throws {
        var random = SeededRandom(seed: 1000)
        var bits: [UInt32] = []
        let alice = SyntheticFaces.person(&random)
        let enrolled = SyntheticFaces.capture(alice, .frontal, &random)
        for pose in [SyntheticFaces.Pose.frontal, .init(yaw: 10), .init(missing: 6), .init(flat: true)] {
            let query = SyntheticFaces.capture(alice, pose, &random)
            bits.append(LandmarkMatcher.coma.similarity(try Self.dense(query), try Self.dense(enrolled)).bitPattern)
            #expect(
                LandmarkMatcher.coma.similarity(try Self.dense(query), try Self.dense(enrolled))
                    == LandmarkAlgorithm.similarity(try Self.dense(query), try Self.dense(enrolled)))
        }
        #expect(bits == Self.pinnedComaBits)
    }

    // Computed with LandmarkAlgorithm.swift as it was before version 1001 existed (the file is unchanged).
    static let pinnedComaBits: [UInt32] = [1_064_412_424, 1_057_931_721, 1_064_242_618, 1_048_826_446]

    @Test("every kernel level computes the model's moments to the last bit")
    func kernelLevelsMatchTheReference() throws {
        var random = SeededRandom(seed: 12)
        let count = 300
        var rows = [Float](repeating: 0, count: count * LandmarkAlgorithm.floatsPerTemplate)
        var masks: [UInt32] = []
        for index in 0..<count {
            let pose = SyntheticFaces.Pose(yaw: random.uniform() * 40 - 20, missing: index % 4 == 0 ? 9 : 0, flat: index % 7 == 0)
            let dense = try Self.dense(SyntheticFaces.capture(SyntheticFaces.person(&random), pose, &random))
            let row = LandmarkMatcher.aligned.prepared(dense)
            rows.replaceSubrange(index * 96..<(index + 1) * 96, with: row)
            masks.append(dense.mask)
        }
        let perRow = AlignedLandmarkAlgorithm.momentCount
        rows.withUnsafeBufferPointer { rowBuffer in
            let base = rowBuffer.baseAddress!
            for queryIndex in [0, 4, 7, 100] {
                AlignedLandmarkAlgorithm.withQuery(masks[queryIndex], base + queryIndex * 96) { query in
                    var expected = [Double](repeating: 0, count: count * perRow)
                    expected.withUnsafeMutableBufferPointer { out in
                        for row in 0..<count { AlignedLandmarkAlgorithm.moments(query, base + row * 96, into: out.baseAddress! + row * perRow) }
                    }
                    for level in Int32(RK_LEVEL_SCALAR)...rk_supported_level() {
                        var actual = [Double](repeating: .nan, count: count * perRow)
                        rk_landmark_moments(level, query.lanes, base, 96, count, &actual)
                        for row in 0..<count {
                            for i in 0..<perRow where i % 4 != 3 {
                                #expect(actual[row * perRow + i].bitPattern == expected[row * perRow + i].bitPattern, "level \(level)")
                            }
                        }
                    }
                }
            }
        }
    }

    @Test("identify over the engine equals the model's scores pair by pair, the early stop below the cut-off included")
    func identifyEqualsPairwiseScores() async throws {
        try await withEngine { engine in
            let aligned = Algorithm.alignedLandmarks.version
            let low = Thresholds(authentication: 0.3, identification: 0.3, autoEnrolment: 1)
            _ = try await engine.defineGallery(
                GalleryConfiguration(name: "aligned", registries: [RegistryConfiguration(algorithm: aligned, thresholds: low)]))
            var random = SeededRandom(seed: 41)
            var stored: [DenseLandmarks] = []
            var items: [ImportItem] = []
            for index in 0..<3000 {
                let landmarks = SyntheticFaces.capture(SyntheticFaces.person(&random), .init(missing: index % 3 == 0 ? 5 : 0), &random)
                stored.append(try Self.dense(landmarks))
                items.append(ImportItem(identifier: "p\(index)", template: FaceTemplate(algorithm: aligned, landmarks: landmarks)))
            }
            _ = try await engine.importTemplates(gallery: "aligned", items)
            for query in 0..<6 {
                let landmarks = SyntheticFaces.capture(SyntheticFaces.person(&random), .init(yaw: 15), &random)
                let dense = try Self.dense(landmarks)
                for limit in [nil, 5] as [Int?] {
                    let found = try await engine.identify(
                        gallery: "aligned", face: Face(FaceTemplate(algorithm: aligned, landmarks: landmarks)), autoEnrol: false, limit: limit)
                    let expected = stored.enumerated().map {
                        (identifier: "p\($0.offset)", score: LandmarkMatcher.aligned.similarity(dense, $0.element))
                    }
                    .filter { $0.score >= 0.3 }.sorted { $0.score > $1.score }
                    let wanted = limit.map { Array(expected.prefix($0)) } ?? expected
                    #expect(found.matches.map(\.identifier) == wanted.map(\.identifier), "query \(query)")
                    #expect(found.matches.map(\.score) == wanted.map(\.score), "query \(query)")
                }
            }
        }
    }

    @Test("a reopened store prepares the same rows: the same scores, and verify finds nothing")
    func survivesAReopen() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let aligned = Algorithm.alignedLandmarks.version
        var random = SeededRandom(seed: 8)
        let people = (0..<30).map { _ in SyntheticFaces.person(&random) }
        let query = Face(FaceTemplate(algorithm: aligned, landmarks: SyntheticFaces.capture(people[3], .init(yaw: 12, missing: 4), &random)))
        var engine = try Engine(path: directory.path)
        _ = try await engine.defineGallery(
            GalleryConfiguration(
                name: "aligned",
                registries: [RegistryConfiguration(algorithm: Algorithm.landmarks.version), RegistryConfiguration(algorithm: aligned)]))
        for (index, person) in people.enumerated() {
            let landmarks = SyntheticFaces.capture(person, .init(missing: index % 2 == 0 ? 3 : 0), &random)
            _ = try await engine.register(
                gallery: "aligned", identifier: "p\(index)",
                face: Face(
                    FaceTemplate(algorithm: Algorithm.landmarks.version, landmarks: landmarks), FaceTemplate(algorithm: aligned, landmarks: landmarks)
                ),
                force: true)
        }
        let before = try await engine.identify(gallery: "aligned", face: query, autoEnrol: false)
        #expect(before.algorithm == aligned && before.matches.first?.identifier == "p3")
        #expect(try await engine.verify().problems.isEmpty)
        engine.close()

        engine = try Engine(path: directory.path)
        defer { engine.close() }
        let after = try await engine.identify(gallery: "aligned", face: query, autoEnrol: false)
        #expect(after.matches == before.matches)
        #expect(try await engine.verify().problems.isEmpty)
        let gallery = engine.galleries().first { $0.name == "aligned" }
        let kinds: [TemplateKind]? = gallery?.registries.map { $0.algorithm.kind }
        #expect(kinds == [.landmarks(.coma), .landmarks(.aligned)])
    }

    @Test("validation errors are those of version 1000, and identify over the engine finds the turned face")
    func throughTheEngine() async throws {
        try await withEngine { engine in
            let aligned = Algorithm.alignedLandmarks.version
            _ = try await engine.defineGallery(GalleryConfiguration(name: "aligned", registries: [RegistryConfiguration(algorithm: aligned)]))
            var random = SeededRandom(seed: 31)
            let people = (0..<40).map { _ in SyntheticFaces.person(&random) }
            for (index, person) in people.enumerated() {
                let template = FaceTemplate(algorithm: aligned, landmarks: SyntheticFaces.capture(person, .frontal, &random))
                _ = try await engine.importTemplates(gallery: "aligned", [ImportItem(identifier: "p\(index)", template: template)])
            }
            let turned = SyntheticFaces.capture(people[17], .init(yaw: -18, pitch: 12), &random)
            let found = try await engine.identify(
                gallery: "aligned", face: Face(FaceTemplate(algorithm: aligned, landmarks: turned)), autoEnrol: false)
            #expect(found.matches.first?.identifier == "p17")
            #expect(found.algorithm == aligned)

            var bad = turned
            bad[3].name = "THIRD_EYE"
            var duplicate = turned
            duplicate[7].name = duplicate[6].name
            var infinite = turned
            infinite[2].z = .infinity
            let cases: [([Landmark], TemplateProblem)] = [
                (bad, .unknownLandmark(name: "THIRD_EYE")), (duplicate, .duplicateLandmark(name: turned[6].name)),
                (infinite, .nonFiniteValue(index: 8)), (Array(turned.prefix(14)), .tooFewLandmarks(count: 14, minimum: 15)),
            ]
            for (landmarks, problem) in cases {
                for version in [Algorithm.landmarks.version, aligned] {
                    #expect(throws: problem) { _ = try LandmarkAlgorithm.dense(from: landmarks) }
                    let error = await expectRegistryError(.invalidTemplate) {
                        _ = try await engine.register(
                            gallery: version == aligned ? "aligned" : "default", identifier: "x",
                            face: Face(FaceTemplate(algorithm: version, landmarks: landmarks)))
                    }
                    guard case .invalidTemplate(let algorithm, let actual) = error?.details else {
                        Issue.record("no template problem")
                        continue
                    }
                    #expect(actual == problem && algorithm == version)
                }
            }
        }
    }
}
