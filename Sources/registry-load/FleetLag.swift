import RegistryClient
import RegistryModel
import SyntheticFaces

/// Replication lag between two nodes of a fleet (docs/fleet.md), as an app would see it: people are
/// registered on one node at a steady rate, and each is looked for on the other from the moment its
/// registration was answered until an authentication finds it. The lag is that wait.
enum FleetLag {
    struct Figures {
        var lags: [Double] = []  // milliseconds, one per registration
        var errors = 0
        var firstError: String?
        var seconds = 0.0
    }

    /// Connections to each node: enough for the registrations in flight at `rate` (each waits for
    /// a durable commit in PostgreSQL and on the node) without queueing behind one another.
    static let connections = 16

    static func run(options: Options, run: String, seed: UInt64) async throws -> Figures {
        guard let lagSocket = options.lagSocket else { return Figures() }
        let total = max(1, Int(Double(options.rate) * (options.seconds ?? 10)))
        var writers: [RegistryConnection] = []
        var readers: [RegistryConnection] = []
        for _ in 0..<Self.connections {
            writers.append(try await RegistryConnection.connect(socketPath: options.socket))
            readers.append(try await RegistryConnection.connect(socketPath: lagSocket))
        }
        let algorithm = Seeding.algorithm(dimension: options.dimension).version
        let (gallery, dimension) = (options.gallery, options.dimension)
        let clock = ContinuousClock()
        let start = clock.now
        var figures = await withTaskGroup(of: (lag: Double?, error: String?).self) { group in
            for index in 0..<total {
                // Paced: the i-th registration starts at i / rate seconds, whatever the others do.
                try? await Task.sleep(until: start.advanced(by: .nanoseconds(Int64(Double(index) / Double(options.rate) * 1e9))), clock: clock)
                let (writer, reader) = (writers[index % Self.connections], readers[index % Self.connections])
                group.addTask {
                    var random = SeededRandom(seed: seed &+ UInt64(index))
                    let face = Face(FaceTemplate(algorithm: algorithm, vector: Vectors.unit(&random, dimension: dimension)))
                    let identifier = "lag-\(run)-\(index)"
                    do {
                        _ = try await writer.register(gallery: gallery, identifier: identifier, face: face)
                    } catch {
                        return (nil, "register: \(error)")
                    }
                    let answered = clock.now
                    while clock.now - answered < .seconds(10) {
                        do {
                            _ = try await reader.authenticate(gallery: gallery, identifier: identifier, face: face, autoEnrol: false)
                            return (Report.milliseconds(clock.now - answered), nil)
                        } catch let error as RegistryError where error.code == .identifierNotRegistered {
                            try? await Task.sleep(for: .microseconds(250))
                        } catch {
                            return (nil, "authenticate: \(error)")
                        }
                    }
                    return (nil, "not on the other node 10 s after its registration was answered")
                }
            }
            var figures = Figures()
            for await (lag, error) in group {
                if let lag { figures.lags.append(lag) }
                if let error {
                    figures.errors += 1
                    figures.firstError = figures.firstError ?? error
                }
            }
            return figures
        }
        figures.seconds = Report.seconds(clock.now - start)
        for connection in writers + readers { await connection.close() }
        return figures
    }

    /// One JSON object: the rate asked and achieved, and the lag's percentiles.
    static func json(_ figures: Figures, rate: Int) -> String {
        let lags = figures.lags.sorted()
        let achieved = figures.seconds > 0 ? Double(lags.count + figures.errors) / figures.seconds : 0
        return """
            {"operation":"fleet-lag","rate":\(rate),"writes_per_second":\(Report.fixed(achieved, 1)),"samples":\(lags.count),\
            "p50_ms":\(Report.fixed(Report.percentile(lags, 50), 3)),"p99_ms":\(Report.fixed(Report.percentile(lags, 99), 3)),\
            "max_ms":\(Report.fixed(lags.last ?? 0, 3)),"errors":\(figures.errors)}
            """
    }
}
