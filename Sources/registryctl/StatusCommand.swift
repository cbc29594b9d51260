import ArgumentParser
import RegistryClient
import RegistryModel
import RegistryProtocol

/// `registryctl status`: is the daemon up, which version, how busy, how big.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the daemon's version, uptime, load, store size and galleries.")

    @OptionGroup var options: GlobalOptions

    struct Result: CommandResult {
        struct ProtocolVersion: Encodable {
            var major: UInt32
            var minor: UInt32
        }

        struct GallerySummary: Encodable {
            var name: String
            var identifiers: Int
        }

        var socket: String
        var `protocol`: ProtocolVersion
        var serverVersion: String
        var uptimeSeconds: UInt64
        var openConnections: UInt64
        var requestsServed: UInt64
        var storeBytes: UInt64
        var commits: UInt64
        var committedOperations: UInt64
        var scanKernels: String
        var galleries: [GallerySummary]
        /// Fleet mode only.
        var fleet: FleetFigures?

        func text(_ names: AlgorithmNames) -> String {
            var table = Table()
            table.append(["registryd", "\(self.serverVersion) (protocol \(self.protocol.major).\(self.protocol.minor))"])
            table.append(["socket", self.socket])
            table.append(["uptime", Format.duration(seconds: self.uptimeSeconds)])
            table.append(["connections", "\(self.openConnections) open"])
            table.append(["requests", "\(self.requestsServed) served"])
            table.append(["store", Format.bytes(self.storeBytes)])
            table.append(["commits", "\(self.commits) (\(self.committedOperations) operations)"])
            table.append(["scan kernels", self.scanKernels.isEmpty ? "-" : self.scanKernels])
            if let fleet = self.fleet { table.append(["fleet", fleet.line]) }
            var lines = table.lines()
            lines.append("galleries")
            var galleries = Table()
            for gallery in self.galleries { galleries.append([gallery.name, Format.plural(gallery.identifiers, "identifier")]) }
            lines += galleries.lines(indent: "  ")
            return lines.joined(separator: "\n")
        }
    }

    func run() async throws {
        let socket = self.options.socketPath
        try await Runner(self.options).run { client in
            let hello = try await client.hello(clientName: "registryctl")
            let stats = try await client.stats()
            return Result(
                socket: socket,
                protocol: .init(major: hello.protocolMajor, minor: hello.protocolMinor),
                serverVersion: hello.serverVersion.isEmpty ? stats.serverVersion : hello.serverVersion,
                uptimeSeconds: stats.uptimeSeconds, openConnections: stats.openConnections,
                requestsServed: stats.requestsServed, storeBytes: stats.storeBytes, commits: stats.commits,
                committedOperations: stats.committedOperations, scanKernels: stats.scanKernels,
                galleries: stats.galleries.map { .init(name: $0.name, identifiers: Int($0.identifierCount)) }, fleet: FleetFigures(stats))
        }
    }
}
