/// Scoring kernels over contiguous float32 rows.
///
/// Swift does not reassociate floating-point additions, so a plain loop stays scalar; explicit SIMD8
/// lanes let the compiler use vector registers (TOOLCHAIN §5: 3-4× faster).
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
}
