import ArgumentParser
import Glibc
import RegistryClient
import RegistryModel

/// `registryctl delete gallery NAME`: removes a gallery and all its templates, behind a guard: it
/// erases many people at once and cannot be undone, so it asks on a terminal, needs `--yes` anywhere
/// else, and `--dry-run` says what it would erase.
struct DeleteGalleryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gallery",
        abstract: "Delete a gallery with all its templates (the default gallery cannot be deleted).",
        discussion: """
            Every template and liveness profile of the gallery is erased, for good. On a terminal \
            registryctl first says how many templates of how many identifiers that is and asks for \
            the gallery's name; elsewhere (a script, a pipe) it refuses without --yes (exit 64, \
            CONFIRMATION_REQUIRED). An answer other than the name deletes nothing (exit 3, \
            NOT_CONFIRMED). --dry-run reports what would be erased and erases nothing. A gallery \
            that does not exist exits 2 (UNKNOWN_GALLERY), as every delete that finds nothing.
            """)

    @OptionGroup var options: GlobalOptions

    @Argument(help: "The gallery's name.", completion: GalleryCompletion.kind)
    var name: String

    @Flag(name: .long, help: "Delete without asking (for scripts; without it registryctl asks on a terminal and refuses elsewhere).")
    var yes = false

    @Flag(name: .customLong("dry-run"), help: "Report what would be erased; erase nothing.")
    var dryRun = false

    /// What the deletion erases (or erased): from the gallery's listing just before.
    struct Result: CommandResult {
        var gallery: String
        var dryRun: Bool
        /// Templates erased; with `--dry-run`, those the gallery holds now.
        var templatesDeleted: Int
        /// Distinct identifiers in the gallery before (any registry).
        var identifiers: Int

        func text(_ names: AlgorithmNames) -> String {
            let what = "\(Format.plural(self.templatesDeleted, "template")) of \(Format.plural(self.identifiers, "identifier"))"
            return self.dryRun
                ? "would delete gallery \(self.gallery): \(what); nothing was deleted (--dry-run)"
                : "deleted gallery \(self.gallery): \(what)"
        }
    }

    func validate() throws {
        if self.yes && self.dryRun { throw ValidationError("--yes and --dry-run exclude each other") }
    }

    func run() async throws {
        let runner = Runner(self.options)
        let terminal = isatty(STDIN_FILENO) == 1 && isatty(STDERR_FILENO) == 1
        if !self.yes && !self.dryRun && !terminal {
            // Refused before connecting: nothing is asked of the daemon that a script did not confirm.
            throw runner.fail(
                CommandFailure(
                    code: .confirmationRequired,
                    message:
                        "delete gallery erases every template of '\(self.name)' for good; pass --yes to confirm it without a terminal, or --dry-run to see what it would erase (nothing was deleted)",
                    status: .usage),
                names: .builtIn)
        }
        try await runner.run { client in
            guard let gallery = try await client.galleries().first(where: { $0.name == self.name }) else {
                throw NothingToDelete(RegistryError(.unknownGallery, "gallery '\(self.name)' does not exist"))
            }
            let templates = gallery.registries.reduce(0) { $0 + $1.templateCount }
            if self.name == GalleryConfiguration.defaultName {
                // The daemon refuses it whatever is asked; a dry run must not promise otherwise.
                throw RegistryError(.malformedRequest, "the default gallery always exists and cannot be deleted")
            }
            if self.dryRun {
                return Result(gallery: self.name, dryRun: true, templatesDeleted: templates, identifiers: gallery.identifierCount)
            }
            if !self.yes { try Self.confirm(gallery: self.name, templates: templates, identifiers: gallery.identifierCount) }
            do {
                let deleted = try await client.deleteGallery(self.name)
                return Result(gallery: self.name, dryRun: false, templatesDeleted: deleted, identifiers: gallery.identifierCount)
            } catch let error as RegistryError where error.code == .unknownGallery {
                throw NothingToDelete(error)  // deleted by someone else meanwhile
            }
        }
    }

    /// Asks on the terminal; throws `NOT_CONFIRMED` unless the answer is the gallery's name.
    static func confirm(gallery: String, templates: Int, identifiers: Int) throws {
        let what = "\(Format.plural(templates, "template")) of \(Format.plural(identifiers, "identifier"))"
        printError("Deleting gallery \(Format.quoted(gallery)) erases \(what), with their liveness profiles, for good.")
        writeStandardError("Type the gallery's name to delete it: ")
        let answer = readLine(strippingNewline: true)
        guard answer == gallery else {
            throw CommandFailure(code: .notConfirmed, message: "the answer was not the gallery's name; nothing was deleted", status: .refused)
        }
    }
}

/// A daemon's refusal that means a delete found nothing to delete (`UNKNOWN_GALLERY` for `delete
/// gallery`): reported with the daemon's code, exiting 2 as every delete that finds nothing does.
struct NothingToDelete: Error {
    let error: RegistryError

    init(_ error: RegistryError) { self.error = error }
}
