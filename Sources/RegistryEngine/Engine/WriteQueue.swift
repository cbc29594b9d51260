import CScanKernels
import CoreMetrics
import Glibc
import LMDB
import Locks
import RegistryModel

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
    /// One write: what it is allowed and announces, the operation, and how to tell its caller it
    /// failed. Typed where it is made (``init(exclusive:precheck:flat:useReserve:_:completion:)``):
    /// the writer never sees a result's type, so nothing is cast back.
    struct Request: Sendable {
        let exclusive: Bool
        /// The registration checks the body will run, announced so the writer can run a whole
        /// batch's checks in one pass before the bodies (nil: none).
        var precheck: Precheck? = nil
        /// The body writes only once nothing but LMDB can fail it (its checks come first), so it runs
        /// in the batch's transaction itself instead of a nested one, whose begin and commit cost a
        /// registration about a tenth of its time on the writer. Should it fail otherwise after
        /// writing, the batch runs again with it nested: the promise is kept either way.
        var flat = false
        /// Goes ahead when the file system is down to its reserve (``StorageReserve``): deletions, the
        /// audit trail, erasure, verify.
        var useReserve = false
        /// Runs the operation in the batch's transaction; what it returns answers the caller once
        /// the commit is durable and the index shows it.
        let run: @Sendable (borrowing Transaction, OperationContext) throws -> Answer
        /// Answers the caller with an error: refused before it ran, failed, or its batch failed.
        let fail: @Sendable (any Error) -> Void
        /// Submitted with ``WriteQueue/submitLazily(_:)``: a batch of lazy requests alone is one the
        /// delay started, with no other write waiting.
        var isLazy = false
        /// Fleet mode: the log position this write applies (``FleetApplication``), recorded in its
        /// commit; nil: not an entry of the log.
        var fleetPosition: Int64? = nil
        /// Fleet mode: the position that must be the store's last for it to apply (``FleetApplication/previous``).
        var fleetPrevious: Int64 = 0
        /// Fleet mode: when that entry was committed to the log (``FleetApplication/committedAt``).
        var fleetTime: Int64? = nil

        /// A write whose `body` returns a `T` and whose caller is told through `completion`, once.
        init<T: Sendable>(
            exclusive: Bool = false, precheck: Precheck? = nil, flat: Bool = false, useReserve: Bool = false,
            _ body: @escaping @Sendable (borrowing Transaction, OperationContext) throws -> T,
            completion: @escaping @Sendable (Result<T, any Error>) -> Void
        ) {
            self.exclusive = exclusive
            self.precheck = precheck
            self.flat = flat
            self.useReserve = useReserve
            self.run = { txn, context in
                let value = try body(txn, context)
                return Answer { completion(.success(value)) }
            }
            self.fail = { completion(.failure($0)) }
        }
    }

    /// An operation's answer to its caller, held from the moment it ran until its commit is durable
    /// and published (made and called on the writer thread).
    struct Answer {
        let send: () -> Void
    }

    private enum State { case running, stopping, stopped }

    private let lock = ConditionLock()
    private var pending: [Request] = []
    /// Requests that may wait up to `lazyDelay` for other work to share a commit with (the audit
    /// trail's flushes: nobody waits for them, and alone each would cost its own fsync).
    private var lazy: [Request] = []
    private var lazySince: timespec?
    private let lazyDelay: Int
    private var state = State.running
    private let maximumBatch: Int
    private let execute: ([Request]) -> Void
    /// Where `pending.count` is reported after every change (set holding the lock, so reports keep
    /// their order).
    private let depth: Gauge?
    private var thread = pthread_t()

    init(maximumBatch: Int, lazyDelayMilliseconds: Int = 100, depth: Gauge? = nil, execute: @escaping ([Request]) -> Void) {
        self.maximumBatch = max(1, maximumBatch)
        self.depth = depth
        self.lazyDelay = lazyDelayMilliseconds
        self.execute = execute
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(
            &self.thread, nil,
            { context in
                let queue = Unmanaged<WriteQueue>.fromOpaque(context!).takeRetainedValue()
                rk_mark_engine_thread("registryd-write")
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
            self.depth?.record(self.pending.count)
            return true
        }
        if accepted { self.lock.broadcast() }
        return accepted
    }

    /// Enqueues a request that joins the next batch, or runs on its own after the lazy delay if no
    /// other write comes first. Returns false (and does not run it) when the queue is stopping.
    func submitLazily(_ request: Request) -> Bool {
        var request = request
        request.isLazy = true
        let accepted = self.lock.withLock {
            guard self.state == .running else { return false }
            self.lazy.append(request)
            if self.lazySince == nil {
                var now = timespec()
                clock_gettime(CLOCK_REALTIME, &now)
                self.lazySince = now
            }
            return true
        }
        if accepted { self.lock.broadcast() }
        return accepted
    }

    /// When lazy requests must run even if nothing else comes.
    private var lazyDeadline: timespec? {
        guard var deadline = self.lazySince else { return nil }
        deadline.tv_nsec += self.lazyDelay * 1_000_000
        deadline.tv_sec += deadline.tv_nsec / 1_000_000_000
        deadline.tv_nsec %= 1_000_000_000
        return deadline
    }

    private var lazyDue: Bool {
        guard let deadline = self.lazyDeadline else { return false }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return (now.tv_sec, now.tv_nsec) >= (deadline.tv_sec, deadline.tv_nsec)
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
            let batch: [Request]? = self.lock.withLock(whenReady: {
                (!self.pending.isEmpty || self.state != .running || self.lazyDue, self.lazyDeadline)
            }) {
                if self.pending.isEmpty && (self.lazy.isEmpty || self.state == .running) {
                    guard self.state != .running else {
                        // Only lazy work, now due: it runs alone.
                        return self.takeLazy()
                    }
                    self.state = .stopped
                    return nil
                }
                var count = 0
                if let first = self.pending.first, first.exclusive {
                    count = 1
                } else {
                    while count < self.pending.count && count < self.maximumBatch && !self.pending[count].exclusive {
                        count += 1
                    }
                }
                var batch = Array(self.pending.prefix(count))
                self.pending.removeFirst(count)
                self.depth?.record(self.pending.count)
                // Lazy requests ride along with any batch that is not exclusive.
                if batch.first?.exclusive != true { batch += self.takeLazy() }
                return batch
            }
            guard let batch else { return }
            self.execute(batch)
        }
    }

    /// Takes the lazy requests. Holding the lock.
    private func takeLazy() -> [Request] {
        defer {
            self.lazy = []
            self.lazySince = nil
        }
        return self.lazy
    }
}
