/// How a landmark algorithm prepares and compares templates. Both take the same named 3-D landmarks
/// (``LandmarkVocabulary``), validated the same way; they differ in the row the index keeps and in
/// the score.
public enum LandmarkMatcher: String, Sendable, Hashable, CaseIterable {
    /// The CoMa landmark matcher (version 1000): bounding-box centre, inter-ocular scale, weighted mean
    /// distance. Position and scale only, no rotation. ``LandmarkAlgorithm``.
    case coma
    /// Weighted 3-D similarity alignment, then the residual (version 1001). ``AlignedLandmarkAlgorithm``.
    case aligned

    /// Writes the prepared row of a raw dense template (`LandmarkAlgorithm.floatsPerTemplate` floats).
    public func prepare(mask: UInt32, raw: UnsafePointer<Float>, into output: UnsafeMutablePointer<Float>) {
        switch self {
        case .coma: LandmarkAlgorithm.normalise(mask: mask, raw: raw, into: output)
        case .aligned: AlignedLandmarkAlgorithm.prepare(mask: mask, raw: raw, into: output)
        }
    }

    /// The prepared row of `template` as a new array.
    public func prepared(_ template: DenseLandmarks) -> [Float] {
        let count = LandmarkAlgorithm.floatsPerTemplate
        precondition(template.coordinates.count == count, "dense template has the wrong length")
        return [Float](unsafeUninitializedCapacity: count) { buffer, initialised in
            template.coordinates.withUnsafeBufferPointer { raw in
                self.prepare(mask: template.mask, raw: raw.baseAddress!, into: buffer.baseAddress!)
            }
            initialised = count
        }
    }

    /// Similarity in [0, 1] of two prepared rows. Does not allocate (it runs in the identification scan).
    @inline(__always)
    public func similarity(_ maskA: UInt32, _ a: UnsafePointer<Float>, _ maskB: UInt32, _ b: UnsafePointer<Float>) -> Float {
        switch self {
        case .coma: LandmarkAlgorithm.similarity(maskA, a, maskB, b)
        case .aligned: AlignedLandmarkAlgorithm.similarity(maskA, a, maskB, b)
        }
    }

    /// Similarity of two raw dense templates (prepares both; allocates).
    public func similarity(_ a: DenseLandmarks, _ b: DenseLandmarks) -> Float {
        let rowA = self.prepared(a)
        let rowB = self.prepared(b)
        return rowA.withUnsafeBufferPointer { pa in
            rowB.withUnsafeBufferPointer { pb in self.similarity(a.mask, pa.baseAddress!, b.mask, pb.baseAddress!) }
        }
    }
}
