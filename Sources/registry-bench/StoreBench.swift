import ArgumentParser
import Glibc
import RegistryClient
import RegistryEngine
import RegistryModel

/// Identification over a store built from a raw float32 file, so that tools/bench can run FAISS on
/// the very same rows. Row i is stored as identifier "p<i>"; the gallery "bench" has one registry
/// (arcface for 128 floats, r300 for 512) whose thresholds are 1e-6 (the least allowed is above 0), so identify returns the exact
/// top k like FAISS's `IndexFlatIP` (scores are dot products clamped to [0, 1]).
enum StoreBench {
    static let gallery = "bench"

    static func algorithm(dimension: Int) throws -> UInt32 {
        switch dimension {
        case 128: Algorithm.arcface.version
        case 512: Algorithm.r300.version
        default: throw UsageError("--dimension must be 128 (arcface) or 512 (r300)")
        }
    }

    /// - Parameters:
    ///   - identities: a file of one little-endian UInt32 per row, naming row i "p<identity>" (several
    ///     rows per identifier); nil names row i "p<i>".
    ///   - rows: store only the file's first `rows` rows (nil: all).
    /// The file is read a chunk at a time (tools/bench --scale stores ten million 512-float rows: 20 GB).
    static func make(store path: String, dimension: Int, vectors: String, identities: String? = nil, rows wanted: Int? = nil) async throws {
        let algorithm = try Self.algorithm(dimension: dimension)
        guard let file = fopen(vectors, "rb") else { throw UsageError("cannot open \(vectors): \(String(cString: strerror(errno)))") }
        defer { fclose(file) }
        var status = stat()
        fstat(fileno(file), &status)
        let rowBytes = 4 * dimension
        guard Int(status.st_size) % rowBytes == 0 else { throw UsageError("the vectors file is not a whole number of \(dimension)-float rows") }
        let rows = min(Int(status.st_size) / rowBytes, wanted ?? .max)
        let names: [UInt32]? = try identities.map { path in
            let raw = try readFile(path)
            guard raw.count >= 4 * rows else { throw UsageError("the identities file does not hold one UInt32 per row") }
            return raw.withUnsafeBytes { raw in (0..<rows).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self) } }
        }
        mkdir(path, 0o755)
        let engine = try Engine(path: path)
        defer { engine.close() }
        let zero = Thresholds(authentication: 1e-6, identification: 1e-6, autoEnrolment: 1)
        _ = try await engine.defineGallery(
            GalleryConfiguration(name: Self.gallery, registries: [RegistryConfiguration(algorithm: algorithm, thresholds: zero)]))
        let start = now()
        let chunk = 10_000
        var bytes = [UInt8](repeating: 0, count: chunk * rowBytes)
        for first in stride(from: 0, to: rows, by: chunk) {
            let count = min(rows, first + chunk) - first
            guard fread(&bytes, rowBytes, count, file) == count else { throw UsageError("cannot read \(vectors)") }
            let items = bytes.withUnsafeBytes { raw in
                (0..<count).map { offset in
                    let vector = (0..<dimension).map { raw.loadUnaligned(fromByteOffset: offset * rowBytes + 4 * $0, as: Float.self) }
                    let row = first + offset
                    return ImportItem(
                        identifier: "p\(names.map { Int($0[row]) } ?? row)", template: FaceTemplate(algorithm: algorithm, vector: vector))
                }
            }
            _ = try await engine.importTemplates(gallery: Self.gallery, items)
        }
        print(JSON.object([("templates", .integer(rows)), ("seconds", .number(now() - start))]).text)
    }

    /// Opens the store (timing start-up to a loaded index), reads resident memory, then identifies
    /// each query once.
    /// - Parameter threshold: identify at this identification threshold, as an app's gallery would,
    ///   instead of the store's 1e-6 (exact top k): the gallery is redefined with it after start-up
    ///   and memory are measured, and back to 1e-6 after the queries.
    /// - Parameter residentRowBytes: the engine's `residentRowBytes` (nil: its default).
    static func identify(
        store path: String, dimension: Int, k: Int, queries: String, threshold: Float? = nil, residentRowBytes: Int? = nil
    ) async throws {
        let algorithm = try Self.algorithm(dimension: dimension)
        let queries = try readRows(queries, dimension: dimension)
        var configuration = EngineConfiguration()
        if let residentRowBytes { configuration.residentRowBytes = residentRowBytes }
        let start = now()
        let engine = try Engine(path: path, configuration: configuration)
        let startup = now() - start
        defer { engine.close() }
        let memory = residentMemory()
        let snapshotMemory = snapshotResidentMemory()
        func thresholds(identification: Float) async throws {
            let thresholds = Thresholds(authentication: 1e-6, identification: identification, autoEnrolment: 1)
            _ = try await engine.defineGallery(
                GalleryConfiguration(name: Self.gallery, registries: [RegistryConfiguration(algorithm: algorithm, thresholds: thresholds)]))
        }
        if let threshold { try await thresholds(identification: threshold) }
        var times: [Double] = []
        var tops: [JSON] = []
        var scores: [JSON] = []
        let before = Engine.prefilterCounts
        for query in queries {
            let face = Face(FaceTemplate(algorithm: algorithm, vector: query))
            let begin = now()
            let result = try await engine.identify(gallery: Self.gallery, face: face, autoEnrol: false, limit: k)
            times.append(now() - begin)
            tops.append(.array(result.matches.map { .integer(Int($0.identifier.dropFirst())!) }))
            scores.append(.array(result.matches.map { .number(Double($0.score)) }))
        }
        // What identification kept resident (file-backed pages it read included).
        let after = residentMemory()
        if threshold != nil { try await thresholds(identification: 1e-6) }
        print(
            JSON.object([
                ("startup_ms", .number(startup * 1000)), ("rss_bytes", .integer(memory.total)),
                ("rss_anon_bytes", .integer(memory.anonymous)), ("rss_file_bytes", .integer(memory.file)),
                ("rss_snapshot_bytes", .integer(snapshotMemory)), ("index_load", .string("\(engine.indexLoad)")),
                ("rss_after_bytes", .integer(after.total)), ("rss_after_anon_bytes", .integer(after.anonymous)),
                ("rss_after_file_bytes", .integer(after.file)), ("threshold", .number(threshold.map(Double.init) ?? .nan)),
                ("identify_ms", .array(times.map { .number($0 * 1000) })), ("top", .array(tops)), ("scores", .array(scores)),
                ("kernels", .string(Engine.scanKernels)), ("rescored_fraction", Self.rescoredFraction(since: before)),
            ]).text)
    }

    /// The fraction of rows the float32 kernel scored since `before` (null when nothing was prefiltered).
    static func rescoredFraction(since before: (considered: Int, rescored: Int)) -> JSON {
        let now = Engine.prefilterCounts
        let considered = now.considered - before.considered
        return .number(considered > 0 ? Double(now.rescored - before.rescored) / Double(considered) : .nan)
    }

    /// The same queries through a running daemon: one connection, one request at a time.
    static func daemonIdentify(socket: String, dimension: Int, k: Int, queries: String) async throws {
        let algorithm = try Self.algorithm(dimension: dimension)
        let queries = try readRows(queries, dimension: dimension)
        let client = try await RegistryConnection.connect(socketPath: socket)
        var times: [Double] = []
        var tops: [JSON] = []
        // One unmeasured request: the connection's first round trip sets up buffers on both sides.
        _ = try await client.identify(
            gallery: Self.gallery, face: Face(FaceTemplate(algorithm: algorithm, vector: queries[0])), autoEnrol: false, limit: k)
        for query in queries {
            let face = Face(FaceTemplate(algorithm: algorithm, vector: query))
            let begin = now()
            let result = try await client.identify(gallery: Self.gallery, face: face, autoEnrol: false, limit: k)
            times.append(now() - begin)
            tops.append(.array(result.matches.map { .integer(Int($0.identifier.dropFirst())!) }))
        }
        await client.close()
        print(JSON.object([("identify_ms", .array(times.map { .number($0 * 1000) })), ("top", .array(tops))]).text)
    }
}

