import Glibc
import RegistryModel

/// Synthetic 3-D faces and landmark captures of them, for evaluating and demonstrating the landmark
/// algorithms (tools/landmark-eval, examples/, tests). Deterministic for a seed.
///
/// A person is a base face (32 named landmarks in millimetres, head frame: x towards the subject's
/// left, y up, z towards the camera) with every coordinate moved by N(0, σ) and the whole face scaled
/// by a size factor. A capture turns the head (yaw about y, pitch about x, roll about z), projects it
/// orthographically at some pixels per millimetre into an image (x right, y down, z the detector's
/// depth in the same pixel scale), adds detector noise, and drops landmarks the detector would not
/// report: the far ear once the head is turned enough to hide it, and any asked to go missing.
public enum SyntheticFaces {
    /// The base face, vocabulary order, in mm. Rough adult proportions: eyes 62 mm apart, nose tip
    /// 25 mm in front of the eyes, chin 100 mm below them, ears 85 mm behind.
    public static let base: [SIMD3<Double>] = {
        let points: [String: SIMD3<Double>] = [
            "LEFT_EYE": [31, 0, 0], "RIGHT_EYE": [-31, 0, 0],
            "LEFT_EYE_LEFT_CORNER": [44, 0, -6], "LEFT_EYE_RIGHT_CORNER": [18, 0, -2],
            "RIGHT_EYE_LEFT_CORNER": [-18, 0, -2], "RIGHT_EYE_RIGHT_CORNER": [-44, 0, -6],
            "LEFT_EYE_TOP_BOUNDARY": [31, 5, 1], "LEFT_EYE_BOTTOM_BOUNDARY": [31, -5, 0],
            "RIGHT_EYE_TOP_BOUNDARY": [-31, 5, 1], "RIGHT_EYE_BOTTOM_BOUNDARY": [-31, -5, 0],
            "NOSE_TIP": [0, -35, 25], "MIDPOINT_BETWEEN_EYES": [0, 2, 8],
            "NOSE_BOTTOM_CENTER": [0, -42, 15], "NOSE_BOTTOM_LEFT": [15, -38, 6], "NOSE_BOTTOM_RIGHT": [-15, -38, 6],
            "MOUTH_LEFT": [25, -62, 3], "MOUTH_RIGHT": [-25, -62, 3],
            "UPPER_LIP": [0, -55, 12], "LOWER_LIP": [0, -68, 10], "MOUTH_CENTER": [0, -61, 9],
            "RIGHT_OF_LEFT_EYEBROW": [15, 15, 4], "LEFT_OF_LEFT_EYEBROW": [50, 12, -8],
            "LEFT_OF_RIGHT_EYEBROW": [-15, 15, 4], "RIGHT_OF_RIGHT_EYEBROW": [-50, 12, -8],
            "CHIN_GNATHION": [0, -100, 0], "LEFT_CHEEK_CENTER": [48, -38, -10], "RIGHT_CHEEK_CENTER": [-48, -38, -10],
            "CHIN_LEFT_GONION": [58, -80, -55], "CHIN_RIGHT_GONION": [-58, -80, -55],
            "FOREHEAD_GLABELLA": [0, 20, 6], "LEFT_EAR_TRAGION": [72, -25, -85], "RIGHT_EAR_TRAGION": [-72, -25, -85],
        ]
        return LandmarkVocabulary.names.map { points[$0]! }
    }()

    static let leftEar = LandmarkVocabulary.slot(of: "LEFT_EAR_TRAGION")!
    static let rightEar = LandmarkVocabulary.slot(of: "RIGHT_EAR_TRAGION")!

    /// A person: the base face varied per coordinate by N(0, `shapeSigma`) mm, then scaled by a size
    /// factor uniform in 1 ± `sizeSpread`.
    public static func person(_ random: inout SeededRandom, shapeSigma: Double = 3, sizeSpread: Double = 0.1) -> [SIMD3<Double>] {
        let size = 1 + sizeSpread * (2 * random.uniform() - 1)
        return base.map { point in
            (point + SIMD3(random.gaussian(), random.gaussian(), random.gaussian()) * shapeSigma) * size
        }
    }

    /// How a capture is taken.
    public struct Pose: Sendable, Hashable {
        /// Degrees: yaw turns the head left/right (about y), pitch nods (about x), roll tilts (about z).
        public var yaw: Double
        public var pitch: Double
        public var roll: Double
        /// Image scale: 1.5 px/mm at the enrolment distance; 1.0 is 1.5 times further away.
        public var pixelsPerMillimetre: Double
        /// Detector noise, px, N(0, σ) on x and y, and on z (the depth estimate).
        public var noise: Double
        public var depthNoise: Double
        /// Landmarks left out at random (never below the 15 a template needs).
        public var missing: Int
        /// A 2-D detector: every z is 0.
        public var flat: Bool

