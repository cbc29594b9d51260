import CoreMetrics
import Glibc
import LMDB
import RegistryModel
import Synchronization

/// Keeps room on the store's file system for the writes that free space.
///
/// LMDB copies every page it changes, so a deletion needs free pages too: on a file system filled to
/// the last block, deletes fail like registrations, and nothing can make room (etcd's space quota and
/// PostgreSQL's reserved WAL space exist for the same reason). So before each batch that adds data,
/// the writer looks at the file system: below the reserve, such writes are refused with
/// `STORAGE_FULL` — unless the store's own free pages (left by earlier deletions) can hold them —
/// while deletions, the audit trail, erasure and verify go on using the reserve. Space freed by
/// deletions through the daemon, or by removing files outside it, lets registrations in again at the
/// next batch: nothing waits for a restart.
///
/// Used by the writer thread only, apart from ``reached``.
final class StorageReserve: @unchecked Sendable {
    private let directory: String
    private let configured: Int?
    private let metrics: EngineMetrics
    /// Whether the last batch that added data was refused; read by the daemon's log callback's caller.
    private let refusing = Atomic<Bool>(false)
    /// The store's free pages, counted at most once a second while below the reserve (it reads the
    /// free list), and again after a commit that freed pages (``pagesFreed()``).
    private var storeFree: (bytes: Int, at: ContinuousClock.Instant)?
    /// Told when the reserve is reached (true, with what was found) and when writes are let in again.
    let onChange = Mutex<(@Sendable (Bool, String) -> Void)?>(nil)

    /// Below this many bytes of free pages inside the store, writes that add data are refused (one
    /// batch of registrations needs a few hundred KiB at most).
    static let storeFreeMargin = 1 << 20

    init(directory: String, reserveBytes: Int?, metrics: EngineMetrics) {
        self.directory = directory
        self.configured = reserveBytes
        self.metrics = metrics
    }

    /// Whether writes that add data are being refused.
    var reached: Bool { self.refusing.load(ordering: .relaxed) }

    /// The reserve for a file system of `size` bytes.
    static func reserve(configured: Int?, fileSystemBytes size: Int) -> Int {
        configured ?? min(256 << 20, max(1 << 20, size / 100))
    }

    /// A commit removed data: the store's free-page count is looked at again before the next batch,
    /// so a registration sent right after a deletion that made room is let in (with the count kept
    /// for a second, 0 of 100 sent within it were, on a full 16 MiB file system).
    func pagesFreed() {
        self.storeFree = nil
    }

    /// Why writes that add data must be refused now, or nil when they may go ahead.
    func refusal(environment: Environment) -> RegistryError? {
        guard self.configured != 0 else { return nil }
        var info = statvfs()
        // A file system that cannot be asked is not refused for: the commit says what is wrong.
        guard statvfs(self.directory, &info) == 0 else { return nil }
        let free = Int(info.f_bavail) * Int(info.f_frsize)
        let reserve = Self.reserve(configured: self.configured, fileSystemBytes: Int(info.f_blocks) * Int(info.f_frsize))
        self.metrics.filesystemFreeBytes.record(free)
        self.metrics.reserveBytes.record(reserve)
        var refusal: RegistryError?
        if free < reserve {
            let now = ContinuousClock.now
            if self.storeFree.map({ now - $0.at > .seconds(1) }) ?? true {
                let pages = (try? environment.freePageCount()) ?? 0
                self.storeFree = (pages * environment.pageSize, now)
            }
            if let inside = self.storeFree?.bytes, inside < Self.storeFreeMargin {
                refusal = RegistryError(
                    .storageFull,
                    "the store's file system has \(free) bytes free, less than the \(reserve) bytes kept so that deletions still "
                        + "work (limits.storageReserveBytes); delete templates or free space on the file system, then retry")
            }
        } else {
            self.storeFree = nil
        }
        let reached = refusal != nil
        if self.refusing.exchange(reached, ordering: .relaxed) != reached {
            self.metrics.reserveReached.record(reached ? 1 : 0)
            let said =
                reached
                ? "storage reserve reached: \(free) bytes free on the store's file system (reserve \(reserve)); "
                    + "writes that add data are refused with STORAGE_FULL, deletions still work"
                : "storage reserve clear again: \(free) bytes free on the store's file system (reserve \(reserve)); writes accepted"
            self.onChange.withLock { $0 }?(reached, said)
        }
        return refusal
    }
}
