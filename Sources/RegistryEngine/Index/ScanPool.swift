import CScanKernels
import Glibc
import Locks
import RegistryModel
import Synchronization

/// Helper threads that let one large scan use every core.
///
/// `run(chunks:_:)` publishes a job; the caller and any idle helper take chunk numbers from a shared
/// counter until none are left, then the caller waits only for chunks a helper is still computing.
/// The caller always works too, so a busy pool (many concurrent identifications) degrades to each
/// caller scanning alone rather than queueing behind others, and a call never waits for a helper to
/// become free.
///
/// `@unchecked Sendable`: `jobs` and `stopping` are only touched under `lock`.
final class ScanPool: @unchecked Sendable {
    /// One helper per usable CPU beyond the caller's (affinity and cgroup quota: ``UsableCPUs``).
    static let shared = ScanPool(helpers: UsableCPUs.count - 1)

    /// Threads that take chunks besides the caller.
    let helpers: Int

    private final class Job: @unchecked Sendable {
        let chunks: Int
        /// Cleared once every chunk has run, so a helper still holding the job does not hold the
        /// caller's closure (`withoutActuallyEscaping` checks that nothing does).
        var body: ((Int) -> Void)?
        let next = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        let done = ConditionLock()

        init(chunks: Int, body: @escaping (Int) -> Void) {
            self.chunks = chunks
            self.body = body
        }

        /// Takes and runs chunks until none are left.
        func work() {
            while true {
                let chunk = self.next.add(1, ordering: .relaxed).oldValue
                guard chunk < self.chunks else { return }
                self.body!(chunk)
                if self.finished.add(1, ordering: .acquiringAndReleasing).newValue == self.chunks {
                    self.done.withLock {}
                    self.done.broadcast()
                }
            }
        }

        var exhausted: Bool { self.next.load(ordering: .relaxed) >= self.chunks }
    }

    private let lock = ConditionLock()
    private var jobs: [Job] = []
    /// How long an idle helper polls for a job before it sleeps on the condition variable.
    static let pollNanoseconds = 200_000

    init(helpers: Int) {
        self.helpers = helpers
        for _ in 0..<helpers {
            let context = Unmanaged.passRetained(self).toOpaque()
            var thread = pthread_t()
            let rc = pthread_create(
                &thread, nil,
                { context in
                    let pool = Unmanaged<ScanPool>.fromOpaque(context!).takeRetainedValue()
                    rk_mark_engine_thread("registryd-scan")
                    pool.serve()
                    return nil
                }, context)
            precondition(rc == 0, "cannot start a scan thread (\(rc))")
            pthread_detach(thread)
        }
    }

    /// Runs `body(0) … body(chunks - 1)`, on this thread and the helpers, and returns when all are done.
    /// `body` must be safe to call concurrently for different chunks.
    func run(chunks: Int, _ body: (Int) -> Void) {
        guard chunks > 1 && self.helpers > 0 else {
            for chunk in 0..<chunks { body(chunk) }
            return
        }
        // Every chunk has run before this returns, and the job then drops the closure.
        withoutActuallyEscaping(body) { body in
            let job = Job(chunks: chunks, body: body)
            self.lock.withLock { self.jobs.append(job) }
            self.lock.broadcast()
            job.work()
            self.lock.withLock { self.jobs.removeAll { $0 === job } }
            job.done.withLock(whenReady: { job.finished.load(ordering: .acquiring) == chunks }) {}
            job.body = nil
        }
    }

    /// A helper's loop: wait for a job with chunks left, work on it, repeat.
    private func serve() {
        while true {
            self.awaitNextJob()
            // `exhausted` changes outside the lock (callers take chunks too): the job found by the
            // wait may be used up by the time it is fetched, so look again rather than assume.
            let job = self.lock.withLock(whenReady: { self.jobWaiting }) {
                self.jobs.first { !$0.exhausted }
            }
            job?.work()
        }
    }

    /// Whether a published job has chunks left. Holding the lock.
    private var jobWaiting: Bool { self.jobs.contains { !$0.exhausted } }

    /// Polls for the next job for up to ``pollNanoseconds``, yielding the core to any other thread
    /// that wants it, before the helper sleeps on the condition variable. A sleeping helper is woken
    /// late on a virtual machine whose idle virtual CPU halted (the host must schedule it again):
    /// requests that scan one after another, each a round trip apart, found the helper taking 11 of
    /// 123 chunks. OpenMP's runtimes, which FAISS uses, spin in the same way.
    private func awaitNextJob() {
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        while !self.lock.withLock({ self.jobWaiting }) {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            if (now.tv_sec - start.tv_sec) * 1_000_000_000 + (now.tv_nsec - start.tv_nsec) >= Self.pollNanoseconds { return }
            sched_yield()
        }
    }
}
