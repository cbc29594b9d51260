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
    /// Its network namespace and link to the PostgreSQL servers.
    let network: NodeNetwork
    let name: String
    let directory: String
    let binary: String
    let arguments: [String]
    let environment: [String]
    var socketPath: String { self.directory + "/registryd.sock" }
    /// Its data directory: in its directory, or where the power-loss file system is mounted.
    let dataPath: String
    var logPath: String { self.directory + "/registryd.log" }
    private(set) var pid: pid_t = 0

    init(
        index: Int, network: NodeNetwork, name: String, directory: String, dataPath: String?, binary: String, arguments: [String],
        environment: [String]
    ) {
        self.index = index
        self.dataPath = dataPath ?? directory + "/data"
        self.network = network
        self.name = name
        self.directory = directory
        self.binary = binary
        self.arguments = arguments
        self.environment = environment
    }

    /// Starts the process and waits until it answers (a fleet node answers once it joined the fleet).
    func start() async throws {
        // In its namespace (`ip netns exec` enters it and executes registryd: the pid is the daemon's).
        let arguments =
            [
                "ip", "netns", "exec", self.network.namespace, self.binary, "--socket", self.socketPath, "--data", self.dataPath,
                "--log-level", "warning", "--node", self.name,
            ] + self.arguments
        do {
            self.pid = try spawnProcess(arguments, environment: self.environment, log: self.logPath)
        } catch {
            throw LoopError(error.description)
        }
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

    /// - Parameter powerData: node-1's data directory, on the power-loss file system (nil: in its own).
    init(directory: String, daemon: String, nodes count: Int, control: Bool, powerData: String?) throws {
        self.directory = directory
        NodeNetwork.removeStale()
        var networks: [NodeNetwork] = []
        do {
            for index in 0..<count { networks.append(try NodeNetwork(node: index)) }
        } catch {
            for network in networks { network.remove() }
            throw error
        }
        // Both servers listen on every node's link (the primary on 5432, the standby on 5433).
        let tcp = (addresses: networks.map(\.hostAddress).joined(separator: ","), trusted: NodeNetwork.trustedNetwork)
        let first: TestPostgres
        let second: TestPostgres
        do {
            first = try TestPostgres(tcp: tcp)
            do {
                second = try TestPostgres(standbyOf: first, port: 5433)
            } catch {
                first.remove()
                throw error
            }
        } catch {
            for network in networks { network.remove() }
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
        self.nodes = (0..<count).map { index in
            // Both servers, through the node's own link: it finds the primary among them.
            let host = networks[index].hostAddress
            let url = "postgresql://postgres@\(host):\(first.port),\(host):\(second.port)/registry"
            return Node(
                index: index, network: networks[index], name: "node-\(index + 1)", directory: directory + "/node-\(index + 1)",
                dataPath: index == 0 ? powerData : nil, binary: daemon,
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
        // The servers' logs stay with the run's (for a run that failed).
        for (index, server) in self.servers.enumerated() {
            _ = system("cp '\(server.base)/server.log' '\(self.directory)/postgresql-\(index + 1).log' 2>/dev/null")
            server.remove()
        }
        for node in self.nodes { node.network.remove() }
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

/// A node's network namespace and its veth pair to the host, where the PostgreSQL servers listen on
/// the host's end. Taking the host's end down cuts the node off: its packets are dropped, nothing
/// resets its connections (a cable pulled, a switch gone), until the link is up again.
struct NodeNetwork: Sendable {
    let namespace: String
    let hostInterface: String
    let hostAddress: String

    /// Names and addresses of this run (its pid): runs beside each other do not meet.
    private static let run = Int(getpid())
    private static let octet = 50 + Int(getpid()) % 150
    static let trustedNetwork = "10.\(octet).0.0/16"

    init(node index: Int) throws {
        self.namespace = "rfl-\(Self.run)-\(index + 1)"
        self.hostInterface = "rf\(Self.run)h\(index + 1)"
        let peer = "rf\(Self.run)n\(index + 1)"
        self.hostAddress = "10.\(Self.octet).\(index + 1).1"
        let nodeAddress = "10.\(Self.octet).\(index + 1).2"
        try shell(
            "ip netns add \(self.namespace) && ip link add \(self.hostInterface) type veth peer name \(peer) "
                + "&& ip link set \(peer) netns \(self.namespace) && ip addr add \(self.hostAddress)/24 dev \(self.hostInterface) "
                + "&& ip link set \(self.hostInterface) up && ip -n \(self.namespace) addr add \(nodeAddress)/24 dev \(peer) "
                + "&& ip -n \(self.namespace) link set \(peer) up && ip -n \(self.namespace) link set lo up")
    }

    func cut() throws { try shell("ip link set \(self.hostInterface) down") }

    func restore() throws { try shell("ip link set \(self.hostInterface) up") }

    func remove() {
        _ = system("ip netns del \(self.namespace) 2>/dev/null; ip link del \(self.hostInterface) 2>/dev/null")
    }

    /// Namespaces a run that was killed left behind (its pid is gone).
    static func removeStale() {
        let listing = "/tmp/registry-fleet-loop-netns.\(Self.run)"
        _ = system("ip netns list >'\(listing)' 2>/dev/null")
        defer { unlink(listing) }
        for line in readFileText(listing).split(separator: "\n") {
            let name = line.split(separator: " ").first.map(String.init) ?? ""
            let parts = name.split(separator: "-")
            guard parts.count == 3, parts[0] == "rfl", let pid = Int32(parts[1]), kill(pid, 0) != 0 else { continue }
            _ = system("ip netns del \(name) 2>/dev/null")
        }
    }
}

/// Runs `command` with the shell; throws with its output when it fails.
func shell(_ command: String) throws {
    let log = "/tmp/registry-fleet-loop-shell.\(getpid()).log"
    defer { unlink(log) }
    let status = system("(\(command)) >'\(log)' 2>&1")
    guard status == 0 else { throw LoopError("\(command) failed (status \(status >> 8)): \(readFileText(log))") }
}

/// The power-loss harness's hook (tools/power-loss --fleet; docs/power-loss.md): `arm PHASE ROUND
/// ATTEMPT` may set a trigger that cuts the power inside that phase (kills the daemon at its n-th
/// write, sync or rename, the files frozen); `cut PID` cuts it now; `reset`, once the daemon ended,
/// drops or tears what was not synced and remounts, and prints what the cut was (nothing: no cut).
struct PowerHook: Sendable {
    let program: String

    @discardableResult
    func run(_ words: [String]) throws -> String {
        let output = "/tmp/registry-fleet-loop-hook.\(getpid()).out"
        defer { unlink(output) }
        let command = ([self.program] + words).map { "'\($0)'" }.joined(separator: " ")
        let status = system("\(command) >'\(output)' 2>&1")
        let text = readFileText(output).split(whereSeparator: \.isNewline).joined(separator: "; ")
        guard status == 0 else { throw LoopError("the power hook (\(words.joined(separator: " "))) failed (status \(status >> 8)): \(text)") }
        return text
    }
}
