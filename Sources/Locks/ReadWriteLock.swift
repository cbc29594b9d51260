import Glibc

/// A readers-writer lock (`pthread_rwlock_t`): many readers at once, or one writer.
///
/// `@unchecked Sendable`: the pthread object is the synchronisation itself; it lives in a stable heap
/// allocation for the lock's whole life and is only touched through pthread calls.
public final class ReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    public init() {
        self.lock = .allocate(capacity: 1)
        self.lock.initialize(to: pthread_rwlock_t())
        precondition(pthread_rwlock_init(self.lock, nil) == 0, "pthread_rwlock_init failed")
    }

    deinit {
        pthread_rwlock_destroy(self.lock)
        self.lock.deallocate()
    }

    /// Runs `body` holding the lock shared.
    @inline(__always)
    public func withReadLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_rdlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }

    /// Runs `body` holding the lock exclusively.
    @inline(__always)
    public func withWriteLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_wrlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }
}
