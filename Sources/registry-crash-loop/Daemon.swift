import Glibc
import RegistryProtocol
import SwiftProtobuf
import TestSupport

/// The daemon's pid while one runs, for the tool's own SIGINT/SIGTERM handler: a daemon is never
/// left behind when the tool is interrupted. Only the main thread writes it.
nonisolated(unsafe) var runningDaemonPID: pid_t = 0

/// How a process ended.
enum ExitStatus: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)

    /// Decodes a waitpid status (WIFEXITED, WEXITSTATUS and WTERMSIG are macros Swift does not import).
    init(waitStatus status: Int32) {
        if status & 0x7F == 0 {
            self = .exited((status >> 8) & 0xFF)
        } else {
            self = .signalled(status & 0x7F)
        }
    }

    var description: String {
        switch self {
        case .exited(let code): "exit status \(code)"
        case .signalled(let signal): "killed by signal \(signal) (\(String(cString: strsignal(signal))))"
        }
    }
}

/// One registryd process on the run's socket and data directory; its output is appended to a log.
final class Daemon {
    let pid: pid_t
    private(set) var status: ExitStatus?
    let socketPath: String

    /// Starts `binary --socket SOCKET --data DATA --log-level warning EXTRA…`, with `environment`
    /// (NAME=VALUE) added to the loop's own.
    init(binary: String, socketPath: String, dataDirectory: String, logPath: String, extraArguments: [String], environment: [String] = []) throws {
        let arguments = [binary, "--socket", socketPath, "--data", dataDirectory, "--log-level", "warning"] + extraArguments
        let pid: pid_t
        do {
            pid = try spawnProcess(arguments, environment: environment, log: logPath)
        } catch {
            throw CrashLoopError(error.description)
        }
        self.pid = pid
        self.socketPath = socketPath
        runningDaemonPID = pid
    }

    /// Reaps the process if it has ended; true once it has.
    @discardableResult
    func poll() -> Bool {
        guard self.status == nil else { return true }
        var status: Int32 = 0
        let reaped = waitpid(self.pid, &status, WNOHANG)
        if reaped == self.pid {
            self.status = ExitStatus(waitStatus: status)
            if runningDaemonPID == self.pid { runningDaemonPID = 0 }
        }
        return self.status != nil
    }

    /// Waits up to `seconds` for the process to end; its status, or nil if it still runs.
    func wait(seconds: Double) -> ExitStatus? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
        while !self.poll() && clock.now < deadline { usleep(2000) }
        return self.status
    }

    func signal(_ signal: Int32) {
        if self.status == nil { kill(self.pid, signal) }
    }

    /// Kills and reaps whatever is left (cleanup after a failure).
    func killHard() {
        self.signal(SIGKILL)
        _ = self.wait(seconds: 10)
    }

    /// Waits until the daemon answers a Hello on a new connection; throws if it exits or times out.
    func waitUntilReady(seconds: Double) throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
        var lastProblem = "no attempt"
        while clock.now < deadline {
            if self.poll() { throw CrashLoopError("registryd ended during start-up: \(self.status!)") }
            do {
                let connection = try FrameConnection(path: self.socketPath)
                var request = Registry_V1_Request()
                request.id = 1
                request.hello = .with {
                    $0.protocolMajor = 1
                    $0.clientName = "registry-crash-loop"
                }
                let reply = try connection.exchange([request], timeoutSeconds: max(1, seconds / 2))[0]
                guard case .hello = reply.result else { throw CrashLoopError("Hello answered with \(reply.result.map { "\($0)" } ?? "nothing")") }
                return
            } catch {
                lastProblem = "\(error)"
            }
            usleep(10_000)
        }
        throw CrashLoopError("registryd did not answer within \(seconds) s (last: \(lastProblem))")
    }
}
