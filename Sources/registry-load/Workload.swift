import RegistryClient
import RegistryCore

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

/// One connection's closed loop: send one request, wait for its answer, record the latency, repeat.
struct Worker: Sendable {
    let client: RegistryClient
    /// This worker's position among `connections`.
    let index: Int
    let connections: Int
    let operation: Options.Operation
    let gallery: String
    /// Distinguishes this run's registrations from earlier runs'.
    let run: String
    var random: SplitMix64
    /// Requests this worker has sent (warm-up included): its k-th registration is `new-<run>-<k·N + index>`.
    var sent = 0

    /// Runs `count` requests, or until `deadline` when it is set.
    mutating func run(count: Int, until deadline: ContinuousClock.Instant?, people: [[Float]]) async -> Tally {
        let clock = ContinuousClock()
        var tally = Tally()
        tally.latencies.reserveCapacity(deadline == nil ? count : 4096)
        var done = 0
        while deadline.map({ clock.now < $0 }) ?? (done < count) {
            let call = self.nextCall(people: people)
            let start = clock.now
            do {
                try await self.perform(call)
            } catch {
                tally.errors += 1
                if tally.firstError == nil { tally.firstError = "\(error)" }
                if error is RegistryClientError {
                    // The connection is gone (or the daemon misbehaved and it was closed): every later
                    // request on it would fail at once and flood the figures.
                    tally.latencies.append(Report.milliseconds(start.duration(to: clock.now)))
                    tally.connectionsLost += 1
                    break
                }
            }
            tally.latencies.append(Report.milliseconds(start.duration(to: clock.now)))
            done += 1
        }
        return tally
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

    private func perform(_ call: Call) async throws {
        switch call {
        case .authenticate(let identifier, let face):
            let result = try await self.client.authenticate(gallery: self.gallery, identifier: identifier, face: face, autoEnrol: false)
            guard result.authenticated else {
                throw UnexpectedResult(description: "\(identifier) was not authenticated (score \(result.score))")
            }
        case .identify(let expected, let face):
            let result = try await self.client.identify(gallery: self.gallery, face: face, autoEnrol: false)
            guard result.matches.first?.identifier == expected else {
                throw UnexpectedResult(
                    description: "identify found \(result.matches.first.map { "\($0.identifier) (\($0.score))" } ?? "nobody"), not \(expected)")
            }
        case .register(let identifier, let face):
            _ = try await self.client.register(gallery: self.gallery, identifier: identifier, face: face, force: false)
        }
    }
}

/// The share of `total` that connection `index` of `connections` takes.
func share(of total: Int, index: Int, connections: Int) -> Int {
    total / connections + (index < total % connections ? 1 : 0)
}

/// Runs one phase on every worker at once; returns the merged tally and the wall time it took.
func runPhase(
    workers: inout [Worker], total: Int, seconds: Double?, people: [[Float]]
) async -> (tally: Tally, elapsed: Duration) {
    let clock = ContinuousClock()
    let start = clock.now
    let deadline = seconds.map { start.advanced(by: .nanoseconds(Int64($0 * 1e9))) }
    let snapshot = workers
    let results = await withTaskGroup(of: (Int, Worker, Tally).self) { group in
        for (position, worker) in snapshot.enumerated() {
            let count = share(of: total, index: position, connections: snapshot.count)
            group.addTask {
                var worker = worker
                let tally = await worker.run(count: count, until: deadline, people: people)
                return (position, worker, tally)
            }
        }
        var results: [(Int, Worker, Tally)] = []
        for await result in group { results.append(result) }
        return results
    }
    let elapsed = start.duration(to: clock.now)
    var tally = Tally()
    for (position, worker, workerTally) in results.sorted(by: { $0.0 < $1.0 }) {
        workers[position] = worker
        tally.merge(workerTally)
    }
    return (tally, elapsed)
}
