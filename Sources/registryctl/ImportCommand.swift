import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl import FILE`: recreates what an export holds (without the register checks).
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import an export file: a dump (galleries, templates, liveness profiles) or templates (Ver-ID JSON).",
        discussion: """
            The whole file is read and checked first: a malformed file (exit 65) imports nothing. A \
            dump (registryctl export's protobuf format) recreates each gallery in it (--gallery: only \
            that one): a gallery the daemon lacks is defined as the dump says, and so is the default \
            gallery while it holds no template and still has the built-in definition (a fresh \
            daemon's); any other gallery the daemon has keeps its own definition, and the summary says \
            when it differs from the dump's (--redefine: define those that hold no template as the dump \
            says; one that holds templates always keeps its definition, which they were checked under). \
            Its templates keep their registration time, source and quality; its liveness profiles follow \
            them. A dump ends with a trailer, whose record count and CRC-32C must match what precedes \
            it: one cut short, damaged or with records after its trailer is malformed. A REGDUMP1 dump \
            (written before dumps had a trailer) is imported with a warning on standard error that it \
            cannot be checked for being complete. A Ver-ID JSON file (templates only) goes into --gallery, with time now and source \
            imported; so does an export file of bare StoredTemplate frames. Templates are sent in \
            chunks of 1000 (fewer for very large templates, to keep each request under 3 MiB), each \
            stored all or none and without the register checks. When a chunk is refused, the chunks \
            before it stay imported and the error names the item and says how many templates were \
            imported. A template its identifier already holds in its registry (or that the file \
            repeats), and a liveness profile equal to the stored one, are skipped and counted, so \
            importing a file twice changes nothing; --duplicates stores them again. Without --format, a \
            file whose first character is '[' is Ver-ID JSON, anything else protobuf. A progress bar is \
            drawn on standard error when it is a terminal.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: ArgumentHelp("The file to read (- for standard input).", valueName: "file"), completion: .file())
    var file: String

    @Option(help: "The file format (default: guessed from the first byte).")
    var format: TemplateFileFormat?

    @Flag(help: "Store templates again that their identifier already holds (by default they are skipped).")
    var duplicates = false

    @Flag(help: .hidden)
    var skipExisting = false

    @Flag(
        help:
            "Define existing galleries that hold no template as the dump does (by default only galleries the daemon lacks, and its untouched default gallery)."
    )
    var redefine = false

    func validate() throws {
        if self.duplicates && self.skipExisting { throw ValidationError("--duplicates and --skip-existing contradict each other") }
    }

    /// Templates per import request, at most.
    static let chunkSize = 1000
    /// Estimated bytes per import request, at most, to stay well inside the daemon's 4 MiB frame
    /// limit with large configured vector algorithms.
    static let chunkBytes = 3 << 20

    /// Splits items into requests of at most ``chunkSize`` items and about ``chunkBytes`` bytes.
    static func chunks(_ items: [ImportItem], size: Int = chunkSize, bytes: Int = chunkBytes) -> [ArraySlice<ImportItem>] {
        var chunks: [ArraySlice<ImportItem>] = []
        var start = 0
        var estimate = 0
        for (index, item) in items.enumerated() {
            let dataBytes =
                switch item.template.data {
                case .vector(let values): 4 * values.count + 8
                case .landmarks(let landmarks): landmarks.reduce(0) { $0 + $1.name.utf8.count + 24 }
                }
            let itemBytes = item.identifier.utf8.count + 16 + dataBytes
            if index > start, index - start == size || estimate + itemBytes > bytes {
                chunks.append(items[start..<index])
                start = index
                estimate = 0
            }
            estimate += itemBytes
        }
        if start < items.count { chunks.append(items[start...]) }
        return chunks
    }

    /// The daemon names a refused item by its position in the request ("import item 3 ('bob'): …");
    /// requests are chunks of the file, so the position becomes the item's in the file.
    static func fileRelative(_ message: String, offset: Int, file: String) -> String {
        let prefix = "import item "
        guard message.hasPrefix(prefix) else { return message }
        let rest = message.dropFirst(prefix.count)
        let digits = rest.prefix { $0.isNumber }
        guard let index = Int(digits) else { return message }
        return "\(file): item \(index + offset)" + rest.dropFirst(digits.count)
    }

    /// Liveness profiles per import request, at most (about 200 bytes each).
    static let profileChunkSize = 1000

    struct Result: CommandResult {
        var galleries: [String]
        var file: String
        var format: String
        var imported: Int
        var skipped: Int
        var firstTemplateId: UInt64?
        var lastTemplateId: UInt64?
        var livenessProfiles = 0
        var livenessProfilesSkipped = 0
        /// Galleries defined from the dump.
        var defined: [String] = []
        /// Galleries that hold templates and were kept although the dump defines them differently.
        var keptDefinitions: [String] = []
        /// Galleries without templates whose own definition was kept (no --redefine).
        var keptEmptyDefinitions: [String] = []

        func text(_ names: AlgorithmNames) -> String {
            let which = self.galleries.count == 1 ? "gallery \(self.galleries[0])" : "galleries \(self.galleries.joined(separator: ", "))"
            var text = "imported \(Format.plural(self.imported, "template")) into \(which)"
            if let first = self.firstTemplateId, let last = self.lastTemplateId, self.imported > 0 { text += " (template ids \(first)-\(last))" }
            if self.skipped > 0 { text += "; \(self.skipped) already stored, skipped" }
            if self.livenessProfiles + self.livenessProfilesSkipped > 0 {
                text += "; \(Format.plural(self.livenessProfiles, "liveness profile")) stored"
                if self.livenessProfilesSkipped > 0 { text += ", \(self.livenessProfilesSkipped) already stored, skipped" }
            }
            if !self.defined.isEmpty { text += "\ndefined \(self.defined.joined(separator: ", ")) as the file does" }
            for name in self.keptDefinitions {
                text += "\ngallery \(name) holds templates and is defined differently from the file: its definition is kept"
            }
            for name in self.keptEmptyDefinitions {
                text += "\ngallery \(name) is defined differently from the file: its definition is kept (--redefine to define it as the file does)"
            }
            return text
        }
    }

    func run() async throws {
        let runner = Runner(self.options)
        let bytes = try runner.prepare { try FileIO.read(self.file) }
        let format = self.format ?? TemplateFileFormat.guess(bytes)
        let (sections, plainItems) = try self.contents(bytes, format: format, runner: runner)
        let skipExisting = !self.duplicates
        try await runner.run { client in
            var result = Result(galleries: [], file: self.file, format: format.rawValue, imported: 0, skipped: 0)
            let total = sections.reduce(0) { $0 + ($1?.items.count ?? plainItems.count) }
            let progress = ProgressBar(label: "importing", total: total)
            defer { progress.finish() }
            var done = 0
            for section in sections {
                let gallery = section?.gallery.name ?? self.gallery.name
                result.galleries.append(gallery)
                if let section { try await Self.prepareGallery(section.gallery, client: client, redefine: self.redefine, result: &result) }
                let items = section?.items ?? plainItems
                var ids: [UInt64] = []
                for chunk in Self.chunks(items) {
                    do {
                        let outcome = try await client.importTemplates(gallery: gallery, Array(chunk), skipExisting: skipExisting)
                        ids += outcome.templateIds
                        result.skipped += outcome.skipped
                        result.imported += outcome.templateIds.count - outcome.skipped
                    } catch let error as RegistryError {
                        var message = Self.fileRelative(error.message, offset: done + chunk.startIndex, file: self.file)
                        if result.imported + result.skipped > 0 {
                            message += " (import stopped: the first \(result.imported + result.skipped) of \(total) templates were imported)"
                        }
                        throw RegistryError(error.code, message, details: error.details)
                    } catch RegistryClientError.connectionClosed {
                        // The chunk in flight may have been carried out before the connection went:
                        // say what is known, and how to finish.
                        let known = result.imported + result.skipped
                        let again =
                            skipExisting
                            ? "run the same import again: templates already there are skipped"
                            : "with --duplicates, importing again would store them twice: check with 'registryctl identifiers' first"
                        throw CommandFailure(
                            code: .connectionClosed,
                            message: "the connection to registryd closed before the response arrived; the first \(known) of \(total) "
                                + "templates were imported, the next \(chunk.count) may or may not have been (\(again))",
                            status: .unreachable)
                    }
                    progress.update(done + ids.count)
                }
                done += items.count
                result.firstTemplateId = result.firstTemplateId ?? ids.first
                result.lastTemplateId = ids.last ?? result.lastTemplateId
                let profiles = section?.profiles ?? []
                for start in stride(from: 0, to: profiles.count, by: Self.profileChunkSize) {
                    let chunk = Array(profiles[start..<min(profiles.count, start + Self.profileChunkSize)])
                    let outcome = try await client.importTemplates(gallery: gallery, [], skipExisting: skipExisting, profiles: chunk)
                    result.livenessProfiles += outcome.profilesStored
                    result.livenessProfilesSkipped += outcome.profilesSkipped
                }
            }
            return result
        }
    }

    /// What the file holds: a dump's sections (those of --gallery only, if given), or one nil section
    /// for the templates of a file without galleries, which go into --gallery.
    func contents(_ bytes: [UInt8], format: TemplateFileFormat, runner: Runner) throws -> (sections: [DumpSection?], items: [ImportItem]) {
        guard format == .protobuf && DumpFile.isDump(bytes) else {
            return ([nil], try runner.prepare { try TemplateStreamReader.items(from: bytes, format: format, file: self.file) })
        }
        let all = try runner.prepare { try DumpFile.sections(from: bytes, file: self.file) }
        if DumpFile.isUnchecked(bytes) { printError(Self.uncheckedWarning(self.file)) }
        guard let name = self.gallery.gallery else { return (all, []) }
        let selected = all.filter { $0.gallery.name.sameIdentifier(as: name) }  // by bytes, as the daemon
        guard !selected.isEmpty else {
            let holds = all.map(\.gallery.name).joined(separator: ", ")
            throw runner.fail(RegistryError.malformedRequest("\(self.file) holds no gallery '\(name)' (it holds \(holds))"), names: .builtIn)
        }
        return (selected, [])
    }

    /// What import says of a REGDUMP1 dump, which has no trailer: a copy of it cut at a record
    /// boundary reads as a smaller dump, so nothing tells a complete one from one cut short.
    static func uncheckedWarning(_ file: String) -> String {
        "registryctl: warning: \(file) is a REGDUMP1 dump, written before dumps ended with a trailer: it cannot be checked "
            + "for being complete (one cut short at a record boundary imports as a smaller dump)"
    }

    /// A dump's gallery in the daemon: defined as the dump says when the daemon lacks it, or when it
    /// is the default gallery as a fresh daemon has it (no template, the built-in definition). Any
    /// other existing gallery keeps its definition, which an operator made (and which the thresholds
    /// its templates were checked under depend on): import does not quietly change it. `redefine`
    /// replaces the definitions of galleries that hold no template.
    static func prepareGallery(
        _ definition: GalleryConfiguration, client: RegistryConnection, redefine: Bool, result: inout Result
    ) async throws {
        let existing = try await client.galleries().first { $0.name.sameIdentifier(as: definition.name) }
        if let existing {
            let current = GalleryConfiguration(existing)
            if current == definition { return }
            if existing.registries.contains(where: { $0.templateCount > 0 }) {
                result.keptDefinitions.append(definition.name)
                return
            }
            if !redefine && !Self.isUntouchedDefault(existing) {
                result.keptEmptyDefinitions.append(definition.name)
                return
            }
        }
        try await client.defineGallery(definition)
        result.defined.append(definition.name)
    }

    /// Whether `gallery` is the default gallery as a daemon without a configured one has it: the
    /// built-in registries, each at its algorithm's default thresholds, no gates, no liveness.
    static func isUntouchedDefault(_ gallery: GalleryInfo) -> Bool {
        let builtIn = GalleryConfiguration.defaultGallery
        return gallery.name == builtIn.name && gallery.registries.map(\.algorithm.version) == builtIn.registries.map(\.algorithm)
            && gallery.registries.allSatisfy { registry in
                registry.thresholds == Thresholds(defaultsFor: registry.algorithm) && registry.minimumQuality == nil
                    && registry.minimumAutoEnrolmentQuality == nil
            } && gallery.liveness == builtIn.liveness && gallery.livenessK == builtIn.livenessK
    }
}
