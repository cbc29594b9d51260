// Child process of the crash-durability test (Tests/RegistryCoreTests/PersistenceTests.swift).
//
//     registry-crash-probe DIRECTORY COUNT
//
// Opens the store in DIRECTORY and registers COUNT people one after another ("probe-0", "probe-1", …,
// each an arcface unit vector on its own axis, so none resembles another), printing
// "acknowledged probe-N" only after each register call has returned. Then it waits to be killed:
// the test sends SIGKILL at an arbitrary point and checks that every acknowledged registration is in
// the store when it is opened again.
import Glibc
import RegistryCore

let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]), (1...128).contains(count) else {
    let usage = "usage: registry-crash-probe DIRECTORY COUNT (1...128)\n"
    _ = usage.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

let engine: RegistryEngine
do {
    engine = try RegistryEngine(path: arguments[1])
} catch {
    let message = "registry-crash-probe: cannot open the store: \(error)\n"
    _ = message.withCString { write(2, $0, strlen($0)) }
    exit(3)
}
for index in 0..<count {
    var vector = [Float](repeating: 0, count: 128)
    vector[index] = 1
    _ = try await engine.register(identifier: "probe-\(index)", face: Face(FaceTemplate(algorithm: 24, vector: vector)))
    print("acknowledged probe-\(index)")
    fflush(nil)  // every stream: the test reads the pipe line by line
}
while true { pause() }
