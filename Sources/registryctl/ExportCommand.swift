import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl export --output FILE`: a dump of one gallery, or of all, that `import` recreates.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export a gallery (or every gallery) to a file that import recreates it from.",
        discussion: """
            Formats: protobuf (default) writes a dump: the bytes REGDUMP2, then, per gallery, its \
            definition (registries in priority order, thresholds, quality gates, liveness policy and k), \
            its templates in registration order with their data, registration time, source and quality, \
            and its liveness profiles, each a registry.v1.DumpRecord framed by a 4-byte big-endian \
            length, and last a trailer record (the number of records before it and the CRC-32C of every \
            byte before it), by which import refuses a dump cut short or damaged. Exporting what an \
            import of the dump created gives the same bytes. verid writes a \
            Ver-ID JSON array of {"identifier", "version", "data" | "landmarks"} objects: templates \
            only, of one gallery. The file (mode 0600: templates are biometric data) is written under a \
            temporary name and renamed when complete. With --output -, the data goes to standard output \
            and the summary to standard error. A progress bar is drawn on standard error when it is a \
            terminal.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Flag(help: "Export every gallery (in name order) instead of one.")
    var all = false

    @Option(help: "The file format.")
    var format: TemplateFileFormat = .protobuf

    @Option(name: .shortAndLong, help: ArgumentHelp("The file to write (- for standard output).", valueName: "file"), completion: .file())
    var output: String

    func validate() throws {
        if self.all && self.gallery.gallery != nil { throw ValidationError("give either --all or --gallery, not both") }
        if self.all && self.format == .verid {
            throw ValidationError("Ver-ID JSON holds one gallery's templates: export --all needs --format protobuf")
        }
    }

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
        var galleries: [String]
        var format: String
        var output: String
        var templates: Int
        var livenessProfiles: Int

        func text(_ names: AlgorithmNames) -> String {
            let which = self.galleries.count == 1 ? "gallery \(self.galleries[0])" : Format.plural(self.galleries.count, "gallery", "galleries")
            var text = "exported \(Format.plural(self.templates, "template"))"
            if self.livenessProfiles > 0 { text += " and \(Format.plural(self.livenessProfiles, "liveness profile"))" }
            return text + " of \(which) to \(self.output) (\(self.format))"
        }
    }

    func run() async throws {
        try await Runner(self.options, resultsToStandardError: self.output == "-").run { client in
            let all = try await client.galleries()
            // Gallery names by bytes, as the daemon looks them up.
            let selected =
                self.all ? all.sorted { $0.name.identifierPrecedes($1.name) } : all.filter { $0.name.sameIdentifier(as: self.gallery.name) }
            guard !selected.isEmpty || self.all else { throw RegistryError.unknownGallery(self.gallery.name) }
            let progress = ProgressBar(label: "exporting")
            progress.total = selected.reduce(0) { $0 + $1.registries.reduce(0) { $0 + $1.templateCount } }
            let sink = try OutputSink(path: self.output)
            var writer = TemplateStreamWriter(format: self.format, sink: sink)
            var templates = 0
            var profiles = 0
            do {
                try writer.begin()
                for gallery in selected {
                    try writer.beginGallery(GalleryConfiguration(gallery))
                    let pageSize = Self.pageSize(for: gallery)
                    var after: UInt64 = 0
                    while true {
                        let page = try await client.export(gallery: gallery.name, after: after, limit: pageSize)
                        try writer.append(page.templates)
                        templates += page.templates.count
                        progress.update(templates)
                        guard let next = page.next else { break }
                        after = next
                    }
                    guard self.format == .protobuf else { continue }
                    var afterIdentifier: String?
                    repeat {
                        let page = try await client.exportLivenessProfiles(gallery: gallery.name, after: afterIdentifier)
                        try writer.append(profiles: page.profiles)
                        profiles += page.profiles.count
                        afterIdentifier = page.next
                    } while afterIdentifier != nil
                }
                try writer.end()
                try sink.commit()
            } catch {
                progress.finish()
                throw error
            }
            progress.finish()
            return Result(
                galleries: selected.map(\.name), format: self.format.rawValue, output: self.output, templates: templates,
                livenessProfiles: profiles)
        }
    }
}
