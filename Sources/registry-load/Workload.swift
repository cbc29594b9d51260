import NIOCore
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import SyntheticFaces

/// A probe or result that is not what the seeded data guarantees (counted as an error, like a throw).
struct UnexpectedResult: Error, CustomStringConvertible {
    let description: String
}

/// What one connection saw in one phase.
struct Tally: Sendable {
    /// Every request's latency in milliseconds, failed ones included.
    var latencies: [Double] = []
    var errors = 0
    var firstError: String?
    /// Connections that stopped early because they were closed.
    var connectionsLost = 0
    /// CPU seconds over the measured window: the daemon's (nil when unreadable) and this process's.
    var serverCPUSeconds: Double?
    var clientCPUSeconds: Double?

    mutating func merge(_ other: Tally) {
        self.latencies += other.latencies
        self.errors += other.errors
        self.connectionsLost += other.connectionsLost
        if self.firstError == nil { self.firstError = other.firstError }
    }
}

/// One connection's requests: which person each probes, or whom it registers.
struct Worker: Sendable {
    /// This worker's position among `connections`.
    let index: Int
    let connections: Int
    let operation: Options.Operation
    let gallery: String
    /// Distinguishes this run's registrations from earlier runs'.
    let run: String
    var random: SeededRandom
    /// Requests this worker has sent (warm-up included): its k-th registration is `new-<run>-<k·N + index>`.
    var sent = 0

    /// The next `count` requests as encoded frames with their checks (built before the clock starts),
    /// each with the query template it sends.
    mutating func calls(_ count: Int, people: People) -> [(query: [Float], call: Driver.Call)] {
        let algorithm = Seeding.algorithm(dimension: people.dimension).version
        return (0..<count).map { _ in
            let call = self.nextCall(people: people)
            return (call.query, self.encoded(call, algorithm: algorithm))
        }
    }

    /// `call` as a request frame, with what a correct answer looks like.
    private func encoded(_ call: Call, algorithm: UInt32) -> Driver.Call {
        var request = Registry_V1_Request()
        request.id = UInt64(self.sent)
        let face = Registry_V1_Face(Face(FaceTemplate(algorithm: algorithm, vector: call.query)))
        switch call {
        case .authenticate(let identifier, _):
            request.operation = .authenticate(
                .with {
                    $0.gallery = self.gallery
                    $0.identifier = identifier
                    $0.face = face
                    $0.autoEnrol = false
                })
            return Driver.Call(frame: Self.encode(request)) { result in
                guard case .authenticate(let authentication) = result else { return Self.unexpected(result) }
                return authentication.authenticated ? nil : "\(identifier) was not authenticated (score \(authentication.score))"
            }
        case .identify(let expected, _):
            request.operation = .identify(
                .with {
                    $0.gallery = self.gallery
                    $0.face = face
                    $0.autoEnrol = false
                })
            return Driver.Call(frame: Self.encode(request)) { result in
                guard case .identify(let identification) = result else { return Self.unexpected(result) }
                let found = identification.matches.first
                return found?.identifier == expected
                    ? nil : "identify found \(found.map { "\($0.identifier) (\($0.score))" } ?? "nobody"), not \(expected)"
            }
        case .register(let identifier, _):
            request.operation = .register(
                .with {
                    $0.gallery = self.gallery
                    $0.identifier = identifier
                    $0.face = face
                })
            return Driver.Call(frame: Self.encode(request)) { result in
                guard case .register = result else { return Self.unexpected(result) }
                return nil
            }
        }
    }

    private static func encode(_ request: Registry_V1_Request) -> ByteBuffer {
        // Messages built from valid values always encode.
        try! ByteBuffer(message: request)
    }

    private static func unexpected(_ result: Registry_V1_Response.OneOf_Result?) -> String {
        if case .error(let error) = result { return "\(RegistryError.Code(error.code).rawValue): \(error.message)" }
        return "an unexpected response"
    }

    /// A request, ready to send (prepared before the clock starts): whom it concerns, and its query template.
    enum Call {
        case authenticate(identifier: String, query: [Float])
        case identify(expected: String, query: [Float])
        case register(identifier: String, query: [Float])

        var query: [Float] {
            switch self {
            case .authenticate(_, let query), .identify(_, let query), .register(_, let query): query
            }
        }
    }

    private mutating func nextCall(people: People) -> Call {
        defer { self.sent += 1 }
        switch self.operation {
        case .authenticate, .identify:
            let person = Int.random(in: 0..<people.count, using: &self.random)
            let query = Vectors.probe(of: people[person], &self.random)
            let identifier = Seeding.identifier(person)
            return self.operation == .authenticate
                ? .authenticate(identifier: identifier, query: query) : .identify(expected: identifier, query: query)
        case .register:
            let identifier = "new-\(self.run)-\(self.sent * self.connections + self.index)"
            return .register(identifier: identifier, query: Vectors.unit(&self.random, dimension: people.dimension))
        }
    }
}

/// The share of `total` that connection `index` of `connections` takes.
func share(of total: Int, index: Int, connections: Int) -> Int {
    total / connections + (index < total % connections ? 1 : 0)
}

/// Runs one phase: `total` requests split across the workers' connections (or as many as fit in
/// `seconds`), measured by the ``Driver``; writes their query templates to `queriesOut` first.
func runPhase(
    socket: String, workers: inout [Worker], total: Int, seconds: Double?, people: People, queriesOut: String? = nil
) async throws -> (tally: Tally, elapsed: Duration) {
    let prepared = workers.indices.map { position in
        // With a time limit, each connection cycles through a pool of prepared requests.
        let count = seconds == nil ? share(of: total, index: position, connections: workers.count) : 2_000
        return workers[position].calls(count, people: people)
    }
    if let queriesOut {
        let queries = prepared.flatMap { $0.map(\.query) }
        try Vectors.write(queries.count, to: queriesOut) { queries[$0] }
    }
    return try await Driver.run(socket: socket, calls: prepared.map { $0.map(\.call) }, seconds: seconds)
}
