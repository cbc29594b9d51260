import CoreMetrics
import Glibc
import Metrics
import Prometheus
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Synchronization

/// The daemon's metrics: recorded through swift-metrics, kept in a Prometheus registry, and read
/// as the Prometheus text format through `stats` (`registryctl metrics`): the daemon is sandboxed
/// without network, so there is no HTTP endpoint to scrape; node_exporter's textfile collector takes
/// the text instead (`docs/metrics.md`).
///
/// Label values are bounded whatever clients send: operation names and error codes come from fixed
/// sets, and galleries from the store (at most ``maximumGalleryLabels`` of them; beyond, `(other)`).
/// No identifier and no template ever becomes a label.
///
/// The figures `registryctl stats` shows (requests by operation and outcome, errors by code,
/// latencies, the writer's queue and commits) also go into `stats` as typed fields
/// (``report(engine:counters:)``). Prometheus's metric objects cannot be read back, so those
/// metrics are kept readable here (``ReportedCounter``, ``ReadableHistogram``, ``ReadableGauge``),
/// and the exposition is written from the same objects.
public final class ServerMetrics: Sendable {
    /// Read through ``exposition(engine:counters:)``: the request counters reach it there.
    public let registry: PrometheusCollectorRegistry
    /// The factory the engine and the dispatcher create their metrics with.
    public let factory: any MetricsFactory
    private let prometheus: Factory

    /// Per operation kind, created on its first request.
    private let operations = Mutex<[String: OperationMetrics]>([:])
    /// Authentication's, created at once and reached without the lock: most requests are
    /// authentications (``RegistryOperation/metrics(in:)``).
    let authentications: OperationMetrics
    /// The galleries whose requests have labels of their own.
    private let labelledGalleries = Mutex<Set<String>>([])
    /// The gauges the last exposition set from the store's figures, by label set, so that a gallery
    /// deleted since loses its series.
    private let storeGauges = Mutex<[String: CoreMetrics.Gauge]>([:])
    /// The prefilter's totals (process-wide counters) already passed on to their counters.
    private let prefilterReported = Mutex<(considered: Int, rescored: Int)>((0, 0))
    private let prefilterConsidered: CoreMetrics.Counter
    private let prefilterRescored: CoreMetrics.Counter
    let connectionsAccepted: CoreMetrics.Counter
    /// Connections answered TOO_MANY_CONNECTIONS and closed.
    let connectionsRefused: CoreMetrics.Counter
    private let openConnections: CoreMetrics.Gauge
    private let uptime: CoreMetrics.Gauge
    private let storeBytes: CoreMetrics.Gauge

