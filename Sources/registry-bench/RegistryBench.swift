// registry-bench: measures the engine in-process and the daemon from outside. Prints figures;
// asserts nothing. `tools/bench` drives the subcommands that print JSON and sets anchors beside them.
import ArgumentParser
import RegistryModel

@main
struct RegistryBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry-bench",
        abstract: "Benchmarks of the registry engine and daemon (figures, no assertions; tools/bench runs them).",
        version: RegistryVersion.current,
        subcommands: [EngineRun.self, MakeStore.self, IdentifyInStore.self, DaemonIdentify.self, LandmarkBench.self, BandwidthProbe.self],
        defaultSubcommand: EngineRun.self)
}
