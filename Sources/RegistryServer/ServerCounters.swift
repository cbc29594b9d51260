import Synchronization

/// The daemon's own counters, reported by `stats`.
final class ServerCounters: Sendable {
    let startedAt: ContinuousClock.Instant = .now
    /// Connections open now.
    let connections = Atomic<Int>(0)
    /// Frames read and decoded as requests.
    let requestsServed = Atomic<Int>(0)
}