    /// When this process started, in seconds since the epoch: its start in clock ticks after boot
    /// (`/proc/self/stat`, field 22) plus the boot time (`/proc/stat`, `btime`); now, if either is unreadable.
    static func processStartTime() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let fallback = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
        guard let stat = KernelFile.text("/proc/self/stat"), let close = stat.lastIndex(of: ")"),
            let ticks = stat[stat.index(after: close)...].split(separator: " ").dropFirst(19).first.flatMap({ Double($0) }),
            let boot = KernelFile.text("/proc/stat")?.split(separator: "\n").first(where: { $0.hasPrefix("btime ") })?.split(separator: " ").last
                .flatMap({ Double($0) })
        else { return fallback }
        let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))
        return hertz > 0 ? boot + ticks / hertz : fallback
    }

    /// Gallery labels kept apart; requests in galleries beyond them are counted together.
    static let maximumGalleryLabels = 64

    public init() {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        let factory = Factory(registry: registry)
        self.factory = factory
        self.prometheus = factory
        self.prefilterConsidered = CoreMetrics.Counter(label: "registryd_prefilter_rows_considered_total", factory: factory)
        self.prefilterRescored = CoreMetrics.Counter(label: "registryd_prefilter_rows_rescored_total", factory: factory)
        self.connectionsAccepted = CoreMetrics.Counter(label: "registryd_connections_accepted_total", factory: factory)
        self.connectionsRefused = CoreMetrics.Counter(label: "registryd_connections_refused_total", factory: factory)
        self.openConnections = CoreMetrics.Gauge(label: "registryd_connections_open", factory: factory)
        self.uptime = CoreMetrics.Gauge(label: "registryd_uptime_seconds", factory: factory)
        // Constant series: whether the daemon answered (registryctl writes 0 when it cannot reach it),
        // which release answers, and since when this process runs (as every Prometheus client exports it).
        CoreMetrics.Gauge(label: UpMetric.name, factory: factory).record(1)
        CoreMetrics.Gauge(label: "registryd_build_info", dimensions: [("version", RegistryVersion.current)], factory: factory).record(1)
        CoreMetrics.Gauge(label: "process_start_time_seconds", factory: factory).record(Self.processStartTime())
        self.storeBytes = CoreMetrics.Gauge(label: "registryd_store_bytes", factory: factory)
        let authentications = OperationMetrics(
            name: Authenticate.name, decidesMatches: Authenticate.decidesMatches, factory: factory)
        self.authentications = authentications
        // Frames that are not requests are counted under "unknown": its series exist from the start.
        let undecoded = OperationMetrics(name: RequestDispatcher.undecodedOperation, decidesMatches: false, factory: factory)
        self.operations.withLock {
            $0[authentications.name] = authentications
            $0[undecoded.name] = undecoded
        }
    }

    /// The metrics of one operation kind; `decidesMatches`: its outcomes are match and no-match
    /// (identify, authenticate), else ok.
    func operation(_ name: String, decidesMatches: Bool = false) -> OperationMetrics {
        self.operations.withLock { operations in
            if let known = operations[name] { return known }
            let created = OperationMetrics(name: name, decidesMatches: decidesMatches, factory: self.prometheus)
            operations[name] = created
            return created
        }
    }

    /// The label a gallery's requests are counted under: its name for the first
    /// ``maximumGalleryLabels`` galleries seen, `(other)` after them. Asked only when an operation
    /// meets a gallery for the first time.
    func galleryLabel(_ gallery: String) -> String {
        self.labelledGalleries.withLock { galleries in
            if galleries.contains(gallery) { return gallery }
            guard galleries.count < Self.maximumGalleryLabels else { return "(other)" }
            galleries.insert(gallery)
            return gallery
        }
    }

    /// What `stats` carries of the metrics: the Prometheus text of every metric, after setting those
    /// read from the store and the daemon's counters now, and the figures `registryctl stats` shows,
    /// read from the same metrics (the counts as the text has them).
    func report(engine: Engine, counters: ServerCounters) -> (
        exposition: String, operations: [Registry_V1_StatsResult.OperationStats], writer: Registry_V1_StatsResult.WriterStats
    ) {
        self.refresh(engine: engine, counters: counters)
        let operations = self.operations.withLock { Array($0.values) }.compactMap { $0.report() }
            .sorted { ($0.requests, $1.operation) > ($1.requests, $0.operation) }
        let writer = Registry_V1_StatsResult.WriterStats.with {
            $0.queueDepth = UInt64(max(0, self.prometheus.readable.queueDepth?.value ?? 0))
            if let latency = self.prometheus.readable.commitDuration?.latency { $0.commitLatency = latency }
        }
        return (self.registry.emitToString(), operations, writer)
    }

    /// The Prometheus text of every metric (``report(engine:counters:)``'s).
    func exposition(engine: Engine, counters: ServerCounters) -> String {
        self.report(engine: engine, counters: counters).exposition
    }

    private func refresh(engine: Engine, counters: ServerCounters) {
        self.uptime.record((ContinuousClock.now - counters.startedAt).components.seconds)
        self.openConnections.record(counters.connections.load(ordering: .relaxed))
        self.storeBytes.record(engine.storeBytesInUse)
        let totals = Engine.prefilterCounts
        let (considered, rescored) = self.prefilterReported.withLock { reported in
            defer { reported = totals }
            return (totals.considered - reported.considered, totals.rescored - reported.rescored)
        }
        if considered > 0 { self.prefilterConsidered.increment(by: considered) }
        if rescored > 0 { self.prefilterRescored.increment(by: rescored) }

        var values: [String: (label: String, dimensions: [(String, String)], value: Int)] = [:]
        for gallery in engine.galleries() {
            values["identifiers\u{0}\(gallery.name)"] = ("registryd_identifiers", [("gallery", gallery.name)], gallery.identifierCount)
            for registry in gallery.registries {
                let dimensions = [("gallery", gallery.name), ("algorithm", registry.algorithm.name)]
                values["templates\u{0}\(gallery.name)\u{0}\(registry.algorithm.name)"] = ("registryd_templates", dimensions, registry.templateCount)
            }
        }
        self.storeGauges.withLock { gauges in
            for (key, gauge) in gauges where values[key] == nil {
                gauge.destroy()
                gauges[key] = nil
            }
            for (key, value) in values {
                let gauge = gauges[key] ?? CoreMetrics.Gauge(label: value.label, dimensions: value.dimensions, factory: self.factory)
                gauges[key] = gauge
                gauge.record(value.value)
            }
        }
    }
}

