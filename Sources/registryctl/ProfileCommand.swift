import ArgumentParser
import RegistryModel

/// `registryctl profile show|reset|enrol`: identifiers' liveness profiles (README, capture gates).
struct ProfileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile",
        abstract: "Show, reset or enrol an identifier's liveness profile (personalised liveness thresholds).",
        discussion: """
            A liveness profile holds, per depth statistic, the range mean ± k·std over depth frames \
            captured over the enrolment poses (center, left, right, up, down, closer, further), and \
            the realistic depth range from the closer and further poses. Authentication uses it \
            instead of the fixed thresholds, falling back to the fixed ones when the personalised \
            ones are not met. A profile is erased with its identifier.
            """,
        subcommands: [ProfileShowCommand.self, ProfileResetCommand.self, ProfileEnrolCommand.self])
}

/// A liveness profile as printed by `profile show` and `profile enrol` (the heading differs).
struct ProfileResult: CommandResult {
    var gallery: String
    var identifier: String
    var profile: LivenessProfile
    private var heading: String

    private enum CodingKeys: String, CodingKey { case gallery, identifier, profile }

    init(gallery: String, identifier: String, profile: LivenessProfile, heading: String) {
        self.gallery = gallery
        self.identifier = identifier
        self.heading = heading
        self.profile = profile
    }

    func text(_ names: AlgorithmNames) -> String {
        self.profile.lines(heading: self.heading).joined(separator: "\n")
    }
}
