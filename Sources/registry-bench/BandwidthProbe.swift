import ArgumentParser
import Glibc
import Synchronization

/// The read-bandwidth probe: a SIMD sum over a large float32 buffer, on one thread and on two —
/// the physical limit an exhaustive scan approaches.
struct BandwidthProbe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bandwidth", abstract: "The machine's read bandwidth, one thread and two (JSON: gbps_1, gbps_2).")

    @Option(help: "GiB of float32 to sum (positive).")
    var gib: Double = 2

    func validate() throws {
        guard self.gib > 0, self.gib.isFinite else { throw ValidationError("--gib must be a positive number") }
    }

    func run() {
        let gib = self.gib
        let count = Int(gib * Double(1 << 30)) / 4
        let buffer = UnsafeMutablePointer<Float>.allocate(capacity: count)
        defer { buffer.deallocate() }
        // Touch every page first, so the probe measures reads, not page faults.
        buffer.initialize(repeating: 1, count: count)
        let one = (0..<5).map { _ in Self.time(buffer, count, threads: 1) }.min()!
        let two = (0..<5).map { _ in Self.time(buffer, count, threads: 2) }.min()!
        let bytes = Double(count * 4)
        print(JSON.object([("gbps_1", .number(bytes / one / 1e9)), ("gbps_2", .number(bytes / two / 1e9))]).text)
    }

    private static func time(_ buffer: UnsafeMutablePointer<Float>, _ count: Int, threads: Int) -> Double {
        let start = now()
        let share = count / threads
        let sums = Mutex<Float>(0)
        // pthreads rather than tasks: the probe should be a plain loop per core.
        final class Work {
            let body: () -> Void
            init(_ body: @escaping () -> Void) { self.body = body }
        }
        let pointer = UnsafePointer(buffer)
        var handles: [pthread_t] = []
        for part in 0..<threads {
            let base = Int(bitPattern: pointer + part * share)
            let work = Work {
                let sum = Self.sum(UnsafePointer<Float>(bitPattern: base)!, share)
                sums.withLock { $0 += sum }
            }
            var thread = pthread_t()
            pthread_create(
                &thread, nil,
                { context in
                    Unmanaged<Work>.fromOpaque(context!).takeRetainedValue().body()
                    return nil
                }, Unmanaged.passRetained(work).toOpaque())
            handles.append(thread)
        }
        for thread in handles { pthread_join(thread, nil) }
        let elapsed = now() - start
        precondition(sums.withLock { $0 } > 0)
        return elapsed
    }

    private static func sum(_ values: UnsafePointer<Float>, _ count: Int) -> Float {
        var s0 = SIMD8<Float>()
        var s1 = SIMD8<Float>()
        var s2 = SIMD8<Float>()
        var s3 = SIMD8<Float>()
        let raw = UnsafeRawPointer(values)
        var i = 0
        while i + 32 <= count {
            s0 += raw.loadUnaligned(fromByteOffset: 4 * i, as: SIMD8<Float>.self)
            s1 += raw.loadUnaligned(fromByteOffset: 4 * i + 32, as: SIMD8<Float>.self)
            s2 += raw.loadUnaligned(fromByteOffset: 4 * i + 64, as: SIMD8<Float>.self)
            s3 += raw.loadUnaligned(fromByteOffset: 4 * i + 96, as: SIMD8<Float>.self)
            i += 32
        }
        return ((s0 + s1) + (s2 + s3)).sum()
    }
}