/// One operation kind's counters and latency histogram, created once and kept: the request path
/// only increments.
final class OperationMetrics: Sendable {
    let name: String
    private let factory: ServerMetrics.Factory
    /// Answered requests by audit outcome: `ok`, or `match` and `no-match` (with ok then nil: such
    /// an operation has no other outcome, and a series that stays 0 would only be noise).
    let ok: ReportedCounter?
    let match: ReportedCounter?
    let noMatch: ReportedCounter?
    let refused: ReportedCounter
    /// Refused requests by error code (`registryd_request_errors_total`).
    private let errors = Mutex<[RegistryError.Code: ReportedCounter]>([:])
    /// From the decoded frame to the encoded reply.
    let duration: ReadableHistogram
    /// Answered requests by gallery label (`registryd_gallery_requests_total`).
    private let galleries = Mutex<[String: CoreMetrics.Counter]>([:])
    /// The counter of the first gallery answered in, found without the lock (most daemons serve one
    /// gallery, or mostly one).
    private let firstGallery = AtomicLazyReference<GalleryCounter>()

    private final class GalleryCounter: Sendable {
        let gallery: String
        let counter: CoreMetrics.Counter

        init(gallery: String, counter: CoreMetrics.Counter) {
            self.gallery = gallery
            self.counter = counter
        }
    }

    init(name: String, decidesMatches: Bool, factory: ServerMetrics.Factory) {
        self.name = name
        self.factory = factory
        func outcome(_ outcome: AuditOutcome) -> ReportedCounter {
            factory.reportedCounter(label: "registryd_requests_total", dimensions: [("operation", name), ("outcome", outcome.rawValue)])
        }
        self.ok = decidesMatches ? nil : outcome(.ok)
        self.match = decidesMatches ? outcome(.match) : nil
        self.noMatch = decidesMatches ? outcome(.noMatch) : nil
        self.refused = outcome(.refused)
        self.duration = factory.readableHistogram(label: "registryd_request_duration_seconds", dimensions: [("operation", name)])
        // Present at 0 before the first refusal: a query or an alert on the daemon's own failures
        // (INTERNAL, which every operation may give) then reads 0, not "no data".
        let internalErrors = factory.reportedCounter(
            label: "registryd_request_errors_total", dimensions: [("operation", name), ("code", RegistryError.Code.internal.rawValue)])
        self.errors.withLock { $0[.internal] = internalErrors }
    }

    /// Counts an answered request.
    func answered(outcome: AuditOutcome, since start: ContinuousClock.Instant) {
        switch outcome {
        case .match: self.match?.increment()
        case .noMatch: self.noMatch?.increment()
        default: self.ok?.increment()
        }
        self.duration.record(duration: ContinuousClock.now - start)
    }

