// swift-tools-version:6.2
import PackageDescription

// Upcoming-feature settings as in hummingbird: explicit `any` and imports that must name what they use.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let nioCore = Target.Dependency.product(name: "NIOCore", package: "swift-nio")
let nioPosix = Target.Dependency.product(name: "NIOPosix", package: "swift-nio")
let protobuf = Target.Dependency.product(name: "SwiftProtobuf", package: "swift-protobuf")
let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
let serviceLifecycle = Target.Dependency.product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
let unixSignals = Target.Dependency.product(name: "UnixSignals", package: "swift-service-lifecycle")
let coreMetrics = Target.Dependency.product(name: "CoreMetrics", package: "swift-metrics")
let metrics = Target.Dependency.product(name: "Metrics", package: "swift-metrics")
let prometheus = Target.Dependency.product(name: "Prometheus", package: "swift-prometheus")

// libFuzzer targets (tools/fuzz builds them with sanitizers, see the end of this file; a plain build
// links each as a no-op executable). Sources in fuzz/targets/<name>, seed corpora in fuzz/corpus/.
let fuzzTargets: [Target] = [
    // libFuzzer's driver, which each target's main runs.
    .target(name: "FuzzDriver", dependencies: ["SyntheticFaces"], path: "fuzz/targets/FuzzDriver", swiftSettings: strictSettings),
    .executableTarget(
        name: "FuzzFrame", dependencies: ["FuzzDriver", "RegistryProtocol", nioCore, protobuf], path: "fuzz/targets/FuzzFrame",
        swiftSettings: strictSettings),
    .executableTarget(
        name: "FuzzDispatch",
        dependencies: ["FuzzDriver", "RegistryServer", "RegistryProtocol", "RegistryEngine", "RegistryModel", nioCore, protobuf, logging],
        path: "fuzz/targets/FuzzDispatch", swiftSettings: strictSettings),
    .executableTarget(
        name: "FuzzCtlInput", dependencies: ["FuzzDriver", "RegistryCtlInput", "RegistryModel"], path: "fuzz/targets/FuzzCtlInput",
        swiftSettings: strictSettings),
    .executableTarget(
        name: "FuzzConfig", dependencies: ["FuzzDriver", "RegistryServer", "RegistryModel"], path: "fuzz/targets/FuzzConfig",
        swiftSettings: strictSettings),
    // Writes the generated seeds (tools/fuzz --seeds); an ordinary executable.
    .executableTarget(
        name: "FuzzSeeds", dependencies: ["RegistryCtlInput", "RegistryProtocol", "RegistryModel", protobuf], path: "fuzz/targets/FuzzSeeds",
        swiftSettings: strictSettings),
]

