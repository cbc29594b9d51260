import RegistryModel
import SyntheticFaces

/// A face-like depth surface 0.45 m away: an ellipsoid bulging toward the camera with a nose ridge,
/// shifted a little per frame (a live face moves), with deterministic noise: passes the liveness
/// checks, and the enrolment of a profile with one `distance` per pose.
public func liveFrames(count: Int = 4, distance: Float = 0.45, seed: UInt64 = 1) -> [DepthFrame] {
    var random = SeededRandom(seed: seed)
    func noise() -> Float {
        (Float(random.uniform()) - 0.5) * 0.002
    }
    return (0..<count).map { index in
        let shift = Float(index) * 0.15
        var depths: [Float] = []
        for row in 0..<10 {
            for column in 0..<10 {
                let x = (Float(column) - 4.5 + shift) / 5
                let y = (Float(row) - 4.5) / 5
                let bulge = max(0, 1 - x * x - y * y).squareRoot() * 0.15
                let nose = abs(x) < 0.15 && abs(y) < 0.4 ? Float(0.02) : 0
                depths.append(distance - bulge - nose + noise())
            }
        }
        return DepthFrame(depths: depths, timestampMillis: Int64(index) * 600)
    }
}

/// Enrolment frames for every pose (closer nearer, further farther), as a liveness profile needs.
public func enrolmentFrames(seed: UInt64 = 1) -> [EnrolmentPose: [DepthFrame]] {
    var poses: [EnrolmentPose: [DepthFrame]] = [:]
    for (index, pose) in EnrolmentPose.allCases.enumerated() {
        let distance: Float = pose == .closer ? 0.35 : pose == .further ? 0.6 : 0.45
        poses[pose] = liveFrames(count: 5, distance: distance, seed: seed &+ UInt64(index))
    }
    return poses
}