struct MakeStore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "make-store", abstract: "A store of the rows of a raw float32 file (identifier p<i> for row i).")

    @Option(help: "Directory of the store to create.")
    var store: String
    @Option(help: "Floats per row: 128 (arcface) or 512 (r300).")
    var dimension: Int
    @Option(help: "Raw little-endian float32 file, rows one after the other.")
    var vectors: String
    @Option(help: "Raw little-endian UInt32 file, the identity of each row (row i is stored as p<identity>; default p<i>).")
    var identities: String?
    @Option(help: "Store only the first N rows of the file (default: all).")
    var rows: Int?

    func run() async throws {
        try await StoreBench.make(
            store: self.store, dimension: self.dimension, vectors: self.vectors, identities: self.identities, rows: self.rows)
    }
}

/// The query side shared by `identify` and `daemon-identify`.
struct QueryOptions: ParsableArguments {
    @Option(help: "Floats per row: 128 or 512.")
    var dimension: Int
    @Option(help: "Matches per query.")
    var k: Int = 10
    @Option(help: "Raw float32 file of the queries.")
    var queries: String

    func validate() throws { guard self.k > 0 else { throw ValidationError("--k must be positive") } }
}

struct IdentifyInStore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identify", abstract: "Start-up, resident memory and identify per query over a store made by make-store.")

    @Option(help: "Directory of the store.")
    var store: String
    @OptionGroup var query: QueryOptions
    @Option(help: "Identify at this identification threshold, as an app's gallery would (default: the store's 1e-6, the exact top k).")
    var threshold: Float?
    @Option(help: "Keep a registry's float32 rows in memory up to this many bytes (default: the daemon's, 64 MiB).")
    var residentRowBytes: Int?

    func run() async throws {
        try await StoreBench.identify(
            store: self.store, dimension: self.query.dimension, k: self.query.k, queries: self.query.queries, threshold: self.threshold,
            residentRowBytes: self.residentRowBytes)
    }
}

struct DaemonIdentify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon-identify", abstract: "The same queries through a running daemon, one request at a time.")

    @Option(help: "The daemon's socket.")
    var socket: String
    @OptionGroup var query: QueryOptions

    func run() async throws {
        try await StoreBench.daemonIdentify(socket: self.socket, dimension: self.query.dimension, k: self.query.k, queries: self.query.queries)
    }
}
