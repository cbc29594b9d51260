import RegistryModel

/// A validated template in the form the index and the store keep: vectors L2-normalised (for cosine
/// algorithms), landmarks densified with raw coordinates for storage and normalised ones for scoring.
struct PreparedTemplate: Sendable {
    let algorithm: Algorithm
    /// A landmark template's stored form (mask then raw coordinates); nil for vectors, whose stored
    /// form is their row.
    private let landmarkPayload: [UInt8]?

    /// The bytes persisted in LMDB (little-endian float32s; landmarks: mask then raw coordinates).
    /// Built on demand: most prepared templates are queries and are never stored.
    var payload: [UInt8] { self.landmarkPayload ?? self.row.withUnsafeBytes { Array($0) } }
    /// The row the index scans: `algorithm.rowStride` floats.
    let row: [Float]
    /// Landmark presence mask (0 for vectors).
    let mask: UInt32
    /// The landmark symmetry/coverage score (the CoMa landmark matcher) of a landmark template, else nil.
    let landmarkQuality: Float?

    /// Validates `template` against `algorithm` and prepares it.
    /// - Throws: ``TemplateProblem`` naming what is wrong.
    init(_ template: FaceTemplate, algorithm: Algorithm) throws(TemplateProblem) {
        self.algorithm = algorithm
        switch (algorithm.kind, template.data) {
        case (.vector(let dimension), .vector(let values)):
            let row = try Self.prepareVector(values, dimension: dimension, scoreFunction: algorithm.scoreFunction)
            self.row = row
            self.landmarkPayload = nil
            self.mask = 0
            self.landmarkQuality = nil
        case (.landmarks(let matcher), .landmarks(let landmarks)):
            let dense = try LandmarkAlgorithm.dense(from: landmarks)
            self.row = matcher.prepared(dense)
            self.mask = dense.mask
            self.landmarkQuality = LandmarkAlgorithm.quality(dense)
            self.landmarkPayload = Self.landmarkPayload(dense)
        case (.vector(let dimension), .landmarks):
            throw .wrongKind(expected: "a vector of \(dimension) values")
        case (.landmarks, .vector):
            throw .wrongKind(expected: "named landmarks")
        }
    }

    /// The bytes of a stored payload of `algorithm` (opened, when the store is encrypted).
    static func payloadSize(of algorithm: Algorithm) -> Int {
        switch algorithm.kind {
        case .vector: 4 * algorithm.rowStride
        case .landmarks: 4 + 4 * algorithm.rowStride
        }
    }

    /// Rebuilds a prepared template from its stored payload (export, verification).
    static func decodePayload(_ bytes: UnsafeRawBufferPointer, algorithm: Algorithm) -> FaceTemplate.Data {
        switch algorithm.kind {
        case .vector:
            // loadUnaligned, not bindMemory: the bytes belong to a [UInt8] or LMDB's map.
            return .vector(stride(from: 0, to: bytes.count - 3, by: 4).map { bytes.loadUnaligned(fromByteOffset: $0, as: Float.self) })
        case .landmarks:
            guard bytes.count >= 4 + 12 * LandmarkVocabulary.count else { return .landmarks([]) }
            let mask = bytes.loadUnaligned(as: UInt32.self)
            var landmarks: [Landmark] = []
            for slot in 0..<LandmarkVocabulary.count where mask & (1 << slot) != 0 {
                let base = 4 + slot * 12
                landmarks.append(
                    Landmark(
                        name: LandmarkVocabulary.names[slot],
                        x: bytes.loadUnaligned(fromByteOffset: base, as: Float.self),
                        y: bytes.loadUnaligned(fromByteOffset: base + 4, as: Float.self),
                        z: bytes.loadUnaligned(fromByteOffset: base + 8, as: Float.self)))
            }
            return .landmarks(landmarks)
        }
    }

    private static func prepareVector(
        _ values: [Float],
        dimension: Int,
        scoreFunction: ScoreFunction
    ) throws(TemplateProblem) -> [Float] {
        guard values.count == dimension else { throw .wrongDimension(expected: dimension, actual: values.count) }
        // Without a test per value in the loop (every authentication and identification pays for it):
        // squares of finite floats summed in doubles cannot overflow, so the sum is finite exactly
        // when every value is, and only then is the first offending value looked for.
        var sumOfSquares: Double = 0
        for value in values { sumOfSquares += Double(value) * Double(value) }
        guard sumOfSquares.isFinite else { throw .nonFiniteValue(index: values.firstIndex { !$0.isFinite } ?? 0) }
        guard sumOfSquares > 0 else { throw .zeroVector }
        let norm = sumOfSquares.squareRoot()
        if scoreFunction.normalisesTemplates {
            // An exactly unit vector is kept bit for bit, so hand-computed scores stay exact.
            if norm == 1 { return values }
            return values.map { Float(Double($0) / norm) }
        }
        guard abs(norm - 1) <= 0.01 else { throw .notNormalised(norm: Float(norm)) }
        return values
    }

    private static func landmarkPayload(_ dense: DenseLandmarks) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(4 + 4 * dense.coordinates.count)
        withUnsafeBytes(of: dense.mask.littleEndian) { bytes.append(contentsOf: $0) }
        dense.coordinates.withUnsafeBytes { bytes.append(contentsOf: $0) }
        return bytes
    }
}

/// A face's templates prepared for one gallery, at most one per algorithm. A face carries one to a
/// few templates, so a lookup scans a short array: no hash table is built and hashed per request.
struct PreparedFace: Sendable {
    private(set) var templates: [PreparedTemplate] = []

    init(capacity: Int) {
        self.templates.reserveCapacity(capacity)
    }

    /// Where the template of algorithm `version` is in ``templates``.
    func index(of version: UInt32) -> Int? {
        self.templates.firstIndex { $0.algorithm.version == version }
    }

    func has(_ version: UInt32) -> Bool {
        self.index(of: version) != nil
    }

    /// The template of algorithm `version`, if the face carries one.
    subscript(version: UInt32) -> PreparedTemplate? {
        self.index(of: version).map { self.templates[$0] }
    }

    mutating func append(_ template: PreparedTemplate) {
        self.templates.append(template)
    }
}
