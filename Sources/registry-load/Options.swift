import ArgumentParser
import Glibc

/// What to drive, how hard and for how long.
struct Options: ParsableArguments, Sendable {
    enum Operation: String, Sendable, CaseIterable, ExpressibleByArgument {
        case authenticate, identify, register
    }

    @Option(help: ArgumentHelp("The daemon's socket.", valueName: "path"))
    var socket = "run/registryd.sock"
    @Option(help: "Connections, each a closed loop of one request at a time.")
    var connections = 1
    @Option(help: "The operation to drive.")
    var operation = Operation.authenticate
    @Option(help: "People in the seeded gallery.")
    var people = 10_000
    @Option(help: "Floats per template: 128 (arcface, algorithm 24) or 512 (r300, algorithm 300: unit vectors, dot product).")
    var dimension = 128
    @Option(name: .customLong("requests"), help: "Measured requests in total, split across connections (default: 20000).")
    var requestCount: Int?
    @Option(help: "Measure for this many seconds instead of a request count.")
    var seconds: Double?
    @Option(help: "The gallery to seed and use (it is redefined and may be deleted: never 'default').")
    var gallery = "load"
    @Option(help: "Unmeasured requests in total before measuring.")
    var warmup = 1_000
    @Flag(help: "Print the figures as one JSON object.")
    var json = false
    @Flag(help: "Seed the gallery (or find it seeded), write --vectors-out, and stop: no requests are sent.")
    var seedOnly = false
    @Flag(
        help: """
            Use the gallery as it is, without checking or seeding it (register only): for several runs at once \
            into one gallery, seeded before by a --seed-only run (a fleet's nodes).
            """)
    var noSeed = false
    @Option(
        help: ArgumentHelp(
            """
            Measure a fleet's replication lag instead: register --rate people a second for --seconds (default 10) on \
            --socket, and time how long after each reply an authentication on this other node finds the person.
            """,
            valueName: "path"))
    var lagSocket: String?
    @Option(help: "With --lag-socket: registrations a second.")
    var rate = 1000
    @Option(help: ArgumentHelp("Write the seeded people's templates there (raw little-endian float32, in order).", valueName: "path"))
    var vectorsOut: String?
    @Option(
        help: ArgumentHelp(
            "Write the measured requests' query templates there (raw little-endian float32, connection by connection).",
            valueName: "path"))
    var queriesOut: String?

    /// Measured requests in total, split across the connections (unless `seconds` is set).
    var requests: Int { self.requestCount ?? 20_000 }

    func validate() throws {
        guard !self.socket.isEmpty else { throw ValidationError("--socket needs a path") }
        guard self.connections >= 1 else { throw ValidationError("--connections must be at least 1") }
        guard self.people >= 1 else { throw ValidationError("--people must be at least 1") }
        guard [128, 512].contains(self.dimension) else { throw ValidationError("--dimension must be 128 (arcface) or 512 (r300)") }
        if let count = self.requestCount { guard count >= 1 else { throw ValidationError("--requests must be at least 1") } }
        if let seconds = self.seconds {
            guard seconds > 0, seconds.isFinite else { throw ValidationError("--seconds must be a positive number") }
        }
        guard self.requestCount == nil || self.seconds == nil else { throw ValidationError("give --requests or --seconds, not both") }
        guard !self.gallery.isEmpty else { throw ValidationError("--gallery needs a name") }
        // Seeding redefines the gallery with one arcface or r300 registry and may delete it.
        guard self.gallery != "default" else {
            throw ValidationError("--gallery: the load gallery is redefined and deleted; use one of its own, not 'default'")
        }
        guard self.warmup >= 0 else { throw ValidationError("--warmup must be at least 0") }
        guard !self.noSeed || (self.operation == .register && !self.seedOnly && self.vectorsOut == nil) else {
            throw ValidationError("--no-seed goes with --operation register alone: other operations check what they find against the seeded people")
        }
        guard self.rate >= 1 else { throw ValidationError("--rate must be at least 1") }
        guard !(self.seedOnly && self.queriesOut != nil) else { throw ValidationError("--seed-only sends no requests: no --queries-out") }
    }
}

/// Writes a line to standard error.
func printError(_ line: String) {
    let text = line + "\n"
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { Glibc.write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
        if written <= 0 { return }
        offset += written
    }
}
