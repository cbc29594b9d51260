import RegistryModel

/// Scoring kernels over contiguous float32 rows.
///
/// Swift does not reassociate floating-point additions, so a plain loop stays scalar; explicit SIMD8
/// lanes let the compiler use vector registers (measured 3-4× faster on this code).
/// Separate `*` and `+` rather than fused multiply-add: on baseline x86-64 without FMA, `addingProduct`
/// becomes a libm call per lane.
enum Kernels {
    /// The dot product of two `count`-float vectors. The one kernel every comparison uses, so a row
    /// scores the same bits whichever operation or thread scores it: identification, authentication
    /// and the registration checks never disagree by an ulp. One SIMD8 accumulator is enough: the
    /// scan is bound by memory bandwidth (measured: as fast as four accumulators or SIMD16, and a
    /// four-rows-at-a-time variant was 1.6× slower).
    @inline(__always)
    static func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, count: Int) -> Float {
        let rawA = UnsafeRawPointer(a)
        let rawB = UnsafeRawPointer(b)
        var s = SIMD8<Float>()
        var i = 0
        while i + 8 <= count {
            s += rawA.loadUnaligned(fromByteOffset: 4 * i, as: SIMD8<Float>.self) * rawB.loadUnaligned(fromByteOffset: 4 * i, as: SIMD8<Float>.self)
            i += 8
        }
        var sum = s.sum()
        while i < count {
            sum += a[i] * b[i]
            i += 1
        }
        return sum
    }

    /// The dot products of four queries with one row, each lane summed exactly as ``dot(_:_:count:)``
    /// sums it (one SIMD8 accumulator, then the tail), so every lane is bit-identical to `dot`. Four
    /// independent accumulators keep the adder busy when many queries meet one row in cache (the
    /// registration checks of a group commit).
    @inline(__always)
    static func dot4Queries(
        _ q0: UnsafePointer<Float>, _ q1: UnsafePointer<Float>, _ q2: UnsafePointer<Float>, _ q3: UnsafePointer<Float>,
        _ row: UnsafePointer<Float>, count: Int
    ) -> SIMD4<Float> {
        let r = UnsafeRawPointer(row)
        let a0 = UnsafeRawPointer(q0)
        let a1 = UnsafeRawPointer(q1)
        let a2 = UnsafeRawPointer(q2)
        let a3 = UnsafeRawPointer(q3)
        var s0 = SIMD8<Float>()
        var s1 = SIMD8<Float>()
        var s2 = SIMD8<Float>()
        var s3 = SIMD8<Float>()
        var i = 0
        while i + 8 <= count {
            let o = 4 * i
            let v = r.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self)
            s0 += a0.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self) * v
            s1 += a1.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self) * v
            s2 += a2.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self) * v
            s3 += a3.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self) * v
            i += 8
        }
        var sums = SIMD4<Float>(s0.sum(), s1.sum(), s2.sum(), s3.sum())
        while i < count {
            sums += SIMD4(q0[i] * row[i], q1[i] * row[i], q2[i] * row[i], q3[i] * row[i])
            i += 1
        }
        return sums
    }
}
