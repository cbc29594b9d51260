import CoreMetrics
import Glibc
import TestSupport
import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// Opens an engine on a fresh directory, runs `body`, closes and removes it.
func withEngine<T>(
    _ configuration: EngineConfiguration = EngineConfiguration(),
    metrics: any MetricsFactory = NOOPMetricsHandler.instance,
    _ body: (Engine) async throws -> T
) async throws -> T {
    let directory = TemporaryDirectory()
    defer { directory.remove() }
    let engine = try Engine(path: directory.path, configuration: configuration, metrics: metrics)
    defer { engine.close() }
    return try await body(engine)
}

/// Hand-computable vectors: the first 16 of `dimension` values are ±0.25 (so the norm is exactly 1 and
/// normalisation keeps every bit), the rest 0. Two such vectors have dot product (16 − 2·d) / 16 where
/// d is the number of positions whose signs differ, so cosine scores are exact multiples of 1/8:
/// 1 flip → 0.875, 2 → 0.75, 3 → 0.625, 4 → 0.5, 8 → 0.
func signs(_ flipped: Set<Int>, dimension: Int = 128) -> [Float] {
    var values = [Float](repeating: 0, count: dimension)
    for i in 0..<16 { values[i] = flipped.contains(i) ? -0.25 : 0.25 }
    return values
}

/// An arcface (cosine) template with the given flipped signs.
func arcface(_ flipped: Set<Int> = []) -> FaceTemplate {
    FaceTemplate(algorithm: Algorithm.arcface.version, vector: signs(flipped))
}

/// A dlib (half-cosine) template with the given flipped signs: score (cos + 1) / 2.
func dlib(_ flipped: Set<Int> = []) -> FaceTemplate {
    FaceTemplate(algorithm: Algorithm.dlib.version, vector: signs(flipped))
}

/// Flips `count` signs starting at position `start`.
func flips(_ start: Int, _ count: Int) -> Set<Int> { Set(start..<(start + count)) }

/// A gallery of arcface then dlib with explicit thresholds for both.
func twoRegistryGallery(
    _ name: String,
    arcface arcfaceThresholds: Thresholds = Thresholds(authentication: 0.75, identification: 0.75, autoEnrolment: 0.75),
    dlib dlibThresholds: Thresholds = Thresholds(authentication: 0.75, identification: 0.75, autoEnrolment: 0.75)
) -> GalleryConfiguration {
    GalleryConfiguration(
        name: name,
        registries: [
            RegistryConfiguration(algorithm: Algorithm.arcface.version, thresholds: arcfaceThresholds),
            RegistryConfiguration(algorithm: Algorithm.dlib.version, thresholds: dlibThresholds),
        ])
}

/// Runs `body` expecting a ``RegistryError`` with `code`, and returns it.
@discardableResult
func expectRegistryError(
    _ code: RegistryError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> RegistryError? {
    do {
        try await body()
        Issue.record("expected \(code.rawValue), but the call succeeded", sourceLocation: sourceLocation)
    } catch let error as RegistryError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code.rawValue), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Everything observable about an engine's stored state, for before/after comparisons.
struct StoreSnapshot: Equatable {
    var galleries: [GalleryInfo]
    var templates: [String: [StoredTemplate]]
    var migration: [String: [MigrationStatus]]

    init(_ engine: Engine) async throws {
        self.galleries = engine.galleries()
        self.templates = [:]
        self.migration = [:]
        for gallery in self.galleries {
            self.migration[gallery.name] = try engine.migrationStatus(gallery: gallery.name)
            var after: String?
            repeat {
                let page = try await engine.identifiers(gallery: gallery.name, after: after, limit: 3)
                for identifier in page.identifiers {
                    self.templates["\(gallery.name)/\(identifier)"] = try await engine.templates(
                        gallery: gallery.name, identifier: identifier, includeData: true)
                }
                after = page.next
            } while after != nil
        }
    }
}

/// A plain OS thread, for tests that block one (never a Swift concurrency thread while it waits).
struct Thread: @unchecked Sendable {
    private let handle: pthread_t

    /// Starts `body` on a new thread; ``join()`` waits for its end.
    init(_ body: @escaping @Sendable () -> Void) {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        let rc = pthread_create(
            &thread, nil,
            { context in
                Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
                return nil
            }, context)
        precondition(rc == 0)
        self.handle = thread
    }

    func join() { pthread_join(self.handle, nil) }

    /// Starts `body` on a new thread that nobody joins.
    static func detach(_ body: @escaping @Sendable () -> Void) {
        pthread_detach(Thread(body).handle)
    }
}
