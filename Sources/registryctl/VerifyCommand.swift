import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl verify`: the daemon re-reads every template and checks it against its index.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every stored template against the daemon's in-memory index.",
        discussion: "Exits 3 when problems are found.")

    @OptionGroup var options: GlobalOptions

    struct Result: CommandResult {
        var templatesChecked: Int
        var problems: [String]

        var exitStatus: ExitStatus { self.problems.isEmpty ? .success : .refused }

        func text(_ names: AlgorithmNames) -> String {
            let summary = "checked \(Format.plural(self.templatesChecked, "template")): "
            guard !self.problems.isEmpty else { return summary + "no problems" }
            return ([summary + Format.plural(self.problems.count, "problem")] + self.problems.map { "  " + $0 })
                .joined(separator: "\n")
        }
    }

    func run() async throws {
        try await Runner(self.options).run { client in
            let (checked, problems) = try await client.verify()
            return Result(templatesChecked: checked, problems: problems)
        }
    }
}
