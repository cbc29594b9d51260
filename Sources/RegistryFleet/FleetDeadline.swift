import Synchronization

/// Runs `body`, or throws ``FleetTimeout`` once `limit` has passed — then at once, whether or not
/// `body` has ended: it is cancelled and left to finish on its own.
///
/// Not a task group racing a timer: leaving a group waits for every child, so a body that does not
/// end on cancellation (PostgresNIO waiting for a connection to a server that is gone: a failover,
/// a host cut off) would hold the caller for as long, and a write behind it would never be answered.
public func withinDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await racing(deadline: limit, body)
}

/// Runs `body`, or ends at once, leaving it cancelled to finish on its own: once `deadline` has
/// passed (``FleetTimeout``), when the caller is cancelled, or when the function `interruptible`
/// is given is called (with the error to throw).
func racing<T: Sendable>(
    deadline limit: Duration?, interruptible: (@escaping @Sendable (any Error) -> Void) -> Void = { _ in },
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let state = DeadlineState<T>()
    @Sendable func finish(_ result: Result<T, any Error>) {
        guard let continuation = state.waiter.withLock({ $0.take() }) else { return }
        let (work, timer) = state.tasks.withLock { $0 }
        work?.cancel()
        timer?.cancel()
        continuation.resume(with: result)
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            state.waiter.withLock { $0 = continuation }
            let work = Task {
                do {
                    finish(.success(try await body()))
                } catch {
                    finish(.failure(error))
                }
            }
            let timer = limit.map { limit in
                Task {
                    guard (try? await Task.sleep(for: limit)) != nil else { return }
                    finish(.failure(FleetTimeout()))
                }
            }
            state.tasks.withLock { $0 = (work, timer) }
            interruptible { finish(.failure($0)) }
            // Cancelled before the handler could find the continuation.
            if Task.isCancelled { finish(.failure(CancellationError())) }
        }
    } onCancel: {
        finish(.failure(CancellationError()))
    }
}

/// The continuation ``withinDeadline(_:_:)`` resumes once, and its two tasks.
private final class DeadlineState<T: Sendable>: Sendable {
    let waiter = Mutex<CheckedContinuation<T, any Error>?>(nil)
    let tasks = Mutex<(work: Task<Void, Never>?, timer: Task<Void, Never>?)>((nil, nil))
}

/// PostgreSQL did not answer within a deadline (``withinDeadline(_:_:)``).
public struct FleetTimeout: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "PostgreSQL did not answer in time" }
}
