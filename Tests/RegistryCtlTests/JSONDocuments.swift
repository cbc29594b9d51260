// The JSON documents registryctl prints, as a script reads them: what the tests decode its output
// into, written from the documented shapes rather than from the types that encode them.

struct FindingDocument: Decodable, Equatable {
    var algorithm: UInt32
    /// `similar_face` or `face_mismatch`.
    var kind: String
    var identifier: String?
    var score: Float?
    var bestScore: Float?
}

struct QualityDocument: Decodable, Equatable {
    var score: Float
    var rating: String
    var weakest: String
    var components: [String: Float]
}

struct QualityTooLowDocument: Decodable, Equatable {
    var algorithm: UInt32
    var minimum: Float
    var assessment: QualityDocument?
    var missing: [String]
}

struct LivenessCheckDocument: Decodable, Equatable {
    var check: String
    var mandatory: Bool
    var passed: Bool
    var value: Float?
    var condition: String
    var threshold: String
}

struct LivenessVerdictDocument: Decodable, Equatable {
    var live: Bool
    var thresholds: String
    var validSamples: Int
    var checks: [LivenessCheckDocument]
    var failed: [String]
    var reason: String?
}

struct GalleryDocument: Decodable, Equatable {
    struct Registry: Decodable, Equatable {
        var templates: Int
        var identifiers: Int
        var minimumQuality: Float?
        var minimumAutoEnrolmentQuality: Float?
    }

    var name: String
    var identifiers: Int
    var registries: [Registry]
    var livenessK: Float
}

struct LandmarkDocument: Decodable, Equatable {
    var name: String
    var x: Float
    var y: Float
    var z: Float
}
