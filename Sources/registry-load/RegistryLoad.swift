// registry-load: drives a running registryd over N connections and prints throughput and latency.
//
//     registry-load [--socket PATH] [--connections N] [--operation authenticate|identify|register]
//                   [--people P] [--dimension 128|512] [--requests R | --seconds S] [--gallery NAME]
//                   [--warmup R] [--seed-only] [--vectors-out PATH] [--queries-out PATH]
//
// Seeds the gallery (one arcface registry, or r300 with --dimension 512; P people with deterministic
// random unit vectors; reused when it already holds them), warms up, then runs the measured requests:
// each connection is a closed loop of one request at a time. Prints one line with requests/s and
// p50/p90/p99/max latency. --vectors-out and --queries-out write the seeded templates and the measured
// requests' ones for tools/bench's FAISS anchor.
import ArgumentParser
import Glibc
import RegistryClient
import RegistryModel
import SyntheticFaces

@main
struct RegistryLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry-load",
        abstract: "Drives a running registryd and prints throughput and latency.",
        discussion:
            "The gallery gets one arcface registry (algorithm 24, 128 floats; with --dimension 512 r300, algorithm 300, 512 floats compared by dot product; thresholds 0.6) holding person-0 ... person-(P-1) with deterministic random unit vectors; it is reused when it already holds P people, else deleted and imported again. The measured connections all run on one thread with their requests encoded in advance, so the tool takes little of the CPU it shares with the daemon. Prints one line: operation, people, connections, requests, seconds, requests/s, p50, p90, p99 and max latency in ms, and the number of errors.",
        version: RegistryVersion.current)

    @OptionGroup var options: Options

    func run() async throws {
        let status = await LoadRun.main(self.options)
        if status != 0 { throw ExitCode(status) }
    }
}

enum LoadRun {
    /// Runs everything; returns the exit status.
    static func main(_ options: Options) async -> Int32 {
        // The seeding client; the measured connections are the Driver's.
        let client: RegistryConnection
        do {
            client = try await RegistryConnection.connect(socketPath: options.socket)
        } catch {
            printError("registry-load: \(error)")
            printError("registry-load: is registryd running? Start it, or pass its socket with --socket PATH.")
            return 1
        }
        let people = People(count: options.people, dimension: options.dimension)
        var seeding: Double?
        do {
            if !options.noSeed { seeding = try await Seeding.prepare(client: client, gallery: options.gallery, people: people) }
        } catch {
            printError("registry-load: cannot seed gallery '\(options.gallery)': \(error)")
            await client.close()
            return 1
        }
        await client.close()
        if let path = options.vectorsOut {
            do {
                try Vectors.write(people.count, to: path) { people[$0] }
            } catch {
                printError("registry-load: \(error)")
                return 1
            }
        }
        if options.seedOnly {
            print(Report.seeding(options: options, seconds: seeding))
            return 0
        }

        let run = Self.runIdentifier()
        if options.lagSocket != nil {
            do {
                let figures = try await FleetLag.run(options: options, run: run, seed: Self.seed(run))
                print(FleetLag.json(figures, rate: options.rate))
                if let first = figures.firstError { printError("first error: \(first)") }
            } catch {
                printError("registry-load: \(error)")
                return 1
            }
            return 0
        }
        var workers = (0..<options.connections).map { index in
            Worker(
                index: index, connections: options.connections, operation: options.operation, gallery: options.gallery,
                run: run, random: SeededRandom(seed: Self.seed(run) &+ UInt64(index) &* 0x9E37_79B9))
        }
        do {
            if options.warmup > 0 {
                let (warmup, _) = try await runPhase(
                    socket: options.socket, workers: &workers, total: options.warmup, seconds: nil, people: people)
                if warmup.errors > 0 {
                    printError("registry-load: \(warmup.errors) errors during warm-up; first: \(warmup.firstError ?? "?")")
                }
            }
            let (tally, elapsed) = try await runPhase(
                socket: options.socket, workers: &workers, total: options.requests, seconds: options.seconds, people: people,
                queriesOut: options.queriesOut)
            print(options.json ? Report.json(tally: tally, elapsed: elapsed) : Report.line(options: options, tally: tally, elapsed: elapsed))
            if let first = tally.firstError {
                printError("first error: \(first)")
            }
            if tally.connectionsLost > 0 {
                printError("\(tally.connectionsLost) of \(options.connections) connections closed early; their remaining requests were not sent")
            }
        } catch {
            printError("registry-load: \(error)")
            return 1
        }
        return 0
    }

    /// Unique per run (wall-clock microseconds, base 36): registrations never collide with an earlier run's.
    private static func runIdentifier() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return String(UInt64(now.tv_sec) &* 1_000_000 &+ UInt64(now.tv_nsec / 1000), radix: 36)
    }

    private static func seed(_ run: String) -> UInt64 {
        // FNV-1a over the run identifier: different probes and registrations on every run.
        run.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }
}
