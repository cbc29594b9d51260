import ArgumentParser
import Glibc
import RegistryEngine
import RegistryModel

/// Identification over landmark templates (the CoMa landmark matcher's weighted 3-D distance). Generates random
/// faces, registers them in a temporary store, writes their normalised rows for tools/bench's numpy
/// implementation of the same algorithm, then times identify per query.
///
/// Files in --out: rows.f32 (N × 96: 32 slots × x, y, z, normalised), masks.u32 (N; bit s = slot s
/// present), queries.f32 / qmasks.u32 (the same for the queries), weights.f32 (32), params.json.
struct LandmarkBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "landmarks", abstract: "Identify over generated landmark templates; writes the rows for the numpy anchor.")

    @Option(help: "Templates to generate and register.")
    var count: Int
    @Option(name: .customLong("queries"), help: "Queries to time.")
    var queryCount: Int = 20
    @Option(help: "Matches per query.")
    var k: Int = 10
    @Option(help: "Directory for the rows, masks, queries, weights and parameters.")
    var out: String
    @Option(help: "The landmark algorithm to identify with: landmarks (1000) or landmarks-aligned (1001); the files always hold version 1000's rows.")
    var algorithm = Algorithm.landmarks.name

    func validate() throws {
        guard self.count > 0, self.queryCount > 0, self.k > 0 else { throw ValidationError("--count, --queries and --k must be positive") }
        guard let algorithm = Algorithm.builtIn.first(where: { $0.name == self.algorithm }), case .landmarks = algorithm.kind else {
            throw ValidationError("--algorithm must name a landmark algorithm")
        }
    }

    func run() async throws {
        let count = self.count
        let queryCount = self.queryCount
        let k = self.k
        let out = self.out
        mkdir(out, 0o755)
        var random = Random(state: 7)
        let faces = (0..<count).map { _ in Self.face(&random) }
        // Half the queries are stored faces moved a little, half new faces.
        let queries = (0..<queryCount).map { q in
            q % 2 == 0 ? Self.jitter(faces[(q * 7919) % count], &random) : Self.face(&random)
        }

        var template = Array("/tmp/registry-bench-landmarks-XXXXXX".utf8CString)
        _ = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let directory = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { _ = system("rm -rf '\(directory)'") }
        let engine = try Engine(path: directory)
        defer { engine.close() }
        let zero = Thresholds(authentication: 1e-6, identification: 1e-6, autoEnrolment: 1)
        let version = Algorithm.builtIn.first { $0.name == self.algorithm }!.version
        _ = try await engine.defineGallery(
            GalleryConfiguration(name: "bench", registries: [RegistryConfiguration(algorithm: version, thresholds: zero)]))
        for first in stride(from: 0, to: count, by: 10_000) {
            let items = (first..<min(count, first + 10_000)).map { row in
                ImportItem(identifier: "p\(row)", template: FaceTemplate(algorithm: version, landmarks: Self.landmarks(faces[row])))
            }
            _ = try await engine.importTemplates(gallery: "bench", items)
        }

        try Self.write(faces, rows: "\(out)/rows.f32", masks: "\(out)/masks.u32")
        try Self.write(queries, rows: "\(out)/queries.f32", masks: "\(out)/qmasks.u32")
        try writeFile("\(out)/weights.f32", LandmarkVocabulary.weights.withUnsafeBytes { Array($0) })
        let params = JSON.object([
            ("decay", .number(Double(LandmarkAlgorithm.decay))), ("minimum", .integer(LandmarkAlgorithm.minimumLandmarks)),
            ("slots", .integer(LandmarkVocabulary.count)),
        ])
        try writeFile("\(out)/params.json", Array(params.text.utf8))

        var times: [Double] = []
        var tops: [JSON] = []
        var scores: [JSON] = []
        for query in queries {
            let face = Face(FaceTemplate(algorithm: version, landmarks: Self.landmarks(query)))
            let begin = now()
            let result = try await engine.identify(gallery: "bench", face: face, autoEnrol: false, limit: k)
            times.append(now() - begin)
            tops.append(.array(result.matches.map { .integer(Int($0.identifier.dropFirst())!) }))
            scores.append(.array(result.matches.map { .number(Double($0.score)) }))
        }
        print(
            JSON.object([
                ("algorithm", .string(self.algorithm)), ("identify_ms", .array(times.map { .number($0 * 1000) })), ("top", .array(tops)),
                ("scores", .array(scores)),
            ]).text)
    }

    /// A random face in pixel coordinates: a shared layout moved, scaled and deformed, with 20-32 of
    /// the 32 landmarks present.
    static func face(_ random: inout Random) -> DenseLandmarks {
        let slots = LandmarkVocabulary.count
        let scale = 80 + 40 * Float(random.uniform())
        let centreX = 200 + 100 * Float(random.uniform())
        let centreY = 200 + 100 * Float(random.uniform())
        var coordinates = [Float](repeating: 0, count: 3 * slots)
        var mask: UInt32 = 0
        for slot in 0..<slots {
            // A fixed layout per slot (a circle of points) plus a per-face deformation.
            let angle = Float(slot) * 2 * .pi / Float(slots)
            coordinates[3 * slot] = centreX + scale * (cos(angle) + 0.15 * Float(random.uniform() - 0.5))
            coordinates[3 * slot + 1] = centreY + scale * (sin(angle) + 0.15 * Float(random.uniform() - 0.5))
            coordinates[3 * slot + 2] = scale * 0.3 * Float(random.uniform())
            if random.uniform() < 0.85 { mask |= 1 << UInt32(slot) }
        }
        return DenseLandmarks(mask: mask, coordinates: coordinates)
    }

    static func jitter(_ face: DenseLandmarks, _ random: inout Random) -> DenseLandmarks {
        var moved = face
        for i in moved.coordinates.indices { moved.coordinates[i] += Float(random.uniform() - 0.5) * 2 }
        return moved
    }

    static func landmarks(_ face: DenseLandmarks) -> [Landmark] {
        (0..<LandmarkVocabulary.count).compactMap { slot in
            guard face.mask & (1 << UInt32(slot)) != 0 else { return nil }
            return Landmark(
                name: LandmarkVocabulary.names[slot], x: face.coordinates[3 * slot], y: face.coordinates[3 * slot + 1],
                z: face.coordinates[3 * slot + 2])
        }
    }

    static func write(_ faces: [DenseLandmarks], rows: String, masks: String) throws {
        var rowBytes: [UInt8] = []
        var maskBytes: [UInt8] = []
        for face in faces {
            LandmarkAlgorithm.normalised(face).withUnsafeBytes { rowBytes.append(contentsOf: $0) }
            withUnsafeBytes(of: face.mask.littleEndian) { maskBytes.append(contentsOf: $0) }
        }
        try writeFile(rows, rowBytes)
        try writeFile(masks, maskBytes)
    }
}
