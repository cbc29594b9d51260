import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

/// A real `registryd` process on a temporary socket and data directory.
final class Daemon: @unchecked Sendable {
    let directory: String
    let socketPath: String
    let dataPath: String
    private(set) var pid: pid_t = 0
    private let extraArguments: [String]
    private let environment: [String]

    /// Starts the daemon and waits until its socket answers.
    /// - Parameter environment: extra `NAME=value` entries for the daemon's environment.
    init(arguments: [String] = [], environment: [String] = []) throws {
        self.directory = TemporaryDirectory("registryd-it").path
        self.socketPath = self.directory + "/run/registryd.sock"
        self.dataPath = self.directory + "/data"
        self.extraArguments = arguments
        self.environment = environment
        try self.start()
    }

    /// A second daemon with its own data directory but `other`'s socket path.
    init(sharingSocketOf other: Daemon) throws {
        self.directory = TemporaryDirectory("registryd-it").path
        self.socketPath = other.socketPath
        self.dataPath = self.directory + "/data"
        self.extraArguments = []
        self.environment = []
        try self.start()
    }

    /// Another daemon on `other`'s directory, socket and data (which must be stopped), with other flags.
    init(reusing other: Daemon, arguments: [String]) throws {
        self.directory = TemporaryDirectory("registryd-it").path
        self.socketPath = other.socketPath
        self.dataPath = other.dataPath
        self.extraArguments = arguments
        self.environment = []
        try self.start()
    }

    deinit {
        if self.pid > 0 {
            kill(self.pid, SIGKILL)
            var status: Int32 = 0
            waitpid(self.pid, &status, 0)
        }
        _ = system("rm -rf '\(self.directory)'")
    }

    /// Starts (or restarts) the process on the same socket and data directory.
    func start() throws {
        let binary = try registrydBinary()
        let arguments = [binary, "--socket", self.socketPath, "--data", self.dataPath, "--log-level", "warning"] + self.extraArguments
        let pid = try spawn(arguments, environment: self.environment, log: self.directory + "/registryd.log")
        self.pid = pid
        for _ in 0..<400 {
            // Ready when the socket answers and this process opened its store (registryd checks the
            // socket before opening the store, so a daemon refusing a live socket never gets here).
            if RawConnection.canConnect(self.socketPath) && access(self.dataPath + "/data.mdb", F_OK) == 0 { return }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                self.pid = 0
                throw HarnessError("registryd exited during start-up: \(self.log)")
            }
            usleep(25_000)
        }
        throw HarnessError("registryd did not start listening within 10 s: \(self.log)")
    }

    /// Sends `signal` and waits for the process to exit; returns its exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        guard self.pid > 0 else { return -1 }
        kill(self.pid, signal)
        var status: Int32 = 0
        waitpid(self.pid, &status, 0)
        self.pid = 0
        return status
    }

    func client() async throws -> RegistryConnection {
        try await RegistryConnection.connect(socketPath: self.socketPath)
    }

    var log: String {
        guard let file = fopen(self.directory + "/registryd.log", "r") else { return "" }
        defer { fclose(file) }
        var text = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), file) != nil {
            text += buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        }
        return text
    }
}

/// Runs `arguments[0]` to its end with standard output and error into `log` (replaced); its exit
/// status and what it printed.
func run(_ arguments: [String], environment: [String] = [], log: String) throws -> (status: Int32, output: String) {
    unlink(log)
    let pid = try spawn(arguments, environment: environment, log: log)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let output = readFileText(log)
    guard status & 0x7F == 0 else { throw HarnessError("\(arguments[0]) was killed by signal \(status & 0x7F): \(output)") }
    return ((status >> 8) & 0xFF, output)
}

/// ``spawnProcess(_:environment:log:)``, failing with a ``HarnessError``.
func spawn(_ arguments: [String], environment: [String] = [], log: String) throws -> pid_t {
    do {
        return try spawnProcess(arguments, environment: environment, log: log)
    } catch {
        throw HarnessError(error.description)
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The registryd the tests start: REGISTRYD_BINARY when set (to run the tests against another build,
/// e.g. an older one, to show a test fails there), else the one built beside the tests.
func registrydBinary() throws -> String {
    guard let binary = getenv("REGISTRYD_BINARY").map({ String(cString: $0) }) ?? siblingExecutable("registryd") else {
        throw HarnessError("registryd binary not found next to the tests")
    }
    return binary
}

/// Every identifier stored in the default gallery, page by page.
func identifiersStored(in client: RegistryConnection) async throws -> Set<String> {
    var stored: Set<String> = []
    var after: String?
    repeat {
        let page = try await client.identifiers(after: after, limit: 1000)
        stored.formUnion(page.identifiers)
        after = page.next
    } while after != nil
    return stored
}

/// Exact-score vectors (see RegistryEngineTests' Support.swift): the first 16 values are ±0.25.
func signs(_ flipped: Set<Int>, dimension: Int = 128) -> [Float] {
    var values = [Float](repeating: 0, count: dimension)
    for i in 0..<16 { values[i] = flipped.contains(i) ? -0.25 : 0.25 }
    return values
}

/// A unit vector on its own axis: orthogonal to every other axis's, so no two are similar.
func axis(_ index: Int, dimension: Int = 128) -> [Float] {
    var values = [Float](repeating: 0, count: dimension)
    values[index] = 1
    return values
}

/// A plain thread for blocking socket calls: test code that blocks must not sit on the cooperative
/// pool or on libdispatch's (both sized to the cores, so blocked senders could starve the readers).
final class BlockingThread: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: @Sendable () -> Void

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
        let box = Unmanaged.passRetained(self)
        pthread_create(
            &self.thread, nil,
            { raw in
                let me = Unmanaged<BlockingThread>.fromOpaque(raw!).takeRetainedValue()
                me.body()
                return nil
            }, box.toOpaque())
    }

    func join() {
        pthread_join(self.thread, nil)
    }
}
