import Glibc

/// A mutex with a condition variable (`pthread_mutex_t` + `pthread_cond_t`), for the few places that
/// must block an OS thread until something happens (the writer thread waiting for work, a synchronous
/// caller waiting for its group commit).
///
/// `@unchecked Sendable`: the pthread objects are the synchronisation; they live in stable heap
/// allocations and are only touched through pthread calls.
public final class ConditionLock: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let condition: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        self.mutex = .allocate(capacity: 1)
        self.mutex.initialize(to: pthread_mutex_t())
        self.condition = .allocate(capacity: 1)
        self.condition.initialize(to: pthread_cond_t())
        precondition(pthread_mutex_init(self.mutex, nil) == 0, "pthread_mutex_init failed")
        precondition(pthread_cond_init(self.condition, nil) == 0, "pthread_cond_init failed")
    }

    deinit {
        pthread_cond_destroy(self.condition)
        pthread_mutex_destroy(self.mutex)
        self.condition.deallocate()
        self.mutex.deallocate()
    }

    /// Runs `body` holding the mutex.
    @inlinable
    public func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        return try body()
    }

    /// Holding the mutex, waits until `ready()` is true, then runs `body`, still holding it.
    public func withLock<T>(whenReady ready: () -> Bool, _ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        while !ready() {
            pthread_cond_wait(self.condition, self.mutex)
        }
        return try body()
    }

    /// Like ``withLock(whenReady:_:)``, but `ready` also says until when to wait (CLOCK_REALTIME, as
    /// `pthread_cond_timedwait` measures): nil waits for a broadcast, a time wakes up then to look again.
    public func withLock<T>(whenReady ready: () -> (ready: Bool, wakeAt: timespec?), _ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        while true {
            let (isReady, wakeAt) = ready()
            if isReady { break }
            if var wakeAt {
                pthread_cond_timedwait(self.condition, self.mutex, &wakeAt)
            } else {
                pthread_cond_wait(self.condition, self.mutex)
            }
        }
        return try body()
    }

    /// Wakes every thread waiting in ``withLock(whenReady:_:)`` to re-check its condition.
    /// Call it after changing the state, while holding the mutex or just after releasing it.
    public func broadcast() {
        pthread_cond_broadcast(self.condition)
    }
}