    /// Counts an answered request in `gallery` (it exists: the request was answered). The counters
    /// are keyed by label, so there are never more than the labels.
    func answered(inGallery gallery: String, labels metrics: ServerMetrics) {
        if let first = self.firstGallery.load(), first.gallery == gallery { return first.counter.increment() }
        // `own`: the counter is the gallery's own (its label is its name), not the shared (other).
        let (counter, own) = self.galleries.withLock { counters -> (CoreMetrics.Counter, Bool) in
            if let known = counters[gallery] { return (known, true) }
            let label = metrics.galleryLabel(gallery)
            if let known = counters[label] { return (known, label == gallery) }
            let created = CoreMetrics.Counter(
                label: "registryd_gallery_requests_total", dimensions: [("gallery", label), ("operation", self.name)], factory: self.factory)
            counters[label] = created
            return (created, label == gallery)
        }
        // Only a gallery with a counter of its own: one counted as (other) must not take the place.
        if own { _ = self.firstGallery.storeIfNil(GalleryCounter(gallery: gallery, counter: counter)) }
        counter.increment()
    }

    /// Counts a refused request, by its error code (a fixed set: one counter each).
    func refused(code: RegistryError.Code, since start: ContinuousClock.Instant) {
        self.refused.increment()
        let counter = self.errors.withLock { errors in
            if let known = errors[code] { return known }
            let created = self.factory.reportedCounter(
                label: "registryd_request_errors_total", dimensions: [("operation", self.name), ("code", code.rawValue)])
            errors[code] = created
            return created
        }
        counter.increment()
        self.duration.record(duration: ContinuousClock.now - start)
    }

    /// Passes the counts on to the exposition and returns them as `stats` carries them; nil while
    /// the operation has had no request.
    func report() -> Registry_V1_StatsResult.OperationStats? {
        let errors = self.errors.withLock { $0 }.map { (code: $0.key.rawValue, count: UInt64($0.value.report())) }
        let figures = Registry_V1_StatsResult.OperationStats.with {
            $0.operation = self.name
            $0.ok = UInt64(self.ok?.report() ?? 0)
            $0.match = UInt64(self.match?.report() ?? 0)
            $0.noMatch = UInt64(self.noMatch?.report() ?? 0)
            $0.refused = UInt64(self.refused.report())
            $0.errors = Dictionary(errors.filter { $0.count > 0 }, uniquingKeysWith: +)
            if let latency = self.duration.latency { $0.latency = latency }
        }
        return figures.requests > 0 ? figures : nil
    }
}

extension Registry_V1_StatsResult.OperationStats {
    /// Answered and refused.
    var requests: UInt64 { self.ok + self.match + self.noMatch + self.refused }
}

/// A counter the request path adds to with one atomic increment, passed on to its Prometheus
/// counter when the exposition is written (``report()``): its count can be read, which a
/// Prometheus counter's cannot, without counting twice on the request path.
final class ReportedCounter: Sendable {
    private let count = Atomic<Int>(0)
    private let exposed: Prometheus.Counter
    /// What the Prometheus counter holds.
    private let reported = Mutex<Int>(0)

    init(exposed: Prometheus.Counter) {
        self.exposed = exposed
    }

    func increment() {
        self.count.wrappingAdd(1, ordering: .relaxed)
    }

    /// Adds the increments since the last report to the Prometheus counter; returns the count it
    /// holds now.
    @discardableResult
    func report() -> Int {
        self.reported.withLock { reported in
            let count = self.count.load(ordering: .relaxed)
            if count > reported {
                self.exposed.increment(by: Int64(count - reported))
                reported = count
            }
            return reported
        }
    }
}

