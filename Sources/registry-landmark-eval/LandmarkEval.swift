import ArgumentParser
import RegistryModel

/// Error rates of the landmark algorithms on synthetic faces, scored by a running daemon, and the
/// faces of the README's migration walkthrough. tools/landmark-eval starts a daemon and runs
/// `evaluate`; examples/generate-migration-examples runs `examples`.
@main
struct LandmarkEval: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry-landmark-eval",
        abstract: "Evaluate the landmark algorithms through registryd on synthetic faces.",
        version: RegistryVersion.current,
        subcommands: [Evaluate.self, Examples.self])
}
