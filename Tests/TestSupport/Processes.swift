import Glibc

/// Why a process could not be started.
public struct SpawnRefused: Error, CustomStringConvertible {
    public let description: String
}

/// Starts `arguments[0]` with the rest as arguments, this process's environment with `environment`
/// (`NAME=value`) added or replacing the same names, and standard output and error appended to `log`.
public func spawnProcess(_ arguments: [String], environment: [String] = [], log: String) throws(SpawnRefused) -> pid_t {
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var inherited: [String] = []
    var entry = environ
    while let pointer = entry.pointee {
        inherited.append(String(cString: pointer))
        entry += 1
    }
    // Replaced, not added after: getenv takes the first entry of a name, so an inherited one would win.
    let added = Set(environment.map { $0.prefix { $0 != "=" } })
    let entries = inherited.filter { !added.contains($0.prefix { $0 != "=" }) } + environment
    let envp: [UnsafeMutablePointer<CChar>?] = entries.map { strdup($0) } + [nil]
    defer { for pointer in envp { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // Nothing of the runner's: a daemon left behind by a crashed test process must not hold the
    // runner's output open (CI would wait for its end), nor read its input.
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    // Nor any other descriptor of the test process: tests run in parallel, and a daemon that
    // inherited another test's client socket kept that connection open after its client closed it
    // (its own daemon then never saw the end, and held the connection's slot).
    // (glibc 2.34's posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module does not declare.)
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    guard let closeFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
        throw SpawnRefused(description: "this C library cannot close a spawned process's inherited descriptors")
    }
    _ = unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3)
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, arguments[0], &actions, nil, argv, envp)
    guard rc == 0 else { throw SpawnRefused(description: "cannot start \(arguments[0]): \(String(cString: strerror(rc)))") }
    return pid
}
