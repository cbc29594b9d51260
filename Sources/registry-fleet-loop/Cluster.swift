import Glibc
import RegistryClient
import Synchronization
import TestSupport

struct LoopError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One fleet node: a registryd process on its own socket and data directory, started again on them
/// after a fault. Only the fault task starts and signals it.
final class Node: @unchecked Sendable {
    let index: Int
    let name: String
    let directory: String
    let binary: String
    let arguments: [String]
    let environment: [String]
    var socketPath: String { self.directory + "/registryd.sock" }
    var dataPath: String { self.directory + "/data" }
    var logPath: String { self.directory + "/registryd.log" }
    private(set) var pid: pid_t = 0

    init(index: Int, name: String, directory: String, binary: String, arguments: [String], environment: [String]) {
        self.index = index
        self.name = name
        self.directory = directory
        self.binary = binary
        self.arguments = arguments
        self.environment = environment
    }

    /// Starts the process and waits until it answers (a fleet node answers once it joined the fleet).
    func start() async throws {
        let arguments =
            [self.binary, "--socket", self.socketPath, "--data", self.dataPath, "--log-level", "warning", "--node", self.name] + self.arguments
        self.pid = try spawn(arguments, environment: self.environment, log: self.logPath)
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            var status: Int32 = 0
            if waitpid(self.pid, &status, WNOHANG) == self.pid {
                self.pid = 0
                throw LoopError("node \(self.name) exited during start-up (status \(status)): see \(self.logPath)")
            }
            if let client = try? await RegistryConnection.connect(socketPath: self.socketPath) {
                defer { Task { await client.close() } }
                if (try? await client.hello(clientName: "registry-fleet-loop")) != nil { return }
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw LoopError("node \(self.name) did not answer within 60 s of its start: see \(self.logPath)")
    }

    /// Sends `signal` and waits (up to `seconds`, then SIGKILL) for the process to end; its wait status.
    @discardableResult
    func stop(_ signal: Int32, seconds: Double = 40) -> Int32 {
        guard self.pid > 0 else { return -1 }
        kill(self.pid, signal)
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        var status: Int32 = 0
        while waitpid(self.pid, &status, WNOHANG) != self.pid {
            if ContinuousClock.now > deadline {
                kill(self.pid, SIGKILL)
                waitpid(self.pid, &status, 0)
                break
            }
            usleep(5000)
        }
        self.pid = 0
        return status
    }

    func pause() { if self.pid > 0 { kill(self.pid, SIGSTOP) } }
    func resume() { if self.pid > 0 { kill(self.pid, SIGCONT) } }
}

/// The fleet under test: a PostgreSQL primary with a synchronous streaming standby (the nodes are
/// given both, as a multi-host URL), a fleet key, and the nodes.
final class Cluster: @unchecked Sendable {
    let directory: String
    /// The two servers; `primary` indexes the one that takes writes now.
    let servers: [TestPostgres]
    private(set) var primary = 0
    let nodes: [Node]
    /// Both servers, as the nodes are given them: they find the primary among them.
    let url: String

    init(directory: String, daemon: String, nodes count: Int, control: Bool) throws {
        self.directory = directory
        let first = try TestPostgres()
        let second: TestPostgres
        do {
            second = try TestPostgres(standbyOf: first)
        } catch {
            first.remove()
            throw error
        }
        self.servers = [first, second]
        first.requireSynchronousStandby()
        let keyPath = directory + "/fleet.key"
        var generator = SystemRandomNumberGenerator()
        let key = (0..<32).map { _ in String(UInt8.random(in: 0...255, using: &generator), radix: 16).leftPadded(2) }.joined()
        try writeFile(keyPath, key + "\n", mode: 0o600)
        // Compaction often (snapshots after deletions, trimmed logs) and a short retention: a node
        // away for a few rounds loads the fleet's state rather than the entries.
        let configPath = directory + "/fleet.json"
        try writeFile(configPath, #"{"fleet": {"url": "x", "node": "x", "compactionSeconds": 2, "retentionSeconds": 20}}"# + "\n", mode: 0o644)
        let url = "postgresql://postgres@/registry?host=\(first.socketDirectory),\(second.socketDirectory)&port=\(first.port)"
        self.url = url
        self.nodes = (0..<count).map { index in
            Node(
                index: index, name: "node-\(index + 1)", directory: directory + "/node-\(index + 1)", binary: daemon,
                arguments: ["--config", configPath, "--fleet", url, "--fleet-key", keyPath],
                environment: control ? ["REGISTRYD_TEST_UNORDERED_FLEET_WRITES=1"] : [])
        }
        for node in self.nodes { mkdir(node.directory, 0o755) }
    }

    var primaryServer: TestPostgres { self.servers[self.primary] }

    /// The primary crashes; the standby is promoted (as a failover manager would, a moment later)
    /// and takes commits alone until the old primary, re-cloned from it, streams as its synchronous
    /// standby again.
    func failOver() throws {
        let old = self.servers[self.primary]
        let promoted = self.servers[1 - self.primary]
        old.stop(immediately: true)
        usleep(300_000)
        promoted.promote()
        promoted.allowAsynchronousCommits()
        self.primary = 1 - self.primary
        try old.rebuild(asStandbyOf: promoted)
        promoted.requireSynchronousStandby()
    }

    /// The head of the log as PostgreSQL has it, and what each node last reported applying.
    func logPositions() -> (head: Int64, applied: [String: Int64]) {
        let server = self.primaryServer
        let head =
            Int64(
                server.psql(
                    "SELECT greatest(coalesce((SELECT max(position) FROM fleet_log), 0), "
                        + "coalesce((SELECT value FROM registry_fleet_meta WHERE key = 'trimmed'), 0))")) ?? -1
        var applied: [String: Int64] = [:]
        for line in server.psql("SELECT node || ' ' || applied FROM fleet_nodes").split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let position = Int64(parts[1]) { applied[String(parts[0])] = position }
        }
        return (head, applied)
    }

    func remove() {
        for node in self.nodes {
            node.resume()
            node.stop(SIGKILL)
        }
        for server in self.servers { server.remove() }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        String(repeating: "0", count: max(0, width - self.count)) + self
    }
}

func writeFile(_ path: String, _ text: String, mode: mode_t) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
    guard fd >= 0 else { throw LoopError("cannot create \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    guard write(fd, bytes, bytes.count) == bytes.count else { throw LoopError("cannot write \(path)") }
}

/// Starts `arguments[0]` with the loop's environment plus `environment` (`NAME=value`), input from
/// /dev/null and output appended to `log`.
func spawn(_ arguments: [String], environment: [String], log: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var inherited: [String] = []
    var entry = environ
    while let pointer = entry.pointee {
        inherited.append(String(cString: pointer))
        entry += 1
    }
    let envp: [UnsafeMutablePointer<CChar>?] = (inherited + environment).map { strdup($0) } + [nil]
    defer { for pointer in envp { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, arguments[0], &actions, nil, argv, envp)
    guard result == 0 else { throw LoopError("cannot start \(arguments[0]): \(String(cString: strerror(result)))") }
    return pid
}
