import FoundationEssentials
import Glibc
import TestSupport
import Testing

/// `registryctl delete gallery` erases many people at once: through a real daemon, it refuses
/// without `--yes` off a terminal, asks for the gallery's name on one (a pseudo-terminal from
/// `script`), reports with `--dry-run` what it would erase, and exits 2 when there is nothing to
/// delete, as the other deletes do. After every refusal the gallery is whole.
@Suite struct ErasureGuardTests {
    /// Three people on their own axes (no similar faces) in gallery `visitors`.
    static func visitors(_ ctl: Registryctl, in directory: String) throws {
        #expect(try ctl.run(["gallery", "define", "visitors", "--registry", "arcface"]).status == 0)
        for index in 0..<3 {
            var values = [Float](repeating: 0, count: 128)
            values[index] = 1
            let path = directory + "/visitor-\(index).json"
            let text = #"{"version": 24, "data": ["# + values.map { "\($0)" }.joined(separator: ", ") + "]}"
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            let (status, output) = try ctl.run(["register", "visitor-\(index)", path, "--gallery", "visitors"])
            #expect(status == 0, "\(output)")
        }
    }

    static func visitorsHeld(_ ctl: Registryctl) throws -> Int? {
        try ctl.json(GalleriesDocument.self, ["galleries"]).galleries.first { $0.name == "visitors" }?.identifiers
    }

    /// Runs registryctl on a pseudo-terminal (`script`), `answer` typed on it.
    static func onTerminal(_ ctl: Registryctl, _ arguments: [String], answer: String) throws -> (status: Int32, output: String) {
        let command = ([ctl.binary] + arguments + ["--socket", ctl.daemon.socketPath]).map { "'\($0)'" }.joined(separator: " ")
        return try run(["/bin/sh", "-c", "printf '%s\\n' '\(answer)' | script -qec \"\(command)\" /dev/null"], log: ctl.output)
    }

    @Test func deletingAGalleryIsConfirmedOrRefusedAndADryRunErasesNothing() async throws {
        let daemon = try Daemon()
        let ctl = try Registryctl(daemon)
        try Self.visitors(ctl, in: daemon.directory)

        // Not on a terminal (the tests' standard input is not one), without --yes: refused before
        // anything is asked of the daemon.
        let refused = try ctl.json(ErrorDocument.self, ["delete", "gallery", "visitors"], exit: 64)
        #expect(refused.error.code == "CONFIRMATION_REQUIRED")
        #expect(try Self.visitorsHeld(ctl) == 3)

        let plan = try ctl.json(DeletionDocument.self, ["delete", "gallery", "visitors", "--dry-run"])
        #expect(plan.dryRun && plan.templatesDeleted == 3 && plan.identifiers == 3)
        #expect(try Self.visitorsHeld(ctl) == 3)

        // On a terminal: the wrong answer deletes nothing (exit 3); the gallery's name deletes it.
        let declined = try Self.onTerminal(ctl, ["delete", "gallery", "visitors"], answer: "yes")
        #expect(declined.status == 3 && declined.output.contains("NOT_CONFIRMED"), "\(declined.output)")
        #expect(declined.output.contains("3 templates of 3 identifiers"), "the question says what is erased: \(declined.output)")
        #expect(try Self.visitorsHeld(ctl) == 3)
        let confirmed = try Self.onTerminal(ctl, ["delete", "gallery", "visitors"], answer: "visitors")
        #expect(confirmed.status == 0 && confirmed.output.contains("deleted gallery visitors"), "\(confirmed.output)")
        #expect(try Self.visitorsHeld(ctl) == nil)

        // Nothing left to delete: 2, as for an identifier or a template that is not there.
        #expect(try ctl.json(ErrorDocument.self, ["delete", "gallery", "visitors", "--yes"], exit: 2).error.code == "UNKNOWN_GALLERY")
        #expect(try ctl.json(ErrorDocument.self, ["delete", "gallery", "visitors", "--dry-run"], exit: 2).error.code == "UNKNOWN_GALLERY")
        #expect(try ctl.json(ErrorDocument.self, ["delete", "identifier", "nobody"], exit: 2).error.code == "IDENTIFIER_NOT_REGISTERED")
        #expect(try ctl.json(ErrorDocument.self, ["delete", "template", "99"], exit: 2).error.code == "TEMPLATE_NOT_FOUND")

        // For scripts: --yes deletes without asking.
        try Self.visitors(ctl, in: daemon.directory)
        let deleted = try ctl.json(DeletionDocument.self, ["delete", "gallery", "visitors", "--yes"])
        #expect(!deleted.dryRun && deleted.templatesDeleted == 3)
        #expect(try Self.visitorsHeld(ctl) == nil)

        // The default gallery cannot be deleted, and a dry run says so rather than promising it.
        #expect(try ctl.run(["delete", "gallery", "default", "--dry-run"]).status == 3)
    }
}

private struct GalleriesDocument: Decodable {
    struct Gallery: Decodable {
        var name: String
        var identifiers: Int
    }
    var galleries: [Gallery]
}

private struct DeletionDocument: Decodable {
    var dryRun: Bool
    var templatesDeleted: Int
    var identifiers: Int
}

private struct ErrorDocument: Decodable {
    struct Body: Decodable {
        var code: String
    }
    var error: Body
}
