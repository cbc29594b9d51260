import Glibc

/// What to drive, how hard and for how long. Parsed by hand (this target has no ArgumentParser).
struct Options: Sendable {
    enum Operation: String, Sendable, CaseIterable {
        case authenticate, identify, register
    }

    var socket = "run/registryd.sock"
    var connections = 1
    var operation = Operation.authenticate
    var people = 10_000
    /// Measured requests in total, split across the connections (unless `seconds` is set).
    var requests = 20_000
    /// Measure for this long instead of a request count.
    var seconds: Double?
    var gallery = "load"
    /// Requests in total before measuring, split across the connections.
    var warmup = 1_000
    /// Print the figures as one JSON object.
    var json = false

    static let usage = """
        usage: registry-load [--socket PATH] [--connections N] [--operation authenticate|identify|register]
                             [--people P] [--requests R | --seconds S] [--gallery NAME] [--warmup R] [--json]

        Drives a running registryd and prints throughput and latency.

          --socket PATH       the daemon's socket (default: run/registryd.sock)
          --connections N     connections, each a closed loop of one request at a time (default: 1)
          --operation OP      authenticate, identify or register (default: authenticate)
          --people P          people in the seeded gallery (default: 10000)
          --requests R        measured requests in total, split across connections (default: 20000)
          --seconds S         measure for S seconds instead of a request count
          --gallery NAME      the gallery to seed and use (default: load)
          --warmup R          unmeasured requests in total before measuring (default: 1000)
          --json              print the figures as one JSON object

        The gallery gets one arcface registry (algorithm 24, thresholds 0.6) holding person-0 ... person-(P-1)
        with deterministic random unit vectors; it is reused when it already holds P people, else
        deleted and imported again. The measured connections all run on one thread with their requests
        encoded in advance, so the tool takes little of the CPU it shares with the daemon. Prints one
        line: operation, people, connections, requests, seconds, requests/s, p50, p90, p99 and max
        latency in ms, and the number of errors.
        """

    /// Parses `arguments` (without the program name).
    /// - Throws: ``UsageError`` naming the problem.
    init(_ arguments: [String]) throws(UsageError) {
        var remaining = arguments[...]
        var sawRequests = false
        while let flag = remaining.popFirst() {
            if flag == "--help" || flag == "-h" { throw UsageError(message: nil) }
            if flag == "--json" {
                self.json = true
                continue
            }
            guard let value = remaining.popFirst() else { throw UsageError(message: "\(flag) needs a value") }
            switch flag {
            case "--socket":
                guard !value.isEmpty else { throw UsageError(message: "--socket needs a path") }
                self.socket = value
            case "--connections": self.connections = try Self.count(value, flag, minimum: 1)
            case "--operation":
                guard let operation = Operation(rawValue: value) else {
                    throw UsageError(message: "--operation must be authenticate, identify or register, not '\(value)'")
                }
                self.operation = operation
            case "--people": self.people = try Self.count(value, flag, minimum: 1)
            case "--requests":
                self.requests = try Self.count(value, flag, minimum: 1)
                sawRequests = true
            case "--seconds":
                guard let seconds = Double(value), seconds > 0, seconds.isFinite else {
                    throw UsageError(message: "--seconds must be a positive number, not '\(value)'")
                }
                self.seconds = seconds
            case "--gallery":
                guard !value.isEmpty else { throw UsageError(message: "--gallery needs a name") }
                // Seeding redefines the gallery with one arcface registry and may delete it.
                guard value != "default" else {
                    throw UsageError(message: "--gallery: the load gallery is redefined and deleted; use one of its own, not 'default'")
                }
                self.gallery = value
            case "--warmup": self.warmup = try Self.count(value, flag, minimum: 0)
            default:
                throw UsageError(message: "unknown option '\(flag)'")
            }
        }
        if sawRequests && self.seconds != nil {
            throw UsageError(message: "give --requests or --seconds, not both")
        }
    }

    private static func count(_ value: String, _ flag: String, minimum: Int) throws(UsageError) -> Int {
        guard let number = Int(value), number >= minimum else {
            throw UsageError(message: "\(flag) must be a whole number of at least \(minimum), not '\(value)'")
        }
        return number
    }
}

/// A command line that cannot be used (`message` nil: help was asked for).
struct UsageError: Error {
    let message: String?
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
