import Glibc
import LMDB
import Locks

/// The single writer thread and its queue: every write of the engine runs here, in batches that
/// share one durable commit (group commit).
///
/// Callers enqueue an operation and suspend; the thread takes everything queued (up to a maximum),
/// runs it as one batch through `execute`, which commits once and then completes each operation.
/// Nothing is acknowledged before the commit that holds it. An operation marked exclusive (gallery
/// definitions) runs in a batch of its own, so no other operation sees a half-changed catalog.
///
/// `@unchecked Sendable`: `pending` and `state` are only touched under `lock`.
final class WriteQueue: @unchecked Sendable {
    typealias Body = @Sendable (borrowing Transaction, OperationContext) throws -> any Sendable
    typealias Completion = @Sendable (Result<any Sendable, any Error>) -> Void

    struct Request: Sendable {
        let exclusive: Bool
        let body: Body
        let completion: Completion
    }

    private enum State { case running, stopping, stopped }

    private let lock = ConditionLock()
    private var pending: [Request] = []
    private var state = State.running
    private let maximumBatch: Int
    private let execute: ([Request]) -> Void
    private var thread = pthread_t()

    init(maximumBatch: Int, execute: @escaping ([Request]) -> Void) {
        self.maximumBatch = max(1, maximumBatch)
        self.execute = execute
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&self.thread, nil, { context in
            let queue = Unmanaged<WriteQueue>.fromOpaque(context!).takeRetainedValue()
            queue.run()
            return nil
        }, context)
        precondition(rc == 0, "cannot start the registry writer thread (\(rc))")
    }

    /// Enqueues a request. Returns false (and does not run it) when the queue is stopping.
    func submit(_ request: Request) -> Bool {
        let accepted = self.lock.withLock {
            guard self.state == .running else { return false }
            self.pending.append(request)
            return true
        }
        if accepted { self.lock.broadcast() }
        return accepted
    }

    /// Runs what is already queued, then stops the thread and waits for it.
    func stop() {
        let wasRunning = self.lock.withLock {
            defer { if self.state == .running { self.state = .stopping } }
            return self.state == .running
        }
        self.lock.broadcast()
        if wasRunning { pthread_join(self.thread, nil) }
    }

    private func run() {
        while true {
            let batch: [Request]? = self.lock.withLock(whenReady: { !self.pending.isEmpty || self.state != .running }) {
                if self.pending.isEmpty {
                    self.state = .stopped
                    return nil
                }
                var count = 0
                if self.pending[0].exclusive {
                    count = 1
                } else {
                    while count < self.pending.count && count < self.maximumBatch && !self.pending[count].exclusive {
                        count += 1
                    }
                }
                let batch = Array(self.pending.prefix(count))
                self.pending.removeFirst(count)
                return batch
            }
            guard let batch else { return }
            self.execute(batch)
        }
    }
}
