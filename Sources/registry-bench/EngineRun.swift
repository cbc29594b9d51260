// Engine benchmark: fills a registry with random templates through the real engine (LMDB, durable
// group commits) and times what users wait for. Prints figures; asserts nothing.
//
//     swift run -c release registry-bench [engine] [--count N] [--dimension D] [--queries Q] [--registrations R]
//
// Defaults: 100,000 templates of 128 floats (the arcface registry of the default gallery), 101
// identify queries, 2,000 concurrent checked registrations.
import ArgumentParser
import Glibc
import RegistryEngine
import RegistryModel

/// SplitMix64 with Box-Muller normals: deterministic random templates.
struct Random {
    var state: UInt64

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func uniform() -> Double { Double(self.next() >> 11) / Double(1 << 53) }

    mutating func unitVector(_ dimension: Int) -> [Float] {
        var values = (0..<dimension).map { _ in
            Float((-2 * log(max(self.uniform(), 1e-300))).squareRoot() * cos(2 * Double.pi * self.uniform()))
        }
        let norm = values.reduce(0) { $0 + $1 * $1 }.squareRoot()
        for i in values.indices { values[i] /= norm }
        return values
    }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func format(_ value: Double, _ digits: Int = 2) -> String {
    var text = String(Int((value * pow(10, Double(digits))).rounded()))
    while text.count <= digits { text = "0" + text }
    text.insert(".", at: text.index(text.endIndex, offsetBy: -digits))
    return text
}

/// The original whole-engine run: fill, reopen, identify, checked registrations.
struct EngineRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine", abstract: "Fill, reopen, identify and checked registrations through the engine in-process.")

    @Option(help: "Templates to fill the registry with.")
    var count: Int = 100_000
    @Option(help: "Floats per template.")
    var dimension: Int = 128
    @Option(help: "Identify queries to time.")
    var queries: Int = 101
    @Option(help: "Concurrent checked registrations to time.")
    var registrations: Int = 2_000

    func validate() throws {
        guard self.count > 0, self.dimension > 0, self.queries > 0, self.registrations > 0 else {
            throw ValidationError("--count, --dimension, --queries and --registrations must be positive")
        }
    }

    func run() async throws {
        let options = self
        let algorithm = Algorithm(
            version: 9000 + UInt32(options.dimension), name: "bench\(options.dimension)",
            kind: .vector(dimension: options.dimension), scoreFunction: .cosine, defaultThreshold: 0.6)
        let configuration = EngineConfiguration(
            algorithms: [algorithm],
            defaultGallery: GalleryConfiguration(name: "default", registries: [RegistryConfiguration(algorithm: algorithm.version)]))

        var template = Array("/tmp/registry-bench-XXXXXX".utf8CString)
        _ = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let directory = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { _ = system("rm -rf '\(directory)'") }

        print("registry-bench: \(options.count) templates x \(options.dimension) float32, store in \(directory)")
        var random = Random(state: 42)

        // Fill: imports of 10,000 templates per call, each one durable commit.
        var engine = try Engine(path: directory, configuration: configuration)
        let fillStart = now()
        var filled = 0
        while filled < options.count {
            let chunk = min(10_000, options.count - filled)
            let items = (0..<chunk).map { i in
                ImportItem(
                    identifier: "person-\(filled + i)",
                    template: FaceTemplate(algorithm: algorithm.version, vector: random.unitVector(options.dimension)))
            }
            _ = try await engine.importTemplates(items)
            filled += chunk
        }
        let fillSeconds = now() - fillStart
        print("fill (import, 10,000 per durable commit): \(format(fillSeconds)) s, \(Int(Double(options.count) / fillSeconds)) templates/s")
        let bytes = engine.storeBytesInUse
        print("store: \(bytes / 1_048_576) MiB in use, \(bytes / options.count) bytes per template (raw vector \(4 * options.dimension) bytes)")

        // Start-up: close and reopen, loading the index from LMDB.
        engine.close()
        let openStart = now()
        engine = try Engine(path: directory, configuration: configuration)
        print("reopen (load index of \(options.count)): \(format((now() - openStart) * 1000)) ms")

        // Identify: one query at a time; every tenth query is a stored person, so results are produced.
        var times: [Double] = []
        var matched = 0
        for q in 0..<options.queries {
            let vector: [Float]
            if q % 10 == 0 {
                var probe = Random(state: 42)
                for _ in 0..<(q % options.count) { _ = probe.unitVector(options.dimension) }
                vector = probe.unitVector(options.dimension)
            } else {
                vector = random.unitVector(options.dimension)
            }
            let start = now()
            let result = try await engine.identify(face: Face(FaceTemplate(algorithm: algorithm.version, vector: vector)), autoEnrol: false)
            times.append(now() - start)
            if !result.matches.isEmpty { matched += 1 }
        }
        print(
            "identify, 1 query over \(options.count): median \(format(median(times) * 1000)) ms, p90 \(format(percentile(times, 0.9) * 1000)) ms, min \(format(times.min()! * 1000)) ms (\(options.queries) queries, \(matched) with a match)"
        )
        let scanned = Double(options.count * options.dimension * 4) / median(times) / 1e9
        print("  effective scan rate: \(format(scanned)) GB/s of template data")

        // Checked registrations, 64 at a time: each runs the similar-face scan, and concurrent ones share commits.
        let (commitsBefore, _) = engine.commitStatistics
        let registerStart = now()
        let batches = (options.registrations + 63) / 64
        for batch in 0..<batches {
            let vectors = (0..<64).map { _ in random.unitVector(options.dimension) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (i, vector) in vectors.enumerated() where batch * 64 + i < options.registrations {
                    let engine = engine
                    group.addTask {
                        _ = try await engine.register(
                            identifier: "new-\(batch * 64 + i)", face: Face(FaceTemplate(algorithm: algorithm.version, vector: vector)))
                    }
                }
                try await group.waitForAll()
            }
        }
        let registerSeconds = now() - registerStart
        let commits = engine.commitStatistics.commits - commitsBefore
        print(
            "register with checks, 64 concurrent: \(Int(Double(options.registrations) / registerSeconds)) registrations/s (\(options.registrations) in \(format(registerSeconds)) s, \(commits) durable commits)"
        )
        engine.close()
    }
}
