import CSystemd
import Glibc
import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import ServiceLifecycle

/// The daemon's side of systemd's protocols, through libsystemd (not re-implemented): socket
/// activation (`sd_listen_fds`) and service notification (`sd_notify`: READY, STATUS, STOPPING,
/// WATCHDOG). Outside systemd both are no-ops: no `LISTEN_FDS`, no `NOTIFY_SOCKET`.
public enum Systemd {
    /// The listening socket systemd passed (fd 3), if the daemon was socket-activated. Clears the
    /// `LISTEN_*` variables so a child process would not inherit them.
    public static func activatedSocket() -> Int32? {
        let count = sd_listen_fds(1)
        guard count >= 1 else { return nil }
        return SD_LISTEN_FDS_START
    }

    /// Sends a notification (`READY=1`, `STATUS=…`, `STOPPING=1`, `WATCHDOG=1`); false when there is
    /// no notify socket or sending failed.
    @discardableResult
    public static func notify(_ state: String) -> Bool {
        sd_notify(0, state) > 0
    }

    /// The watchdog interval systemd asked for, if any (`WatchdogSec=` in the unit).
    public static func watchdogInterval() -> Duration? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(microseconds))
    }
}

/// Sends `WATCHDOG=1` every half interval, but only while the daemon can do its work: an event loop
/// runs a task and the store answers a read. A daemon wedged in either stops pinging, and systemd
/// restarts it after `WatchdogSec`.
struct WatchdogService: Service {
    let interval: Duration
    let engine: Engine
    let eventLoops: any EventLoopGroup
    let logger: Logger

    func run() async throws {
        var missed = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            // Ends at the stop, not at the next keep-alive: the group waits for this service to return.
            guard (try? await cancelWhenGracefulShutdown({ try await Task.sleep(for: self.interval / 2) })) != nil else { break }
            if await self.healthy() {
                Systemd.notify("WATCHDOG=1")
                missed = 0
            } else {
                missed += 1
                self.logger.warning("watchdog: the daemon did not answer its health check", metadata: ["missed": "\(missed)"])
            }
        }
    }

    private func healthy() async -> Bool {
        do {
            // An event loop that runs tasks, and a store that answers a read transaction.
            try await self.eventLoops.next().submit {}.get()
            try self.engine.checkStoreAnswers()
            return true
        } catch {
            return false
        }
    }
}
