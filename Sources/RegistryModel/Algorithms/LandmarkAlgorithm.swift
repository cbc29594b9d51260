import Glibc

/// The fixed landmark vocabulary: the 32 names of the CoMa landmark matcher's weight table, in the order they appear there
/// (LEFT_EYE first, RIGHT_EAR_TRAGION last). A template's dense form stores landmark i in slot i.
///
/// Exactly 32 names, so a template's presence set fits a `UInt32` mask.
public enum LandmarkVocabulary {
    /// The matcher's weight table, in its order. Higher weight = more identity-discriminative landmark.
    private static let table: [(name: String, weight: Float)] = [
        // Eyes: highly discriminative.
        ("LEFT_EYE", 2.5),
        ("RIGHT_EYE", 2.5),
        ("LEFT_EYE_LEFT_CORNER", 2.0),
        ("LEFT_EYE_RIGHT_CORNER", 2.0),
        ("RIGHT_EYE_LEFT_CORNER", 2.0),
        ("RIGHT_EYE_RIGHT_CORNER", 2.0),
        ("LEFT_EYE_TOP_BOUNDARY", 1.5),
        ("LEFT_EYE_BOTTOM_BOUNDARY", 1.5),
        ("RIGHT_EYE_TOP_BOUNDARY", 1.5),
        ("RIGHT_EYE_BOTTOM_BOUNDARY", 1.5),
        // Nose: a stable reference.
        ("NOSE_TIP", 2.5),
        ("MIDPOINT_BETWEEN_EYES", 2.0),
        ("NOSE_BOTTOM_CENTER", 1.8),
        ("NOSE_BOTTOM_LEFT", 1.5),
        ("NOSE_BOTTOM_RIGHT", 1.5),
        // Mouth: shape varies per person, but also with expression.
        ("MOUTH_LEFT", 1.8),
        ("MOUTH_RIGHT", 1.8),
        ("UPPER_LIP", 1.5),
        ("LOWER_LIP", 1.5),
        ("MOUTH_CENTER", 1.3),
        // Eyebrows.
        ("RIGHT_OF_LEFT_EYEBROW", 1.6),
        ("LEFT_OF_LEFT_EYEBROW", 1.6),
        ("LEFT_OF_RIGHT_EYEBROW", 1.6),
        ("RIGHT_OF_RIGHT_EYEBROW", 1.6),
        // Face contour.
        ("CHIN_GNATHION", 2.0),
        ("LEFT_CHEEK_CENTER", 1.5),
        ("RIGHT_CHEEK_CENTER", 1.5),
        ("CHIN_LEFT_GONION", 1.3),
        ("CHIN_RIGHT_GONION", 1.3),
        ("FOREHEAD_GLABELLA", 1.2),
        // Ears: least reliable (often occluded or badly placed).
        ("LEFT_EAR_TRAGION", 1.0),
        ("RIGHT_EAR_TRAGION", 1.0),
    ]

    /// Number of landmark names (and dense slots): 32.
    public static let count: Int = table.count

    /// The landmark names in table order; `names[i]` lives in dense slot i.
    public static let names: [String] = table.map(\.name)

    /// The matcher's per-landmark weights, parallel to `names`.
    public static let weights: [Float] = table.map(\.weight)

    /// Name → slot, so validation is a hash lookup rather than a scan of 32 strings.
    private static let slotByName: [String: Int] = {
        var slots: [String: Int] = [:]
        for (slot, name) in names.enumerated() { slots[name] = slot }
        return slots
    }()

    /// The dense slot of `name` (exact, case-sensitive match), or nil if it is not in the vocabulary.
    public static func slot(of name: String) -> Int? {
        slotByName[name]
    }
}

/// A validated landmark template in dense form: raw coordinates as sent (x, y, z of slot i at 3i..3i+2,
/// zeros for absent slots) and a presence mask (bit i set = slot i present).
public struct DenseLandmarks: Sendable, Hashable {
    /// Bit i set = landmark slot i is present.
    public var mask: UInt32
    /// Raw coordinates, slot i at 3i..3i+2; always `3 * LandmarkVocabulary.count` values.
    public var coordinates: [Float]
    /// Number of landmarks present.
    public var count: Int { mask.nonzeroBitCount }

