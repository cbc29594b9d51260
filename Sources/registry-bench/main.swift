// registry-bench: measures the engine in-process and the daemon from outside. Prints figures;
// asserts nothing. `tools/bench` drives the subcommands that print JSON and sets anchors beside them.
//
//     registry-bench [engine] [--count N] [--dimension D] [--queries Q] [--registrations R]
//     registry-bench make-store --store DIR --vectors FILE --dimension D
//     registry-bench identify --store DIR --queries FILE --dimension D [--k K]
//     registry-bench daemon-identify --socket PATH --queries FILE --dimension D [--k K]
//     registry-bench landmarks --count N --queries Q --out DIR [--k K]
//     registry-bench bandwidth [--gib G]
import Glibc

var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.first.flatMap { $0.hasPrefix("-") ? nil : $0 } ?? "engine"
if arguments.first == command { arguments.removeFirst() }
do {
    let flags = try Flags(arguments)
    switch command {
    case "engine": try await EngineRun.run(flags)
    case "make-store": try await StoreBench.make(flags)
    case "identify": try await StoreBench.identify(flags)
    case "daemon-identify": try await StoreBench.daemonIdentify(flags)
    case "landmarks": try await LandmarkBench.run(flags)
    case "bandwidth": BandwidthProbe.run(flags)
    default: throw UsageError("unknown command '\(command)'")
    }
} catch let error as UsageError {
    printError("registry-bench: \(error.message)")
    printError("commands: engine, make-store, identify, daemon-identify, landmarks, bandwidth (see Sources/registry-bench/main.swift)")
    exit(2)
} catch {
    printError("registry-bench: \(error)")
    exit(1)
}
