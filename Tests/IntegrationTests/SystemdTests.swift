import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

/// systemd integration tested with systemd's own tools, without systemd as PID 1.
@Suite struct SystemdTests {
    /// A datagram socket standing in for systemd's notify socket.
    final class NotifySocket {
        let path: String
        let fd: Int32

        init(directory: String) throws {
            self.path = directory + "/notify"
            self.fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(self.path.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: bytes)
                raw[bytes.count] = 0
            }
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(self.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard rc == 0 else { throw HarnessError("cannot bind \(self.path)") }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(self.fd) }

        /// The next notification, or nil after 5 s of silence.
        func next() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(self.fd, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil
        }

        /// Notifications until one contains `text` (inclusive), or nil if it never comes.
        func until(_ text: String) -> [String]? {
            var seen: [String] = []
            while let message = self.next() {
                seen.append(message)
                if message.contains(text) { return seen }
            }
            return nil
        }
    }

    @Test func socketActivationServesTheInheritedSocket() async throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let registryd = try #require(siblingExecutable("registryd"))
        let socketPath = directory + "/activated.sock"
        // systemd-socket-activate binds and listens, and execs registryd with the socket as fd 3 on
        // the first connection. registryd's own --socket path must stay unused.
        let pid = try spawn(
            ["systemd-socket-activate", "-l", socketPath, registryd, "--data", directory + "/data", "--socket", directory + "/unused.sock"],
            log: directory + "/registryd.log")
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        for _ in 0..<200 where !RawConnection.canConnect(socketPath) { usleep(25_000) }
        let client = try await RegistryConnection.connect(socketPath: socketPath)
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(0))))
        let identified = try await client.identify(face: Face(FaceTemplate(algorithm: 24, vector: axis(0))), autoEnrol: false)
        #expect(identified.matches.map(\.identifier) == ["alice"])
        await client.close()
        #expect(access(directory + "/unused.sock", F_OK) != 0, "an activated daemon must not bind its own socket")
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        #expect(status == 0)
    }

    @Test func typeNotifyReadyWatchdogAndStopping() async throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let notify = try NotifySocket(directory: directory)
        let daemon = try Daemon(environment: ["NOTIFY_SOCKET=\(notify.path)", "WATCHDOG_USEC=200000"])
        let ready = try #require(notify.until("READY=1"), "no READY=1")
        #expect(ready.last?.contains("STATUS=serving 0 templates") == true)
        // Keep-alives at half the 200 ms interval.
        var watchdogs: [ContinuousClock.Instant] = []
        while watchdogs.count < 3, let message = notify.next() {
            if message == "WATCHDOG=1" { watchdogs.append(.now) }
        }
        #expect(watchdogs.count == 3)
        if watchdogs.count == 3 {
            let gap = watchdogs[2] - watchdogs[1]
            #expect(gap > .milliseconds(50) && gap < .milliseconds(1000), "keep-alive gap \(gap) (pings every 100 ms; generous for a loaded machine)")
        }
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(notify.until("STOPPING=1") != nil, "no STOPPING=1 on SIGTERM")
    }

    /// With the packaged unit's WatchdogSec (30 s: a keep-alive every 15 s), SIGTERM starts the
    /// drain at once (STOPPING=1, the listener closed), instead of the daemon going on serving until
    /// its next keep-alive (it did, for up to 15 s, while the watchdog's wait held the stop back).
    @Test func aStopUnderTheUnitsWatchdogBeginsAtOnce() async throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let notify = try NotifySocket(directory: directory)
        let daemon = try Daemon(environment: ["NOTIFY_SOCKET=\(notify.path)", "WATCHDOG_USEC=30000000"])
        #expect(notify.until("READY=1") != nil, "no READY=1")
        let client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(0))))
        await client.close()
        kill(daemon.pid, SIGTERM)
        // `until` gives up after 5 s of silence; the next keep-alive would be 15 s away.
        #expect(notify.until("STOPPING=1") != nil, "no STOPPING=1 within 5 s of SIGTERM")
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }

    /// Keep-alives go on while the daemon drains: a drain that lasts (here a client that never reads
    /// its replies holds it until the 3 s deadline) is not taken for a hang. They stopped at SIGTERM
    /// before, when the watchdog was the first service stopped.
    @Test func keepAlivesGoOnWhileTheDaemonDrains() async throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let notify = try NotifySocket(directory: directory)
        let daemon = try Daemon(arguments: ["--drain-deadline", "3"], environment: ["NOTIFY_SOCKET=\(notify.path)", "WATCHDOG_USEC=200000"])
        #expect(notify.until("READY=1") != nil, "no READY=1")
        // Frames the daemon refuses, a reply each, sent until neither the socket nor the daemon takes
        // more: its replies are then unwritten, and its reads held back.
        let client = try RawConnection(daemon.socketPath)
        let frames = Array(repeating: RawConnection.frame([0xff, 0xff, 0xff]), count: 100).flatMap { $0 }
        for _ in 0..<3 {
            while (frames.withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }) > 0 {}
            usleep(300_000)
        }
        kill(daemon.pid, SIGTERM)
        #expect(notify.until("STOPPING=1") != nil, "no STOPPING=1 on SIGTERM")
        // Every notification until the daemon has exited (then the socket is silent for 5 s).
        var keepAlives = 0
        while let message = notify.next() {
            if message == "WATCHDOG=1" { keepAlives += 1 }
        }
        #expect(daemon.stop(signal: SIGTERM) == 0)
        print("watchdog: \(keepAlives) keep-alives during a 3 s drain")
        // One every 100 ms for the 3 s drain: 28 were seen here, none before the change.
        #expect(keepAlives >= 10, "\(keepAlives) keep-alives during a 3 s drain")
        client.disconnect()
    }
}
