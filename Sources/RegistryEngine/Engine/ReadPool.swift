import CScanKernels
import Glibc
import Locks
import RegistryModel

/// The engine's own threads for work that may block: reads of the store (a page of identifiers or
/// templates, an export page, the audit trail, a backup's copy).
///
/// Every read of the store the engine offers runs here, behind an async API, so no caller can run
/// one on a thread that must not block (an event loop; the cooperative pool, two threads on two
/// cores): the engine decides where it blocks, as sqlite-nio runs every libsqlite3 call on its
/// connection's thread pool.
///
/// Threads start when there is work no idle thread can take, up to ``maximumThreads``, and stay until
/// ``stop()``. Jobs start in the order submitted.
///
/// `@unchecked Sendable`: `jobs`, `next`, `threads`, `running` and `stopping` are only touched under `lock`.
final class ReadPool: @unchecked Sendable {
    let maximumThreads: Int
    private let lock = ConditionLock()
    /// Jobs submitted, the first `next` of them taken (the array is emptied when all are).
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0
    private var threads: [pthread_t] = []
    /// Threads running a job now.
    private var running = 0
    private var stopping = false

    init(maximumThreads: Int) {
        precondition(maximumThreads > 0)
        self.maximumThreads = maximumThreads
    }

    /// Runs `job` on one of the pool's threads. Returns false, without running it, once ``stop()`` was called.
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let (accepted, startThread) = self.lock.withLock { () -> (Bool, Bool) in
            guard !self.stopping else { return (false, false) }
            self.jobs.append(job)
            let waiting = self.jobs.count - self.next
            let idle = self.threads.count - self.running
            guard waiting > idle && self.threads.count < self.maximumThreads else { return (true, false) }
            self.threads.append(self.startThread())
            return (true, true)
        }
        if accepted && !startThread { self.lock.broadcast() }
        return accepted
    }

    /// Jobs submitted that no thread has taken yet.
    var waitingJobs: Int { self.lock.withLock { self.jobs.count - self.next } }

    /// Runs `body` on one of the pool's threads and returns its result.
    /// - Throws: what `body` throws; `SHUTTING_DOWN` once ``stop()`` was called.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = self.submit { continuation.resume(with: Result { try body() }) }
            if !accepted { continuation.resume(throwing: RegistryError(.shuttingDown, "the registry is shutting down")) }
        }
    }

    /// Refuses new jobs, lets the threads finish every job already submitted, and waits for them to
    /// end. Idempotent. From one of the pool's own jobs it does not wait for that job's thread.
    func stop() {
        let threads = self.lock.withLock { () -> [pthread_t] in
            self.stopping = true
            defer { self.threads = [] }
            return self.threads
        }
        self.lock.broadcast()
        let current = pthread_self()
        for thread in threads {
            if pthread_equal(thread, current) != 0 {
                pthread_detach(thread)
            } else {
                pthread_join(thread, nil)
            }
        }
    }

    /// A new thread serving jobs. Holding the lock.
    private func startThread() -> pthread_t {
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { context in
                let pool = Unmanaged<ReadPool>.fromOpaque(context!).takeRetainedValue()
                rk_mark_engine_thread("registryd-read")
                pool.serve()
                return nil
            }, context)
        precondition(rc == 0, "cannot start a read thread (\(rc))")
        return thread
    }

    /// A thread's loop: take the next job, run it, until stopping with none left.
    private func serve() {
        while true {
            let job = self.lock.withLock(whenReady: { self.next < self.jobs.count || self.stopping }) { () -> (@Sendable () -> Void)? in
                guard self.next < self.jobs.count else { return nil }
                let job = self.jobs[self.next]
                self.next += 1
                if self.next == self.jobs.count {
                    self.jobs.removeAll(keepingCapacity: true)
                    self.next = 0
                }
                self.running += 1
                return job
            }
            guard let job else { return }
            job()
            self.lock.withLock { self.running -= 1 }
            self.awaitNextJob()
        }
    }

    /// How long an idle thread polls for the next job before it sleeps on the condition variable.
    static let pollNanoseconds = 200_000

    /// Polls for the next job for up to ``pollNanoseconds``, yielding the core to any thread that
    /// wants it, before the thread sleeps (as ``ScanPool``'s helpers do, for the same reason): a
    /// thread asleep on a virtual machine whose idle virtual CPU halted is woken late, and
    /// identifications sent one after another, a round trip apart, each paid that wake-up (daemon
    /// identify over 100,000 rows, `tools/bench --quick`, four runs each alternating with the
    /// parent, where identify ran on a task: 0.46–0.60 ms against 0.42–0.47 ms without the poll,
    /// 0.39–0.48 ms against 0.42–0.97 ms with it).
    private func awaitNextJob() {
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        while !self.lock.withLock({ self.next < self.jobs.count || self.stopping }) {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            if (now.tv_sec - start.tv_sec) * 1_000_000_000 + (now.tv_nsec - start.tv_nsec) >= Self.pollNanoseconds { return }
            sched_yield()
        }
    }
}