    /// Wraps an existing mask and coordinate array (e.g. read back from storage). The array length is
    /// checked because the pointer-based algorithm code reads exactly `floatsPerTemplate` values.
    public init(mask: UInt32, coordinates: [Float]) {
        precondition(
            coordinates.count == LandmarkAlgorithm.floatsPerTemplate,
            "dense landmark templates hold exactly \(LandmarkAlgorithm.floatsPerTemplate) floats"
        )
        self.mask = mask
        self.coordinates = coordinates
    }
}

/// The landmark face matching algorithm of the CoMa landmark matcher design: geometric normalisation (bounding-box
/// centre, inter-ocular scale), weighted mean 3-D distance over shared landmarks, exponential decay to
/// a similarity in (0, 1], and a capture quality score.
public enum LandmarkAlgorithm {
    /// Minimum landmarks per template, and minimum landmarks shared by two templates for them to match.
    public static let minimumLandmarks = 15

    /// Decay rate: similarity = exp(-decay * weighted mean distance), so d = 0.3 → ≈0.47, d = 1 → ≈0.08.
    public static let decay: Float = 2.5

    /// Floats in one dense (raw or normalised) template: x, y, z per vocabulary slot (96).
    public static let floatsPerTemplate = 3 * LandmarkVocabulary.count

    // Slots the algorithm refers to by name; resolved once, the vocabulary is fixed.
    private static let leftEye = LandmarkVocabulary.slot(of: "LEFT_EYE")!
    private static let rightEye = LandmarkVocabulary.slot(of: "RIGHT_EYE")!
    private static let leftEyeLeftCorner = LandmarkVocabulary.slot(of: "LEFT_EYE_LEFT_CORNER")!
    private static let rightEyeRightCorner = LandmarkVocabulary.slot(of: "RIGHT_EYE_RIGHT_CORNER")!
    private static let noseTip = LandmarkVocabulary.slot(of: "NOSE_TIP")!

    /// Left/right pairs whose horizontal distances from the nose tip measure capture symmetry (the matcher's pairs).
    private static let symmetryPairs: [(left: Int, right: Int)] = [
        ("LEFT_EYE", "RIGHT_EYE"),
        ("LEFT_EYE_LEFT_CORNER", "RIGHT_EYE_RIGHT_CORNER"),
        ("MOUTH_LEFT", "MOUTH_RIGHT"),
        ("LEFT_CHEEK_CENTER", "RIGHT_CHEEK_CENTER"),
    ].map { (LandmarkVocabulary.slot(of: $0.0)!, LandmarkVocabulary.slot(of: $0.1)!) }

    /// Below this inter-ocular distance (in the client's raw units, i.e. pixels) the eyes are too close
    /// to serve as a scale reference, so the bounding box is used instead (as in the seed).
    private static let minimumInterOcularDistance = 10.0

    /// Validates and densifies. Errors, checked in this order: an unknown name -> .unknownLandmark(name:),
    /// a repeated name -> .duplicateLandmark(name:), a NaN/inf coordinate -> .nonFiniteValue(index: 3*i + axis)
    /// where i is the landmark's position in the input array, fewer than 15 landmarks -> .tooFewLandmarks(count:, minimum: 15).
    ///
    /// Each kind of problem is checked over the whole input before the next kind, so the reported
    /// problem does not depend on where in the array the problems sit.
    public static func dense(from landmarks: [Landmark]) throws(TemplateProblem) -> DenseLandmarks {
        var slots: [Int] = []
        slots.reserveCapacity(landmarks.count)
        for landmark in landmarks {
            guard let slot = LandmarkVocabulary.slot(of: landmark.name) else {
                throw .unknownLandmark(name: landmark.name)
            }
            slots.append(slot)
        }

        var mask: UInt32 = 0
        for (position, slot) in slots.enumerated() {
            let bit = UInt32(1) << UInt32(slot)
            if mask & bit != 0 { throw .duplicateLandmark(name: landmarks[position].name) }
            mask |= bit
        }

        for (position, landmark) in landmarks.enumerated() {
            for (axis, value) in [landmark.x, landmark.y, landmark.z].enumerated() where !value.isFinite {
                throw .nonFiniteValue(index: 3 * position + axis)
            }
        }

        guard landmarks.count >= minimumLandmarks else {
            throw .tooFewLandmarks(count: landmarks.count, minimum: minimumLandmarks)
        }

        var coordinates = [Float](repeating: 0, count: floatsPerTemplate)
        for (slot, landmark) in zip(slots, landmarks) {
            coordinates[3 * slot] = landmark.x
            coordinates[3 * slot + 1] = landmark.y
            coordinates[3 * slot + 2] = landmark.z
        }
        return DenseLandmarks(mask: mask, coordinates: coordinates)
    }

