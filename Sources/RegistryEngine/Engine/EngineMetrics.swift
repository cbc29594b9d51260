import CoreMetrics

/// What the engine reports through swift-metrics: the writer's queue and its commits. The daemon
/// passes a factory that exposes them (Prometheus text through `stats`); tools and tests pass none.
public struct EngineMetrics: Sendable {
    /// Writes waiting for the writer thread (taken into the next batch, or waiting behind it).
    let queueDepth: Gauge
    /// One durable commit: the write transaction with every operation of its batch, and its fsync.
    let commitDuration: CoreMetrics.Timer
    /// Operations a commit carried (group commit: more than one under concurrent writers).
    let batchSize: Recorder
    /// One publication of a commit in the index: from the writer asking for the index write lock
    /// (waiting for the scans in progress to leave it) to releasing it. What reads the index
    /// meanwhile waits for it: identify on its task; authentications and registrations are carried on
    /// by the writer right after it (``Engine/afterPublication(_:)``).
    let indexPublishDuration: CoreMetrics.Timer
    /// Authentications and registrations that found the index lock taken (a publication) and went on
    /// on the writer thread right after the publication, instead of waiting on the caller's thread (an event loop).
    let indexLockWaits: Counter
    /// Audit entries dropped because their flush failed while too many were already waiting
    /// (``AuditBuffer/maximumHeldBytes``); zero unless the disk stayed full or failing for long.
    let auditEntriesDropped: Counter
    /// Free pages of `data.mdb` that held data and were set to zero (erasure, docs/security.md).
    let erasedPages: Counter
    /// Erasure passes that failed (reading or writing `data.mdb`); the next batch tries again.
    let erasureFailures: Counter
    /// Requests refused because a row their scan needed could not be read as registered
    /// (``RowFault``): a damaged payload, or one that disagrees with the index's codes.
    let damagedRows: Counter
    /// Free bytes of the store's file system at the writer's last look, and the reserve kept there
    /// (``StorageReserve``); whether writes that add data are being refused for it (1) or not (0).
    let filesystemFreeBytes: Gauge
    let reserveBytes: Gauge
    let reserveReached: Gauge

    init(factory: any MetricsFactory) {
        self.queueDepth = Gauge(label: Self.queueDepthLabel, factory: factory)
        self.commitDuration = CoreMetrics.Timer(label: Self.commitDurationLabel, factory: factory)
        self.batchSize = Recorder(label: Self.batchSizeLabel, factory: factory)
        self.indexPublishDuration = CoreMetrics.Timer(label: Self.indexPublishDurationLabel, factory: factory)
        self.indexLockWaits = Counter(label: Self.indexLockWaitsLabel, factory: factory)
        self.auditEntriesDropped = Counter(label: Self.auditEntriesDroppedLabel, factory: factory)
        self.erasedPages = Counter(label: Self.erasedPagesLabel, factory: factory)
        self.erasureFailures = Counter(label: Self.erasureFailuresLabel, factory: factory)
        self.damagedRows = Counter(label: Self.damagedRowsLabel, factory: factory)
        self.filesystemFreeBytes = Gauge(label: Self.filesystemFreeBytesLabel, factory: factory)
        self.reserveBytes = Gauge(label: Self.reserveBytesLabel, factory: factory)
        self.reserveReached = Gauge(label: Self.reserveReachedLabel, factory: factory)
    }

    public static let queueDepthLabel = "registryd_writer_queue_depth"
    public static let commitDurationLabel = "registryd_commit_duration_seconds"
    public static let batchSizeLabel = "registryd_commit_batch_operations"
    public static let indexPublishDurationLabel = "registryd_index_publish_seconds"
    public static let indexLockWaitsLabel = "registryd_index_lock_waits_total"
    public static let auditEntriesDroppedLabel = "registryd_audit_entries_dropped_total"
    public static let erasedPagesLabel = "registryd_erased_pages_total"
    public static let erasureFailuresLabel = "registryd_erasure_failures_total"
    public static let damagedRowsLabel = "registryd_damaged_row_reads_total"
    public static let filesystemFreeBytesLabel = "registryd_storage_filesystem_free_bytes"
    public static let reserveBytesLabel = "registryd_storage_reserve_bytes"
    public static let reserveReachedLabel = "registryd_storage_reserve_reached"
}
