// Child process of the crash-durability test (Tests/RegistryEngineTests/PersistenceTests.swift).
//
//     registry-crash-probe DIRECTORY COUNT [CONCURRENCY]
//
// Opens the store in DIRECTORY and registers COUNT people ("probe-0", "probe-1", …, each an arcface
// unit vector on its own axis, so none resembles another), CONCURRENCY at a time (default 1; more
// make the writer group them into shared commits, so a kill lands in the middle of batches),
// printing "acknowledged probe-N" only after that register call has returned. Then it waits to be
// killed: the test sends SIGKILL at an arbitrary point and checks that every acknowledged
// registration is in the store when it is opened again.
import Glibc
import RegistryEngine
import RegistryModel

let arguments = CommandLine.arguments
let concurrency = arguments.count == 4 ? Int(arguments[3]) ?? 0 : 1
guard arguments.count == 3 || arguments.count == 4, let count = Int(arguments[2]), (1...128).contains(count), (1...64).contains(concurrency) else {
    let usage = "usage: registry-crash-probe DIRECTORY COUNT (1...128) [CONCURRENCY (1...64)]\n"
    _ = usage.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

let engine: Engine
do {
    engine = try Engine(path: arguments[1])
} catch {
    let message = "registry-crash-probe: cannot open the store: \(error)\n"
    _ = message.withCString { write(2, $0, strlen($0)) }
    exit(3)
}
try await withThrowingTaskGroup(of: Void.self) { group in
    for index in 0..<count {
        if index >= concurrency { try await group.next() }
        group.addTask {
            var vector = [Float](repeating: 0, count: 128)
            vector[index] = 1
            _ = try await engine.register(identifier: "probe-\(index)", face: Face(FaceTemplate(algorithm: 24, vector: vector)))
            // One write per line, so concurrent acknowledgements never interleave.
            let line = "acknowledged probe-\(index)\n"
            _ = line.withCString { write(1, $0, strlen($0)) }
        }
    }
    try await group.waitForAll()
}
while true { pause() }
