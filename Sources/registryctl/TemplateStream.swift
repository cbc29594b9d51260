import RegistryClient
import RegistryCtlInput
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

/// Writes an export in one of the ``TemplateFileFormat``s:
///
/// - `protobuf`: a dump (``DumpFile``): `REGDUMP2`, then per gallery its definition, its templates
///   with their data, time, source and quality (no id: ids belong to a store), and its liveness
///   profiles, each a `registry.v1.DumpRecord` framed as on the wire:
///   ```
///   +--------+--------+--------+--------+-----------------------------------+
///   |   N: u32, big-endian              | N bytes: one DumpRecord            |
///   +--------+--------+--------+--------+-----------------------------------+
///   ```
///   and last a trailer record: the number of records before it and the CRC-32C of every byte
///   before its frame, by which import tells a complete dump from one cut short.
/// - `verid`: a JSON array of `{"identifier": ..., "version": N, "data": [...]}` (vectors) and
///   `{"identifier": ..., "version": 1000, "landmarks": [{"name", "x", "y", "z"}]}` (landmarks):
///   templates only (Ver-ID's own format has no place for a gallery's definition or profiles).
struct TemplateStreamWriter {
    let format: TemplateFileFormat
    let sink: OutputSink
    private var written = 0
    /// The dump's record count and checksum so far (protobuf).
    private var dump = DumpFile.Writer()

    init(format: TemplateFileFormat, sink: OutputSink) {
        self.format = format
        self.sink = sink
    }

    /// Starts the file.
    mutating func begin() throws(OutputFileError) {
        switch self.format {
        case .protobuf: try self.sink.write(self.dump.header())
        case .verid: try self.sink.write("[")
        }
    }

    /// Starts a gallery's section: its definition (protobuf only).
    mutating func beginGallery(_ gallery: GalleryConfiguration) throws {
        guard self.format == .protobuf else { return }
        try self.sink.write(try self.dump.record(.with { $0.gallery = Registry_V1_DefineGalleryRequest(gallery) }))
    }

    /// Appends templates, which must carry their data.
    /// - Throws: ``OutputFileError``, or ``RegistryClientError/unexpectedResponse(_:)`` for a template
    ///   without data.
    mutating func append(_ templates: [StoredTemplate]) throws {
        for stored in templates {
            guard let template = stored.template else {
                throw RegistryClientError.unexpectedResponse("exported template \(stored.id) came without its data")
            }
            switch self.format {
            case .protobuf:
                try self.sink.write(try self.dump.record(.with { $0.template = Self.templateMessage(stored) }))
            case .verid:
                try self.sink.write((self.written == 0 ? "\n" : ",\n") + Self.veridRecord(identifier: stored.identifier, template: template))
            }
            self.written += 1
        }
    }

    /// Appends liveness profiles (protobuf only).
    mutating func append(profiles: [ProfileEntry]) throws {
        guard self.format == .protobuf else { return }
        for entry in profiles {
            try self.sink.write(try self.dump.record(.with { $0.livenessProfile = Registry_V1_LivenessProfileEntry(entry) }))
        }
    }

    /// Ends the file (it still has to be committed): a dump with its trailer.
    func end() throws {
        switch self.format {
        case .protobuf: try self.sink.write(try self.dump.trailer())
        case .verid: try self.sink.write(self.written == 0 ? "]\n" : "\n]\n")
        }
    }

    // MARK: Records

    /// A template as a dump holds it: without its id.
    static func templateMessage(_ stored: StoredTemplate) -> Registry_V1_StoredTemplate {
        var message = Registry_V1_StoredTemplate(stored)
        message.id = 0
        return message
    }

    /// One Ver-ID JSON object (no white space inside).
    static func veridRecord(identifier: String, template: FaceTemplate) -> String {
        var text = #"{"identifier":"# + Self.jsonString(identifier) + #","version":\#(template.algorithm),"#
        switch template.data {
        case .vector(let values):
            text += #""data":["#
            for (index, value) in values.enumerated() {
                if index > 0 { text += "," }
                text += Self.jsonNumber(value)
            }
            text += "]}"
        case .landmarks(let landmarks):
            text += #""landmarks":["#
            for (index, landmark) in landmarks.enumerated() {
                if index > 0 { text += "," }
                text += #"{"name":"# + Self.jsonString(landmark.name) + #","x":"# + Self.jsonNumber(landmark.x)
                text += #","y":"# + Self.jsonNumber(landmark.y) + #","z":"# + Self.jsonNumber(landmark.z) + "}"
            }
            text += "]}"
        }
        return text
    }

    /// A float as a JSON number: Swift's shortest round-trip form (`0.1`, `1e-05`) is valid JSON.
    /// Stored templates are finite; a non-finite value (which JSON cannot hold) is written as 0.
    static func jsonNumber(_ value: Float) -> String {
        value.isFinite ? value.description : "0"
    }

    /// A JSON string literal.
    static func jsonString(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// Reads files written by ``TemplateStreamWriter`` (or by anything else that speaks the formats)
/// into the items `import` sends.
extension TemplateStreamReader {
    /// The import items of a file's contents.
    /// - Parameters:
    ///   - bytes: the contents.
    ///   - format: the format, guessed from the first byte when nil (`[`: Ver-ID JSON).
    ///   - file: the file's name, for messages.
    /// - Throws: ``InputFileError`` naming the record and what is wrong.
    static func items(from bytes: [UInt8], format: TemplateFileFormat?, file: String) throws(InputFileError) -> [ImportItem] {
        switch format ?? TemplateFileFormat.guess(bytes) {
        case .verid: try TemplateJSON.importItems(from: bytes, file: file)
        case .protobuf:
            DumpFile.isDump(bytes)
                ? try DumpFile.sections(from: bytes, file: file).flatMap(\.items) : try self.protobufItems(from: bytes, file: file)
        }
    }
}
