import ArgumentParser

/// `registryctl profile show|reset|enrol`: identifiers' liveness profiles (DESIGN §9).
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