let package = Package(
    name: "registryd",
    products: [
        .executable(name: "registryd", targets: ["registryd"]),
        .executable(name: "registryctl", targets: ["registryctl"]),
        .library(name: "RegistryClient", targets: ["RegistryClient"]),
        .library(name: "RegistryModel", targets: ["RegistryModel"]),
        .library(name: "RegistryEngine", targets: ["RegistryEngine"]),
        .executable(name: "registry-bench", targets: ["registry-bench"]),
        .executable(name: "registry-load", targets: ["registry-load"]),
        .executable(name: "registry-crash-loop", targets: ["registry-crash-loop"]),
        .executable(name: "registry-fleet-loop", targets: ["registry-fleet-loop"]),
        .executable(name: "registry-landmark-eval", targets: ["registry-landmark-eval"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // AES-GCM for templates at rest (BoringSSL-backed on Linux).
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // Request counts, latencies and the writer's figures, exposed in the Prometheus text format.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The fleet's record of truth (docs/fleet.md): PostgreSQL over PostgresNIO.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // LMDB 0.9.24 (the version Debian 12 ships), built from source with one patch that zeroes the
        // unused part of every page it writes, so that erased data cannot reach the file
        // (Sources/CLMDB/README.md).
        .target(name: "CLMDB", exclude: ["README.md", "LICENSE", "COPYRIGHT"]),
        // libsystemd's sd_notify and sd_listen_fds (socket activation, Type=notify, watchdog).
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // pthread readers-writer lock and condition variable, shared by the wrapper and the engine.
        .target(name: "Locks", swiftSettings: strictSettings),
        // A thin, safe Swift wrapper over the LMDB C API: environment, transactions, errors.
        .target(name: "CPrefetch"),
        .target(name: "LMDB", dependencies: ["CLMDB", "CPrefetch", "Locks"], swiftSettings: strictSettings),
        // The value types every layer shares: faces, templates, landmarks, algorithms and their
        // catalogue, results, errors, configuration, the capture and liveness gates' computations, and
        // CRC-32C (the engine's records, registryctl's dumps). The protocol, the client and registryctl
        // build on this alone. Its one dependency, CChecksum, is CRC-32C's crc32 instruction (two C
        // functions, chosen at run time).
        .target(name: "RegistryModel", dependencies: ["CChecksum"], swiftSettings: strictSettings),
        .target(name: "CChecksum"),
        // Int8 codes of float32 rows and the prefilter's kernels, one function per instruction set
        // (target attributes, chosen at run time from cpuid): the package builds for any x86-64.
        .target(name: "CScanKernels"),
        // The registry engine: semantics, the in-memory index and its scans, the LMDB storage schema.
        // No networking here.
        .target(
            name: "RegistryEngine",
            dependencies: ["RegistryModel", "CScanKernels", "CPrefetch", "LMDB", "Locks", coreMetrics, .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings),
        // The fleet's record of truth in PostgreSQL: where it is (a postgresql:// URL), its schema and
        // its migrations. No LMDB here: the engine applies what the fleet's log says.
        .target(
            name: "RegistryFleet",
            dependencies: [
                "RegistryModel", logging, nioCore, .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings),
        // The wire: generated protobuf messages (proto/registry.proto), framing, and conversions to
        // and from the engine's types.
        .target(name: "RegistryProtocol", dependencies: ["RegistryModel", protobuf, nioCore], swiftSettings: strictSettings),
        // The daemon as a library: configuration, the NIO Unix-socket server, request dispatch.
        .target(
            name: "RegistryServer",
            dependencies: [
                "RegistryEngine", "RegistryFleet", "RegistryModel", "RegistryProtocol", "CSystemd", nioCore, nioPosix, logging, serviceLifecycle,
                unixSignals, metrics, prometheus, .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: strictSettings),
        // The Swift client library apps, registryctl and the tests use.
        .target(name: "RegistryClient", dependencies: ["RegistryProtocol", "RegistryModel", nioCore, nioPosix], swiftSettings: strictSettings),
        .executableTarget(
            name: "registryd", dependencies: ["RegistryServer", "RegistryEngine", "RegistryModel", argumentParser, logging, serviceLifecycle],
            swiftSettings: strictSettings),
        // registryctl's input files (Ver-ID JSON templates, face and enrolment files, the protobuf export
        // stream): a library, so that a fuzz target can link the parsers.
        .target(name: "RegistryCtlInput", dependencies: ["RegistryModel", "RegistryProtocol", protobuf], swiftSettings: strictSettings),
        .executableTarget(
            name: "registryctl", dependencies: ["RegistryClient", "RegistryProtocol", "RegistryModel", "RegistryCtlInput", argumentParser, protobuf],
            swiftSettings: strictSettings),
        // Benchmark: fills a registry and times identify (prints figures; not a test).
        .executableTarget(
            name: "registry-bench", dependencies: ["RegistryEngine", "RegistryModel", "RegistryClient", argumentParser], swiftSettings: strictSettings
        ),
        // Load tool: N connections driving the daemon, printing requests/s and latency percentiles.
        .executableTarget(
            name: "registry-load",
            dependencies: ["RegistryClient", "RegistryModel", "RegistryProtocol", "SyntheticFaces", nioCore, nioPosix, protobuf, argumentParser],
            swiftSettings: strictSettings),
        // Synthetic 3-D faces and landmark captures (evaluation, examples, tests).
        .target(name: "SyntheticFaces", dependencies: ["RegistryModel"], swiftSettings: strictSettings),
        // tools/landmark-eval: both landmark algorithms through the daemon, error rates per pose.
        .executableTarget(
            name: "registry-landmark-eval", dependencies: ["RegistryClient", "RegistryModel", "SyntheticFaces", argumentParser],
            swiftSettings: strictSettings),
        // tools/install: the manual pages of registryctl and registryd from their --experimental-dump-help.
        .executableTarget(name: "registry-manual", dependencies: [argumentParser], swiftSettings: strictSettings),
        // Child process for the crash-durability test: registers, prints "acknowledged", waits to be killed.
        .executableTarget(name: "registry-crash-probe", dependencies: ["RegistryEngine", "RegistryModel"], swiftSettings: strictSettings),
        // Crash loop (tools/crash-loop): SIGKILL/SIGTERM registryd under pipelined registrations, restart, check.
        .executableTarget(
            name: "registry-crash-loop", dependencies: ["RegistryProtocol", "RegistryModel", "SyntheticFaces", "TestSupport", protobuf, argumentParser],
            swiftSettings: strictSettings),
        // Fleet fault loop (tools/fleet-loop): faults under a fleet and its PostgreSQL, then a history check.
        .executableTarget(
            name: "registry-fleet-loop", dependencies: ["RegistryClient", "RegistryModel", "SyntheticFaces", "TestSupport", argumentParser],
            swiftSettings: strictSettings),
        // What the test targets share: temporary directories, the products' executables.
        .target(
            name: "TestSupport", dependencies: ["RegistryModel", "RegistryProtocol", "SyntheticFaces", protobuf], path: "Tests/TestSupport",
            swiftSettings: strictSettings),
        .testTarget(
            name: "RegistryFleetTests",
            dependencies: ["RegistryFleet", "RegistryModel", "TestSupport", logging, .product(name: "PostgresNIO", package: "postgres-nio")],
            swiftSettings: strictSettings),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "CLMDB", "SyntheticFaces", "TestSupport"], swiftSettings: strictSettings),
        .testTarget(
            name: "RegistryEngineTests",
            dependencies: [
                "RegistryEngine", "RegistryModel", "CScanKernels", "LMDB", "Locks", "SyntheticFaces", "TestSupport", "registry-crash-probe",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "RegistryProtocolTests",
            dependencies: [
                "RegistryProtocol", "RegistryModel", "TestSupport", nioCore, protobuf, .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOTestUtils", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "RegistryCtlTests",
            dependencies: [
                "registryctl", "RegistryCtlInput", "RegistryModel", "RegistryProtocol", "SyntheticFaces", "TestSupport", argumentParser, protobuf,
                // Its reading of the help's EXIT STATUS table, held to registryctl's ExitStatus.
                "registry-manual",
            ],
            swiftSettings: strictSettings),
        // The server in-process: connection handlers on embedded channels, a connection over a real store.
        .testTarget(
            name: "RegistryServerTests",
            dependencies: [
                "RegistryServer", "RegistryProtocol", "RegistryEngine", "RegistryModel", "SyntheticFaces", "TestSupport", nioCore, nioPosix,
                logging, protobuf,
                serviceLifecycle, prometheus, .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "RegistryClient", "RegistryProtocol", "RegistryModel", "TestSupport", "registryd", "registryctl", nioCore, nioPosix, protobuf,
            ],
            swiftSettings: strictSettings),
    ] + fuzzTargets,
    swiftLanguageModes: [.v6]
)

// tools/fuzz builds with --sanitize=address and REGISTRYD_FUZZ_COVERAGE=1: libFuzzer's coverage counters
// then go into this package's own targets only, 47k of them. With every dependency instrumented too
// (SwiftPM's --sanitize=fuzzer) there were 483k, swift-protobuf, SwiftNIO and swift-async-algorithms the
// largest share, and libFuzzer's per-input pass over them took 60 % of the dispatch target's time. The
// dependencies keep their address sanitizer.
if Context.environment["REGISTRYD_FUZZ_COVERAGE"] == "1" {
    let fuzzNames = Set(fuzzTargets.map(\.name))
    for target in package.targets where target.type == .regular || target.type == .executable {
        if ["CLMDB", "CScanKernels", "CChecksum", "CPrefetch"].contains(target.name) {
            target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-fsanitize=fuzzer-no-link"])]
        } else {
            target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=fuzzer"])]
        }
        if fuzzNames.contains(target.name) {
            // Each target's main.swift runs libFuzzer's driver (SwiftPM names the executable's own
            // main). The toolchain's lld links them: gold stops with an internal error on these objects.
            target.swiftSettings = (target.swiftSettings ?? []) + [.define("REGISTRYD_FUZZING")]
            target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=fuzzer", "-use-ld=lld"])]
        }
    }
}