    /// Geometric normalisation of one template: writes (coord - bbox centre) / scale for present slots and
    /// 0 for absent slots into `output` (`floatsPerTemplate` floats). Done once per template, at
    /// registration or load, never per comparison.
    ///
    /// - centre: per axis (min + max) / 2 over the present landmarks, in x, y and z.
    /// - scale: the 2-D (x, y) distance between the left-eye and right-eye references. The left reference
    ///   is LEFT_EYE if present, else LEFT_EYE_LEFT_CORNER; the right one is RIGHT_EYE, else
    ///   RIGHT_EYE_RIGHT_CORNER. The matcher design took whichever of the two names came first in the input list,
    ///   which made the result depend on the client's ordering; preferring the eye centres is deterministic
    ///   and keeps the design's intent (inter-ocular distance), using the outer corners only as a stand-in.
    ///   If a reference is missing or the distance is < 10, scale = max(bbox width, bbox height) in x/y;
    ///   if that is 0, scale = 1 (the design's guards against dividing by tiny or zero numbers).
    ///
    /// Computes in Double (large pixel coordinates minus the centre lose precision in Float), stores Float.
    /// Does not allocate.
    public static func normalise(mask: UInt32, raw: UnsafePointer<Float>, into output: UnsafeMutablePointer<Float>) {
        output.update(repeating: 0, count: floatsPerTemplate)
        guard mask != 0 else { return }

        var minX = Double.infinity
        var minY = Double.infinity
        var minZ = Double.infinity
        var maxX = -Double.infinity
        var maxY = -Double.infinity
        var maxZ = -Double.infinity
        var remaining = mask
        while remaining != 0 {
            let slot = remaining.trailingZeroBitCount
            remaining &= remaining - 1
            let x = Double(raw[3 * slot])
            let y = Double(raw[3 * slot + 1])
            let z = Double(raw[3 * slot + 2])
            minX = min(minX, x)
            maxX = max(maxX, x)
            minY = min(minY, y)
            maxY = max(maxY, y)
            minZ = min(minZ, z)
            maxZ = max(maxZ, z)
        }
        let centreX = (minX + maxX) / 2
        let centreY = (minY + maxY) / 2
        let centreZ = (minZ + maxZ) / 2

        func present(_ slot: Int) -> Bool { mask & (UInt32(1) << UInt32(slot)) != 0 }
        let left = present(leftEye) ? leftEye : (present(leftEyeLeftCorner) ? leftEyeLeftCorner : nil)
        let right = present(rightEye) ? rightEye : (present(rightEyeRightCorner) ? rightEyeRightCorner : nil)

        var scale = 0.0
        var haveInterOcular = false
        if let left, let right {
            let dx = Double(raw[3 * right]) - Double(raw[3 * left])
            let dy = Double(raw[3 * right + 1]) - Double(raw[3 * left + 1])
            scale = (dx * dx + dy * dy).squareRoot()
            haveInterOcular = scale >= minimumInterOcularDistance
        }
        if !haveInterOcular { scale = max(maxX - minX, maxY - minY) }
        if scale == 0 { scale = 1 }

        remaining = mask
        while remaining != 0 {
            let slot = remaining.trailingZeroBitCount
            remaining &= remaining - 1
            output[3 * slot] = Float((Double(raw[3 * slot]) - centreX) / scale)
            output[3 * slot + 1] = Float((Double(raw[3 * slot + 1]) - centreY) / scale)
            output[3 * slot + 2] = Float((Double(raw[3 * slot + 2]) - centreZ) / scale)
        }
    }

