import ArgumentParser
import RegistryClient
import RegistryModel
import RegistryProtocol

/// `registryctl stats`: every figure the daemon reports, with each gallery's registries.
struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the daemon's statistics in full, with every gallery's registries.")

    @OptionGroup var options: GlobalOptions

    struct Result: CommandResult {
        var serverVersion: String
        var uptimeSeconds: UInt64
        var openConnections: UInt64
        var requestsServed: UInt64
        var storeBytes: UInt64
        var commits: UInt64
        var committedOperations: UInt64
        var scanKernels: String
        var prefilterRowsConsidered: UInt64
        var prefilterRowsRescored: UInt64
        var galleries: [GalleryJSON]
        private var galleryInfos: [GalleryInfo]

        private enum CodingKeys: String, CodingKey {
            case serverVersion, uptimeSeconds, openConnections, requestsServed, storeBytes, commits
            case committedOperations, scanKernels, prefilterRowsConsidered, prefilterRowsRescored, galleries
        }

        init(_ stats: Registry_V1_StatsResult) {
            self.serverVersion = stats.serverVersion
            self.uptimeSeconds = stats.uptimeSeconds
            self.openConnections = stats.openConnections
            self.requestsServed = stats.requestsServed
            self.storeBytes = stats.storeBytes
            self.commits = stats.commits
            self.committedOperations = stats.committedOperations
            self.scanKernels = stats.scanKernels
            self.prefilterRowsConsidered = stats.prefilterRowsConsidered
            self.prefilterRowsRescored = stats.prefilterRowsRescored
            self.galleryInfos = stats.galleries.map(GalleryInfo.init)
            self.galleries = self.galleryInfos.map(GalleryJSON.init)
        }

        func text(_ names: AlgorithmNames) -> String {
            var table = Table()
            table.append(["server version", self.serverVersion])
            table.append(["uptime", "\(Format.duration(seconds: self.uptimeSeconds)) (\(self.uptimeSeconds) s)"])
            table.append(["open connections", "\(self.openConnections)"])
            table.append(["requests served", "\(self.requestsServed)"])
            table.append(["store", Format.bytes(self.storeBytes)])
            table.append(["commits", "\(self.commits)"])
            table.append(["committed operations", "\(self.committedOperations)"])
            if self.commits > 0 {
                table.append(["operations per commit", Format.fixed(Double(self.committedOperations) / Double(self.commits), digits: 2)])
            }
            table.append(["scan kernels", self.scanKernels.isEmpty ? "-" : self.scanKernels])
            if self.prefilterRowsConsidered > 0 {
                let share = Format.fixed(100 * Double(self.prefilterRowsRescored) / Double(self.prefilterRowsConsidered), digits: 3)
                table.append(["prefilter", "\(self.prefilterRowsConsidered) rows considered, \(share) % rescored"])
            }
            var lines = table.lines()
            for gallery in self.galleryInfos {
                lines.append("")
                lines += GalleryJSON.lines(gallery)
            }
            return lines.joined(separator: "\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in Result(try await client.stats()) }
    }
}
