import Synchronization

/// Counts free slots; `acquire` suspends while none is free. Bounds the requests one connection has
/// in flight, so a client that pipelines faster than the engine answers is slowed down by not being
/// read (back-pressure), not refused.
final class AsyncSemaphore: Sendable {
    private struct State {
        var closed = false
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(_ slots: Int) {
        self.state = Mutex(State(available: slots))
    }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = self.state.withLock { state in
                if state.closed { return true }
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Lets every waiter, and every later `acquire`, through: the connection is ending.
    func close() {
        let waiters = self.state.withLock { state in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func release() {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        waiter?.resume()
    }
}
