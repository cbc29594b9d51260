import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl export --output FILE`: all of a gallery's templates with their data.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export a gallery's templates with their data to a file.",
        discussion: """
            Formats: protobuf (default) writes each template as a registry.v1.StoredTemplate message \
            framed by a 4-byte big-endian length; verid writes a Ver-ID JSON array of \
            {"identifier", "version", "data" | "landmarks"} objects. The file (mode 0600: templates are \
            biometric data) is written under a temporary name and renamed when complete. With \
            --output -, the data goes to standard output and the summary to standard error. A \
            progress bar is drawn on standard error when it is a terminal.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Option(help: "The file format.")
    var format: TemplateFileFormat = .protobuf

    @Option(name: .shortAndLong, help: ArgumentHelp("The file to write (- for standard output).", valueName: "file"))
    var output: String

    /// Templates per export request, at most.
    static let pageSize = 1000
    /// Bytes of template data per export response, at most, to stay well inside the client's 4 MiB
    /// frame limit with large configured vector algorithms.
    static let pageBytes = 3 << 20

    /// The page size for a gallery: 1000 templates, fewer when its largest templates would make a
    /// response frame of more than ``pageBytes``.
    static func pageSize(for gallery: GalleryInfo?) -> Int {
        let largest =
            gallery?.registries.map { registry in
                switch registry.algorithm.kind {
                case .vector(let dimension): 4 * dimension + 300
                case .landmarks: LandmarkVocabulary.count * 40 + 300
                }
            }.max() ?? 0
        guard largest > 0 else { return Self.pageSize }
        return max(1, min(Self.pageSize, Self.pageBytes / largest))
    }

    struct Result: CommandResult {
        var gallery: String
        var format: String
        var output: String
        var templates: Int

        func text(_ names: AlgorithmNames) -> String {
            "exported \(Format.plural(self.templates, "template")) of gallery \(self.gallery) to \(self.output) (\(self.format))"
        }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options, resultsToStandardError: self.output == "-").run { client in
            // The gallery's registries give the page size and the progress bar's total; a missing
            // gallery is reported by the export itself.
            let info = try? await client.galleries().first(where: { $0.name == gallery })
            let pageSize = Self.pageSize(for: info)
            let progress = ProgressBar(label: "exporting")
            progress.total = info?.registries.reduce(0) { $0 + $1.templateCount }
            let sink = try OutputSink(path: self.output)
            var writer = TemplateStreamWriter(format: self.format, sink: sink)
            var count = 0
            do {
                try writer.begin()
                var after: UInt64 = 0
                while true {
                    let page = try await client.export(gallery: gallery, after: after, limit: pageSize)
                    try writer.append(page.templates)
                    count += page.templates.count
                    progress.update(count)
                    guard let next = page.next else { break }
                    after = next
                }
                try writer.end()
                try sink.commit()
            } catch {
                progress.finish()
                throw error
            }
            progress.finish()
            return Result(gallery: gallery, format: self.format.rawValue, output: self.output, templates: count)
        }
    }
}
