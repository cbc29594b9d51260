import SyntheticFaces

/// One row of the evaluation: how the query captures are taken (enrolment is always frontal, at
/// 1.5 px/mm, 1 px noise).
struct Condition: Sendable {
    var name: String
    var pose: SyntheticFaces.Pose
    /// Whether the targets apply (3-D landmarks, poses up to 20° yaw and 15° pitch).
    var targeted: Bool

    /// The published conditions, in table order. Yaw turns alternate left and right from person to
    /// person (`Evaluate` flips the sign), so both ears are hidden equally often.
    static let all: [Condition] = [
        Condition(name: "same conditions", pose: .frontal, targeted: true),
        Condition(name: "further away (1.0 px/mm)", pose: .init(pixelsPerMillimetre: 1.0), targeted: true),
        Condition(name: "closer (2.25 px/mm)", pose: .init(pixelsPerMillimetre: 2.25), targeted: true),
        Condition(name: "head turned 5°", pose: .init(yaw: 5), targeted: true),
        Condition(name: "head turned 10°", pose: .init(yaw: 10), targeted: true),
        Condition(name: "head turned 15°", pose: .init(yaw: 15), targeted: true),
        Condition(name: "head turned 20°", pose: .init(yaw: 20), targeted: true),
        Condition(name: "head nodded 10°", pose: .init(pitch: 10), targeted: true),
        Condition(name: "head nodded 15°", pose: .init(pitch: 15), targeted: true),
        Condition(name: "head tilted 15° (roll)", pose: .init(roll: 15), targeted: true),
        Condition(name: "turned 15° and nodded 10°", pose: .init(yaw: 15, pitch: 10), targeted: true),
        Condition(name: "6 landmarks missing", pose: .init(missing: 6), targeted: true),
        Condition(name: "noisy depth (z σ 4 px)", pose: .init(depthNoise: 4), targeted: false),
        Condition(name: "2-D landmarks (z = 0), frontal", pose: .init(flat: true), targeted: false),
        Condition(name: "2-D landmarks, turned 5°", pose: .init(yaw: 5, flat: true), targeted: false),
        Condition(name: "2-D landmarks, turned 10°", pose: .init(yaw: 10, flat: true), targeted: false),
    ]
}
