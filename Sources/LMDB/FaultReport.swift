import Glibc
import Synchronization

/// Turns a SIGSEGV or SIGBUS into a message on standard error and exit status 1 while reading a store
/// that may be damaged. liblmdb follows page numbers and node offsets from the file without bounds
/// checks of its own, so a damaged branch or leaf page can make it dereference a wild pointer; the
/// checks at open (``DataFile``) and of every record catch most damage, this catches the rest, which
/// would otherwise end the process with a signal and a backtrace that says nothing of the store.
///
/// Process-wide (signal dispositions are): the handlers are installed by the first of concurrent
/// callers and the previous ones restored by the last; the first caller's message is the one written.
public enum FaultReport {
    private struct Installed {
        var users = 0
        var previous: (segv: sigaction, bus: sigaction) = (sigaction(), sigaction())
    }

    private static let state = Mutex(Installed())
    /// The message the handler writes; set while installed (read from a signal handler: a plain
    /// pointer, written only with the handlers not installed).
    nonisolated(unsafe) private static var message: UnsafeMutablePointer<CChar>?

    /// Runs `body`; a SIGSEGV or SIGBUS meanwhile writes `message` (one line) and exits with status 1.
    public static func during<T>(_ message: String, _ body: () throws -> T) rethrows -> T {
        Self.state.withLock { state in
            if state.users == 0 {
                Self.message = strdup(message + "\n")
                var action = sigaction()
                action.__sigaction_handler.sa_handler = { signal in
                    if let message = FaultReport.message {
                        let name = signal == SIGBUS ? "SIGBUS: " : "SIGSEGV: "
                        _ = write(2, name, strlen(name))
                        _ = write(2, message, strlen(message))
                    }
                    _exit(1)
                }
                sigemptyset(&action.sa_mask)
                sigaction(SIGSEGV, &action, &state.previous.segv)
                sigaction(SIGBUS, &action, &state.previous.bus)
            }
            state.users += 1
        }
        defer {
            Self.state.withLock { state in
                state.users -= 1
                if state.users == 0 {
                    sigaction(SIGSEGV, &state.previous.segv, nil)
                    sigaction(SIGBUS, &state.previous.bus, nil)
                    free(Self.message)
                    Self.message = nil
                }
            }
        }
        return try body()
    }
}