    /// The normalised form of `template` as a new `floatsPerTemplate`-float array (see `normalise`).
    public static func normalised(_ template: DenseLandmarks) -> [Float] {
        precondition(template.coordinates.count == floatsPerTemplate, "dense template has the wrong length")
        return [Float](unsafeUninitializedCapacity: floatsPerTemplate) { buffer, initialised in
            template.coordinates.withUnsafeBufferPointer { raw in
                normalise(mask: template.mask, raw: raw.baseAddress!, into: buffer.baseAddress!)
            }
            initialised = floatsPerTemplate
        }
    }

    /// Similarity of two NORMALISED dense templates: over slots present in both masks, the weighted mean of
    /// the 3-D Euclidean distances (weights from `LandmarkVocabulary.weights`), mapped to exp(-decay * mean).
    /// Returns 0 when fewer than `minimumLandmarks` slots are present in both, so such a pair never matches
    /// however close the few shared landmarks are. Does not allocate (it runs in the identification scan).
    public static func similarity(
        _ maskA: UInt32, _ a: UnsafePointer<Float>, _ maskB: UInt32, _ b: UnsafePointer<Float>
    ) -> Float {
        let shared = maskA & maskB
        guard shared.nonzeroBitCount >= minimumLandmarks else { return 0 }
        let weights = LandmarkVocabulary.weights
        var weightedDistance: Float = 0
        var totalWeight: Float = 0
        var remaining = shared
        while remaining != 0 {
            let slot = remaining.trailingZeroBitCount
            remaining &= remaining - 1
            let dx = a[3 * slot] - b[3 * slot]
            let dy = a[3 * slot + 1] - b[3 * slot + 1]
            let dz = a[3 * slot + 2] - b[3 * slot + 2]
            let weight = weights[slot]
            weightedDistance += weight * (dx * dx + dy * dy + dz * dz).squareRoot()
            totalWeight += weight
        }
        return expf(-decay * (weightedDistance / totalWeight))
    }

    /// Similarity of two RAW dense templates: normalises both, then compares (convenience; allocates).
    public static func similarity(_ a: DenseLandmarks, _ b: DenseLandmarks) -> Float {
        let normalA = normalised(a)
        let normalB = normalised(b)
        return normalA.withUnsafeBufferPointer { pa in
            normalB.withUnsafeBufferPointer { pb in
                similarity(a.mask, pa.baseAddress!, b.mask, pb.baseAddress!)
            }
        }
    }

    /// The matcher's capture quality score on the RAW template, in [0, 1]:
    /// symmetry * 0.6 + coverage * 0.4, where symmetry averages, over the four left/right pairs present,
    /// 1 - |dl - dr| / max(dl, dr, 1) with dl, dr the horizontal distances from NOSE_TIP (0.5 if no pair is
    /// present), and coverage = min(1, count / 30). A template without NOSE_TIP scores 0.5 (symmetry cannot
    /// be judged); one with fewer than 10 landmarks scores 0.
    public static func quality(_ template: DenseLandmarks) -> Float {
        guard template.count >= 10 else { return 0 }
        let mask = template.mask
        func present(_ slot: Int) -> Bool { mask & (UInt32(1) << UInt32(slot)) != 0 }
        guard present(noseTip) else { return 0.5 }

        let coordinates = template.coordinates
        let noseX = Double(coordinates[3 * noseTip])
        var symmetrySum = 0.0
        var pairCount = 0
        for pair in symmetryPairs where present(pair.left) && present(pair.right) {
            let leftDistance = abs(Double(coordinates[3 * pair.left]) - noseX)
            let rightDistance = abs(Double(coordinates[3 * pair.right]) - noseX)
            // The floor of 1 keeps a near-zero pair (a profile view) from dividing by ~0.
            let largest = max(leftDistance, rightDistance, 1)
            symmetrySum += 1 - abs(leftDistance - rightDistance) / largest
            pairCount += 1
        }
        let symmetry = pairCount > 0 ? symmetrySum / Double(pairCount) : 0.5
        let coverage = min(1, Double(template.count) / 30)
        let score = symmetry * 0.6 + coverage * 0.4
        return Float(min(1, max(0, score)))
    }
}
