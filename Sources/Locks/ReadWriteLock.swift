import Glibc

/// A readers-writer lock (`pthread_rwlock_t`): many readers at once, or one writer.
///
/// `@unchecked Sendable`: the pthread object is the synchronisation itself; it lives in a stable heap
/// allocation for the lock's whole life and is only touched through pthread calls.
public final class ReadWriteLock: @unchecked Sendable {
    @usableFromInline let lock: UnsafeMutablePointer<pthread_rwlock_t>

    /// A writer-preferring lock: once a writer waits, new readers wait behind it, so a steady stream
    /// of readers (identifications) cannot starve the writer (the index update after a commit).
    /// Consequently a thread must never take the read lock twice (it could deadlock behind a writer).
    public init() {
        self.lock = .allocate(capacity: 1)
        self.lock.initialize(to: pthread_rwlock_t())
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        precondition(pthread_rwlock_init(self.lock, &attributes) == 0, "pthread_rwlock_init failed")
        pthread_rwlockattr_destroy(&attributes)
    }

    deinit {
        pthread_rwlock_destroy(self.lock)
        self.lock.deallocate()
    }

    /// Runs `body` holding the lock shared. Inlinable: taken on every authentication, and an
    /// unspecialised generic across the module boundary cost a metadata lookup per call.
    @inlinable @inline(__always)
    public func withReadLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_rdlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }

    /// Runs `body` holding the lock shared if it can be taken without waiting, and returns its result;
    /// nil, without running it, when a writer holds the lock or (the lock preferring writers) waits
    /// for it.
    @inlinable @inline(__always)
    public func withReadLockIfFree<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T? {
        guard pthread_rwlock_tryrdlock(self.lock) == 0 else { return nil }
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }

    /// Runs `body` holding the lock exclusively.
    @inlinable @inline(__always)
    public func withWriteLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_wrlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }
}
