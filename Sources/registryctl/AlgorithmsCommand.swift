import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl algorithms`: the algorithms the daemon knows.
struct AlgorithmsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "algorithms",
        abstract: "List the algorithms: version, name, kind, dimension, score function, default threshold.")

    @OptionGroup var options: GlobalOptions

    struct Result: CommandResult {
        var algorithms: [Algorithm]

        func text(_ names: AlgorithmNames) -> String {
            var table = Table(header: ["VERSION", "NAME", "KIND", "DIMENSION", "SCORE", "THRESHOLD"])
            for algorithm in self.algorithms {
                table.append([
                    "\(algorithm.version)", algorithm.name, algorithm.kindName, algorithm.dimension.map(String.init) ?? "-",
                    algorithm.scoreName,
                    Format.threshold(algorithm.defaultThreshold),
                ])
            }
            return table.lines().joined(separator: "\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in
            Result(algorithms: try await client.algorithms())
        }
    }
}
