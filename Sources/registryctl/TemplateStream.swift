import RegistryClient
import RegistryCtlInput
import RegistryModel
import RegistryProtocol
import SwiftProtobuf

/// Writes exported templates in one of the ``TemplateFileFormat``s:
///
/// - `protobuf`: each template as one `registry.v1.StoredTemplate` message with its data, framed as
///   on the wire:
///   ```
///   +--------+--------+--------+--------+-----------------------------------+
///   |   N: u32, big-endian              | N bytes: one StoredTemplate        |
///   +--------+--------+--------+--------+-----------------------------------+
///   ```
/// - `verid`: a JSON array of `{"identifier": ..., "version": N, "data": [...]}` (vectors) and
///   `{"identifier": ..., "version": 1000, "landmarks": [{"name", "x", "y", "z"}]}` (landmarks).
struct TemplateStreamWriter {
    let format: TemplateFileFormat
    let sink: OutputSink
    private var written = 0

    init(format: TemplateFileFormat, sink: OutputSink) {
        self.format = format
        self.sink = sink
    }

    /// Starts the file.
    func begin() throws(OutputFileError) {
        if self.format == .verid { try self.sink.write("[") }
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
                try self.sink.write(try Self.protobufRecord(stored))
            case .verid:
                try self.sink.write((self.written == 0 ? "\n" : ",\n") + Self.veridRecord(identifier: stored.identifier, template: template))
            }
            self.written += 1
        }
    }

    /// Ends the file (it still has to be committed).
    func end() throws(OutputFileError) {
        if self.format == .verid { try self.sink.write(self.written == 0 ? "]\n" : "\n]\n") }
    }

    // MARK: Records

    /// One framed `StoredTemplate`: the 4-byte big-endian length and the message.
    static func protobufRecord(_ stored: StoredTemplate) throws -> [UInt8] {
        let message: [UInt8] = try Registry_V1_StoredTemplate(stored).serializedBytes()
        let length = UInt32(message.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + message
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
        case .protobuf: try self.protobufItems(from: bytes, file: file)
        }
    }
}