/// A latency histogram recorded twice: into its Prometheus histogram, for the exposition, and here,
/// where its figures can be read (a Prometheus histogram's cannot), with the same bounds, counts and
/// sum (whole nanoseconds, as both receive them). Its buckets are atomics, not a second lock beside
/// the Prometheus histogram's on every request's path; a reading taken while requests are answered
/// may see a sum a few observations apart from the counts, which the figures tolerate.
///
/// `@unchecked Sendable`: `counts` is allocated once and only reached through its atomics.
final class ReadableHistogram: TimerHandler, @unchecked Sendable {
    let exposed: DurationHistogram
    /// Upper bounds, nanoseconds, ascending.
    private let bounds: [Int64]
    /// Observations per bucket (not cumulative), the last for those above every bound.
    private let counts: UnsafeMutablePointer<Atomic<Int>>
    private let sum = Atomic<Int64>(0)

    struct State {
        var counts: [Int]
        var sum: Int64 = 0
        var count = 0
    }

    init(exposed: DurationHistogram, buckets: [Duration]) {
        self.exposed = exposed
        self.bounds = buckets.map(Self.nanoseconds)
        self.counts = .allocate(capacity: buckets.count + 1)
        for index in 0...buckets.count { (self.counts + index).initialize(to: Atomic(0)) }
    }

    deinit {
        self.counts.deinitialize(count: self.bounds.count + 1)
        self.counts.deallocate()
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    func recordNanoseconds(_ duration: Int64) {
        self.exposed.recordNanoseconds(duration)
        let bucket = self.bounds.firstIndex { $0 >= duration } ?? self.bounds.count
        (self.counts + bucket).pointee.wrappingAdd(1, ordering: .relaxed)
        self.sum.wrappingAdd(duration, ordering: .relaxed)
    }

    func record(duration: Duration) {
        self.recordNanoseconds(Self.nanoseconds(duration))
    }

    /// The buckets, the sum and the count as they stand (the count is the buckets' total).
    private var state: State {
        let counts = (0...self.bounds.count).map { (self.counts + $0).pointee.load(ordering: .relaxed) }
        return State(counts: counts, sum: self.sum.load(ordering: .relaxed), count: counts.reduce(0, +))
    }

    /// The mean and the median and 99th percentile, seconds; nil before the first observation.
    var latency: Registry_V1_StatsResult.Latency? {
        let state = self.state
        guard state.count > 0 else { return nil }
        var cumulative = 0
        let buckets = state.counts.enumerated().map { index, count in
            cumulative += count
            return (upperBound: index < self.bounds.count ? Double(self.bounds[index]) / 1e9 : Double.infinity, cumulative: Double(cumulative))
        }
        return .with {
            $0.meanSeconds = Double(state.sum) / 1e9 / Double(state.count)
            $0.p50Seconds = Self.quantile(0.5, count: Double(state.count), buckets: buckets)
            $0.p99Seconds = Self.quantile(0.99, count: Double(state.count), buckets: buckets)
        }
    }

    /// The q-quantile of `count` observations in cumulative buckets (ascending bounds, the last
    /// `+Inf`), interpolated linearly inside its bucket as Prometheus's `histogram_quantile` does;
    /// the highest finite bound when it falls in `+Inf`'s bucket.
    static func quantile(_ q: Double, count: Double, buckets: [(upperBound: Double, cumulative: Double)]) -> Double {
        guard let highest = buckets.last(where: { $0.upperBound.isFinite }) else { return .nan }
        let rank = q * count
        var lowerBound = 0.0
        var below = 0.0
        for bucket in buckets {
            if bucket.cumulative >= rank {
                guard bucket.upperBound.isFinite else { return highest.upperBound }
                let inBucket = bucket.cumulative - below
                guard inBucket > 0 else { return bucket.upperBound }
                return lowerBound + (bucket.upperBound - lowerBound) * (rank - below) / inBucket
            }
            lowerBound = bucket.upperBound
            below = bucket.cumulative
        }
        return highest.upperBound
    }
}

/// A gauge whose last value can be read (a Prometheus gauge's cannot): the writer's queue depth.
final class ReadableGauge: RecorderHandler, Sendable {
    let exposed: Prometheus.Gauge
    private let bits = Atomic<UInt64>(0.0.bitPattern)

