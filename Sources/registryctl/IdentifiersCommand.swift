import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl identifiers`: a gallery's identifiers, one page or all of them.
struct IdentifiersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identifiers",
        abstract: "List a gallery's identifiers (in byte order), one page or all pages.",
        discussion: """
            Prints one identifier per line. When more follow, a hint with the --after value for the \
            next page goes to standard error (with --json: "next" in the document). Identifiers are \
            their bytes: canonically equivalent spellings (é as one code point, or e and a combining \
            accent) are different people, listed apart, and look alike on a terminal.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Option(help: ArgumentHelp("Start after this identifier (exclusive).", valueName: "identifier"))
    var after: String?

    @Option(help: "Identifiers per page, 1-10000.")
    var limit: Int = 100

    @Flag(help: "Fetch every page, not just one.")
    var all = false

    func validate() throws {
        guard (1...10_000).contains(self.limit) else { throw ValidationError("--limit must be within 1...10000") }
    }

    struct Result: CommandResult {
        var gallery: String
        var identifiers: [String]
        /// The `--after` value for the next page; absent on the last page.
        var next: String?

        func text(_ names: AlgorithmNames) -> String {
            self.identifiers.joined(separator: "\n")
        }

        var notice: String? {
            self.next.map { "registryctl: more identifiers follow: --after \(Self.shellQuoted($0))" }
        }

        static func shellQuoted(_ text: String) -> String {
            "'" + text.replacing("'", with: #"'\''"#) + "'"
        }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            var page = try await client.identifiers(gallery: gallery, after: self.after, limit: self.limit)
            var identifiers = page.identifiers
            while self.all, let next = page.next {
                page = try await client.identifiers(gallery: gallery, after: next, limit: self.limit)
                identifiers += page.identifiers
            }
            return Result(gallery: gallery, identifiers: identifiers, next: page.next)
        }
    }
}