        public init(
            yaw: Double = 0, pitch: Double = 0, roll: Double = 0, pixelsPerMillimetre: Double = 1.5, noise: Double = 1,
            depthNoise: Double = 1, missing: Int = 0, flat: Bool = false
        ) {
            self.yaw = yaw
            self.pitch = pitch
            self.roll = roll
            self.pixelsPerMillimetre = pixelsPerMillimetre
            self.noise = noise
            self.depthNoise = depthNoise
            self.missing = missing
            self.flat = flat
        }

        /// The enrolment capture: frontal, 1.5 px/mm, 1 px noise.
        public static let frontal = Pose()
    }

    /// The head turn beyond which the far ear is hidden (and a detector does not report it).
    public static let earHiddenBeyondDegrees = 12.0

    /// A capture of `person` in `pose`: named landmarks in image coordinates, vocabulary order.
    public static func capture(_ person: [SIMD3<Double>], _ pose: Pose, _ random: inout SeededRandom) -> [Landmark] {
        let rotation = Self.rotation(yaw: pose.yaw, pitch: pose.pitch, roll: pose.roll)
        // Where the face lands in a 640 × 480 image varies a little from capture to capture.
        let centre = SIMD2(320 + 20 * (2 * random.uniform() - 1), 240 + 20 * (2 * random.uniform() - 1))
        var hidden = Set<Int>()
        if abs(pose.yaw) > earHiddenBeyondDegrees { hidden.insert(pose.yaw > 0 ? Self.leftEar : Self.rightEar) }
        var candidates = (0..<LandmarkVocabulary.count).filter { !hidden.contains($0) }
        var dropping = min(pose.missing, max(0, candidates.count - LandmarkAlgorithm.minimumLandmarks))
        while dropping > 0 {
            hidden.insert(candidates.remove(at: Int(random.next() % UInt64(candidates.count))))
            dropping -= 1
        }
        var landmarks: [Landmark] = []
        for (slot, point) in person.enumerated() {
            let turned = rotation.0 * point.x + rotation.1 * point.y + rotation.2 * point.z
            let s = pose.pixelsPerMillimetre
            let x = centre.x + s * turned.x + pose.noise * random.gaussian()
            let y = centre.y - s * turned.y + pose.noise * random.gaussian()
            let z = pose.flat ? 0 : s * turned.z + pose.depthNoise * random.gaussian()
            guard !hidden.contains(slot) else { continue }
            landmarks.append(Landmark(name: LandmarkVocabulary.names[slot], x: Float(x), y: Float(y), z: Float(z)))
        }
        return landmarks
    }

    /// Columns of R = Rz(roll) · Rx(pitch) · Ry(yaw). Positive yaw turns the face towards the
    /// subject's left (its left side moves away from the camera).
    public static func rotation(yaw: Double, pitch: Double, roll: Double) -> (SIMD3<Double>, SIMD3<Double>, SIMD3<Double>) {
        let (a, b, c) = (yaw * .pi / 180, pitch * .pi / 180, roll * .pi / 180)
        func multiply(_ m: [[Double]], _ n: [[Double]]) -> [[Double]] {
            (0..<3).map { i in (0..<3).map { j in (0..<3).reduce(0) { $0 + m[i][$1] * n[$1][j] } } }
        }
        let ry = [[cos(a), 0, sin(a)], [0, 1, 0], [-sin(a), 0, cos(a)]]
        let rx = [[1, 0, 0], [0, cos(b), -sin(b)], [0, sin(b), cos(b)]]
        let rz = [[cos(c), -sin(c), 0], [sin(c), cos(c), 0], [0, 0, 1]]
        let r = multiply(rz, multiply(rx, ry))
        return (SIMD3(r[0][0], r[1][0], r[2][0]), SIMD3(r[0][1], r[1][1], r[2][1]), SIMD3(r[0][2], r[1][2], r[2][2]))
    }
}

/// SplitMix64: small, fast, and the same numbers on every platform for a seed.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { self.state = seed }

    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    public mutating func uniform() -> Double { Double(self.next() >> 11) * 0x1p-53 }

    /// A generator for one item of a run: the seed and the item's coordinates mixed, so any item can
    /// be made again from its coordinates alone (the crash loop's templates and delays).
    public static func derived(_ seed: UInt64, _ parts: UInt64...) -> SeededRandom {
        var mixer = SeededRandom(seed: seed)
        for part in parts {
            mixer.state ^= part &* 0xD6E8_FEB8_6659_FD93
            _ = mixer.next()
        }
        return SeededRandom(seed: mixer.next())
    }

    /// Standard normal (Box–Muller; one of the pair is dropped, which keeps the state simple).
    public mutating func gaussian() -> Double {
        let u = max(self.uniform(), 0x1p-53)
        return (-2 * log(u)).squareRoot() * cos(2 * .pi * self.uniform())
    }
}