    init(exposed: Prometheus.Gauge) {
        self.exposed = exposed
    }

    func record(_ value: Int64) { self.record(Double(value)) }

    func record(_ value: Double) {
        self.bits.store(value.bitPattern, ordering: .relaxed)
        self.exposed.record(value)
    }

    var value: Double { Double(bitPattern: self.bits.load(ordering: .relaxed)) }
}

extension ServerMetrics {
    /// A swift-metrics factory over the Prometheus registry that gives each metric its help text and
    /// buckets suited to it (Prometheus's defaults start at 5 ms; most requests take microseconds).
    struct Factory: MetricsFactory {
        let registry: PrometheusCollectorRegistry
        /// The readable metrics made so far: the engine's writer's, which `stats` reports.
        let readable = Readable()

        /// Each readable histogram once per label set (an engine opened again gets the same one),
        /// and the writer's queue depth.
        final class Readable: Sendable {
            private let histograms = Mutex<[String: ReadableHistogram]>([:])
            private let gauge = Mutex<ReadableGauge?>(nil)

            var queueDepth: ReadableGauge? { self.gauge.withLock { $0 } }
            var commitDuration: ReadableHistogram? { self.histograms.withLock { $0[EngineMetrics.commitDurationLabel] } }

            func histogram(_ key: String, _ make: () -> ReadableHistogram) -> ReadableHistogram {
                self.histograms.withLock { histograms in
                    if let known = histograms[key] { return known }
                    let created = make()
                    histograms[key] = created
                    return created
                }
            }

            func forget(_ histogram: ReadableHistogram) {
                self.histograms.withLock { histograms in histograms = histograms.filter { $0.value !== histogram } }
            }

            func forget(_ gauge: ReadableGauge) {
                self.gauge.withLock { if $0 === gauge { $0 = nil } }
            }

            func queueDepth(_ make: () -> ReadableGauge) -> ReadableGauge {
                self.gauge.withLock { gauge in
                    if let known = gauge { return known }
                    let created = make()
                    gauge = created
                    return created
                }
            }
        }

        static let help: [String: String] = [
            "registryd_requests_total": "Requests answered (outcome ok, match, no-match) or refused (an error reply), by operation.",
            "registryd_request_errors_total": "Refused requests by operation and error code.",
            "registryd_request_duration_seconds": "Time from a decoded request to its encoded reply, by operation.",
            "registryd_gallery_requests_total": "Answered requests by gallery and operation.",
            "registryd_templates": "Templates stored, by gallery and algorithm.",
            "registryd_identifiers": "Distinct identifiers in each gallery.",
            "registryd_connections_open": "Client connections open.",
            "registryd_connections_accepted_total": "Client connections accepted.",
            "registryd_connections_refused_total": "Connections refused because the daemon served its maximum.",
            "registryd_uptime_seconds": "Seconds since the daemon started.",
            UpMetric.name: UpMetric.help,
            "registryd_build_info": "1, labelled with the daemon's release.",
            "process_start_time_seconds": "Start time of the process since the epoch, in seconds.",
            "registryd_store_bytes": "Bytes of the store's data file in use.",
            "registryd_prefilter_rows_considered_total": "Rows the int8 prefilter bounded.",
            "registryd_prefilter_rows_rescored_total": "Rows the float32 kernel scored after the prefilter.",
            EngineMetrics.queueDepthLabel: "Writes waiting for the writer thread.",
            EngineMetrics.commitDurationLabel: "Durable commits: the batch's write transaction and its fsync.",
            EngineMetrics.batchSizeLabel: "Operations carried by one commit.",
            EngineMetrics.indexPublishDurationLabel: "Publications of a commit in the index: waiting for the scans in progress, then applying it.",
            EngineMetrics.indexLockWaitsLabel:
                "Authentications and registrations that found the index lock taken and were carried on by the writer after its publication.",
            EngineMetrics.auditEntriesDroppedLabel: "Audit entries dropped: their flush failed while 64 MiB of entries already waited.",
            EngineMetrics.erasedPagesLabel: "Pages of data.mdb that held removed data and were wiped with zeros.",
            EngineMetrics.erasureFailuresLabel: "Erasure passes that could not read or write data.mdb.",
            EngineMetrics.damagedRowsLabel: "Requests refused because a stored row their scan needed was damaged.",
            EngineMetrics.filesystemFreeBytesLabel: "Free bytes of the store's file system at the writer's last look.",
            EngineMetrics.reserveBytesLabel: "Free space kept on the store's file system for deletions.",
            EngineMetrics.reserveReachedLabel: "1 while writes that add data are refused to keep the reserve, else 0.",
        ]

