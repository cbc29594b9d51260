// swift-tools-version:6.2
import PackageDescription

// Upcoming-feature settings as in hummingbird: explicit `any` and imports that must name what they use.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "registryd",
    products: [
        .library(name: "RegistryCore", targets: ["RegistryCore"]),
        .executable(name: "registry-bench", targets: ["registry-bench"]),
    ],
    targets: [
        // Debian's liblmdb-dev ships lmdb.pc; tools/ensure-deps installs it when missing.
        .systemLibrary(name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        // A thin, safe Swift wrapper over the LMDB C API: environment, transactions, errors.
        .target(name: "LMDB", dependencies: ["CLMDB", "Locks"], swiftSettings: strictSettings),
        // pthread readers-writer lock and condition variable, shared by the wrapper and the engine.
        .target(name: "Locks", swiftSettings: strictSettings),
        // The registry engine: algorithms, validation, storage schema, in-memory index, semantics.
        // No networking here, so the daemon and the CLI can both build on it.
        .target(name: "RegistryCore", dependencies: ["LMDB", "Locks"], swiftSettings: strictSettings),
        // Benchmark: fills a registry and times identify (prints figures; not a test).
        .executableTarget(name: "registry-bench", dependencies: ["RegistryCore"], swiftSettings: strictSettings),
        // Child process for the crash-durability test: registers, prints "acknowledged", waits to be killed.
        .executableTarget(name: "registry-crash-probe", dependencies: ["RegistryCore"], swiftSettings: strictSettings),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "CLMDB"], swiftSettings: strictSettings),
        .testTarget(
            name: "RegistryCoreTests",
            dependencies: ["RegistryCore", "LMDB", "registry-crash-probe"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
