/// Scoring kernels over contiguous float32 rows.
///
/// Swift does not reassociate floating-point additions, so a plain loop stays scalar; explicit SIMD8
/// lanes with four accumulators let the compiler use vector registers (TOOLCHAIN §5: 3-4× faster).
/// Separate `*` and `+` rather than fused multiply-add: on baseline x86-64 without FMA, `addingProduct`
/// becomes a libm call per lane.
enum Kernels {
    /// The dot product of two `count`-float vectors.
    @inline(__always)
    static func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, count: Int) -> Float {
        var i = 0
        var s0 = SIMD8<Float>(), s1 = SIMD8<Float>(), s2 = SIMD8<Float>(), s3 = SIMD8<Float>()
        let rawA = UnsafeRawPointer(a)
        let rawB = UnsafeRawPointer(b)
        while i + 32 <= count {
            let o = i * 4
            s0 += rawA.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self)
                * rawB.loadUnaligned(fromByteOffset: o, as: SIMD8<Float>.self)
            s1 += rawA.loadUnaligned(fromByteOffset: o + 32, as: SIMD8<Float>.self)
                * rawB.loadUnaligned(fromByteOffset: o + 32, as: SIMD8<Float>.self)
            s2 += rawA.loadUnaligned(fromByteOffset: o + 64, as: SIMD8<Float>.self)
                * rawB.loadUnaligned(fromByteOffset: o + 64, as: SIMD8<Float>.self)
            s3 += rawA.loadUnaligned(fromByteOffset: o + 96, as: SIMD8<Float>.self)
                * rawB.loadUnaligned(fromByteOffset: o + 96, as: SIMD8<Float>.self)
            i += 32
        }
        while i + 8 <= count {
            s0 += rawA.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
                * rawB.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
            i += 8
        }
        var sum = ((s0 + s1) + (s2 + s3)).sum()
        while i < count {
            sum += a[i] * b[i]
            i += 1
        }
        return sum
    }
}