        static let requestBuckets: [Duration] = [
            .microseconds(25), .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(10),
        ]
        static let batchBuckets: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]

        /// The metric named `label`, with its help text. A descriptor joins its non-empty parts, so with
        /// no unit the exposed name is the label itself.
        private func descriptor(_ label: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: label, unitName: "", helpText: Self.help[label] ?? "")
        }

        func reportedCounter(label: String, dimensions: [(String, String)]) -> ReportedCounter {
            ReportedCounter(exposed: self.registry.makeCounter(descriptor: self.descriptor(label), labels: dimensions))
        }

        /// The readable histogram of `label` and `dimensions`, with the request buckets.
        func readableHistogram(label: String, dimensions: [(String, String)]) -> ReadableHistogram {
            let key = ([label] + dimensions.flatMap { [$0.0, $0.1] }).joined(separator: "\u{0}")
            return self.readable.histogram(key) {
                ReadableHistogram(
                    exposed: self.registry.makeDurationHistogram(
                        descriptor: self.descriptor(label), labels: dimensions, buckets: Self.requestBuckets),
                    buckets: Self.requestBuckets)
            }
        }

        func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
            self.registry.makeCounter(descriptor: self.descriptor(label), labels: dimensions)
        }

        func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
            self.registry.makeCounter(descriptor: self.descriptor(label), labels: dimensions)
        }

        func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
            if label == EngineMetrics.queueDepthLabel && dimensions.isEmpty && !aggregate {
                return self.readable.queueDepth { ReadableGauge(exposed: self.registry.makeGauge(descriptor: self.descriptor(label), labels: [])) }
            }
            guard aggregate else { return self.registry.makeGauge(descriptor: self.descriptor(label), labels: dimensions) }
            return self.registry.makeValueHistogram(descriptor: self.descriptor(label), labels: dimensions, buckets: Self.batchBuckets)
        }

        func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
            self.registry.makeGauge(descriptor: self.descriptor(label), labels: dimensions)
        }

        func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
            self.readableHistogram(label: label, dimensions: dimensions)
        }

        func destroyCounter(_ handler: any CounterHandler) {
            if let counter = handler as? Prometheus.Counter { self.registry.unregisterCounter(counter) }
        }

        func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
            if let counter = handler as? Prometheus.Counter { self.registry.unregisterCounter(counter) }
        }

        func destroyRecorder(_ handler: any RecorderHandler) {
            if let gauge = handler as? ReadableGauge {
                self.readable.forget(gauge)
                self.registry.unregisterGauge(gauge.exposed)
            }
            if let gauge = handler as? Prometheus.Gauge { self.registry.unregisterGauge(gauge) }
            if let histogram = handler as? ValueHistogram { self.registry.unregisterValueHistogram(histogram) }
        }

        func destroyMeter(_ handler: any MeterHandler) {
            if let gauge = handler as? Prometheus.Gauge { self.registry.unregisterGauge(gauge) }
        }

        func destroyTimer(_ handler: any TimerHandler) {
            if let histogram = handler as? ReadableHistogram {
                self.readable.forget(histogram)
                self.registry.unregisterDurationHistogram(histogram.exposed)
            }
            if let histogram = handler as? DurationHistogram { self.registry.unregisterDurationHistogram(histogram) }
        }
    }
}
