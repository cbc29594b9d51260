import Glibc

/// Runs `background` on a new thread while `body` runs on this one; returns once both are done (also
/// when `body` throws). Without a second thread, runs `background` first, then `body`: still correct,
/// slower.
public func runAlongside<T, E: Error>(_ background: @escaping @Sendable () -> Void, _ body: () throws(E) -> T) throws(E) -> T {
    var thread = pthread_t()
    let rc = pthread_create(
        &thread, nil,
        { context in
            Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, Unmanaged.passRetained(ThreadBody(background)).toOpaque())
    guard rc == 0 else {
        background()
        return try body()
    }
    defer { pthread_join(thread, nil) }
    return try body()
}

private final class ThreadBody {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
