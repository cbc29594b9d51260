import ArgumentParser
import RegistryClient
import RegistryCtlInput
import RegistryModel

/// `registryctl import FILE`: stores exported templates (without the register checks).
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import templates from an export file (protobuf stream or Ver-ID JSON).",
        discussion: """
            The whole file is read and checked first: a malformed file (exit 65) imports nothing. \
            Templates are then sent in chunks of 1000 (fewer for very large templates, to keep each \
            request under 3 MiB), each stored all or none and without the \
            register checks; a protobuf stream (registryctl export's) keeps each template's registration \
            time, source and quality, Ver-ID JSON gets now and source imported. When a chunk is refused, \
            the chunks before it stay imported and the error names the item and says how many templates \
            were imported. With --skip-existing, a template its identifier already holds in its registry \
            (or that the file repeats) is skipped, so importing an export twice stores it once. Without \
            --format, a file whose \
            first character is '[' is Ver-ID JSON, anything else a protobuf stream. A progress bar is \
            drawn on standard error when it is a terminal.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: ArgumentHelp("The file to read (- for standard input).", valueName: "file"))
    var file: String

    @Option(help: "The file format (default: guessed from the first byte).")
    var format: TemplateFileFormat?

    @Flag(help: "Skip templates already stored for their identifier (the same template in the same registry).")
    var skipExisting = false

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

    struct Result: CommandResult {
        var gallery: String
        var file: String
        var format: String
        var imported: Int
        var skipped: Int
        var firstTemplateId: UInt64?
        var lastTemplateId: UInt64?

        func text(_ names: AlgorithmNames) -> String {
            var text = "imported \(Format.plural(self.imported, "template")) into gallery \(self.gallery)"
            if let first = self.firstTemplateId, let last = self.lastTemplateId { text += " (template ids \(first)-\(last))" }
            if self.skipped > 0 { text += "; \(self.skipped) already stored, skipped" }
            return text
        }
    }

    func run() async throws {
        let runner = Runner(self.options)
        let bytes = try runner.prepare { try FileIO.read(self.file) }
        let format = self.format ?? TemplateFileFormat.guess(bytes)
        let items = try runner.prepare { try TemplateStreamReader.items(from: bytes, format: format, file: self.file) }
        let gallery = self.gallery.name
        try await runner.run { client in
            let progress = ProgressBar(label: "importing", total: items.count)
            var ids: [UInt64] = []
            ids.reserveCapacity(items.count)
            var skipped = 0
            defer { progress.finish() }
            for chunk in Self.chunks(items) {
                do {
                    let outcome = try await client.importTemplates(gallery: gallery, Array(chunk), skipExisting: self.skipExisting)
                    ids += outcome.templateIds
                    skipped += outcome.skipped
                } catch let error as RegistryError {
                    var message = Self.fileRelative(error.message, offset: chunk.startIndex, file: self.file)
                    if !ids.isEmpty { message += " (import stopped: the first \(ids.count) of \(items.count) templates were imported)" }
                    throw RegistryError(error.code, message, details: error.details)
                }
                progress.update(ids.count)
            }
            return Result(
                gallery: gallery, file: self.file, format: format.rawValue, imported: ids.count - skipped, skipped: skipped,
                firstTemplateId: ids.first, lastTemplateId: ids.last)
        }
    }
}
