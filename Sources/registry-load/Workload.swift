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

    /// The next `count` requests as encoded frames with their checks (built before the clock starts).
    mutating func calls(_ count: Int, people: [[Float]]) -> [Driver.Call] {
        (0..<count).map { _ in
            let call = self.nextCall(people: people)
            var request = Registry_V1_Request()
            request.id = UInt64(self.sent)
            switch call {
            case .authenticate(let identifier, let face):
                request.operation = .authenticate(
                    .with {
                        $0.gallery = self.gallery
                        $0.identifier = identifier
                        $0.face = Registry_V1_Face(face)
                        $0.autoEnrol = false
                    })
                return Driver.Call(frame: Self.encode(request)) { result in
                    guard case .authenticate(let authentication) = result else { return Self.unexpected(result) }
                    return authentication.authenticated ? nil : "\(identifier) was not authenticated (score \(authentication.score))"
                }
            case .identify(let expected, let face):
                request.operation = .identify(
                    .with {
                        $0.gallery = self.gallery
                        $0.face = Registry_V1_Face(face)
                        $0.autoEnrol = false
                    })
                return Driver.Call(frame: Self.encode(request)) { result in
                    guard case .identify(let identification) = result else { return Self.unexpected(result) }
                    let found = identification.matches.first
                    return found?.identifier == expected
                        ? nil : "identify found \(found.map { "\($0.identifier) (\($0.score))" } ?? "nobody"), not \(expected)"
                }
            case .register(let identifier, let face):
                request.operation = .register(
                    .with {
                        $0.gallery = self.gallery
                        $0.identifier = identifier
                        $0.face = Registry_V1_Face(face)
                    })
                return Driver.Call(frame: Self.encode(request)) { result in
                    guard case .register = result else { return Self.unexpected(result) }
                    return nil
                }
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

    /// A request, ready to send (prepared before the clock starts).
    enum Call {
        case authenticate(identifier: String, face: Face)
        case identify(expected: String, face: Face)
        case register(identifier: String, face: Face)
    }

    private mutating func nextCall(people: [[Float]]) -> Call {
        defer { self.sent += 1 }
        switch self.operation {
        case .authenticate, .identify:
            let person = Int.random(in: 0..<people.count, using: &self.random)
            let face = Face(FaceTemplate(algorithm: Seeding.algorithm, vector: Vectors.probe(of: people[person], &self.random)))
            let identifier = Seeding.identifier(person)
            return self.operation == .authenticate
                ? .authenticate(identifier: identifier, face: face) : .identify(expected: identifier, face: face)
        case .register:
            let identifier = "new-\(self.run)-\(self.sent * self.connections + self.index)"
            return .register(identifier: identifier, face: Face(FaceTemplate(algorithm: Seeding.algorithm, vector: Vectors.unit(&self.random))))
        }
    }
}

/// The share of `total` that connection `index` of `connections` takes.
func share(of total: Int, index: Int, connections: Int) -> Int {
    total / connections + (index < total % connections ? 1 : 0)
}

/// Runs one phase: `total` requests split across the workers' connections (or as many as fit in
/// `seconds`), measured by the ``Driver``.
func runPhase(
    socket: String, workers: inout [Worker], total: Int, seconds: Double?, people: [[Float]]
) async throws -> (tally: Tally, elapsed: Duration) {
    let calls = workers.indices.map { position in
        // With a time limit, each connection cycles through a pool of prepared requests.
        let count = seconds == nil ? share(of: total, index: position, connections: workers.count) : 2_000
        return workers[position].calls(count, people: people)
    }
    return try await Driver.run(socket: socket, calls: calls, seconds: seconds)
}
