import RegistryModel
import RegistryProtocol
import SwiftProtobuf

/// Reads the protobuf export stream (registryctl's `TemplateStreamWriter` writes it; the format is
/// described there) into the items `import` sends; registryctl adds the choice of format.
public enum TemplateStreamReader {
    /// Reads a stream of length-prefixed `StoredTemplate` messages (the export files written before
    /// dumps, and any other writer of the format).
    public static func protobufItems(from bytes: [UInt8], file: String) throws(InputFileError) -> [ImportItem] {
        var items: [ImportItem] = []
        try self.forEachFrame(in: bytes, from: 0, file: file) { (record, offset, body) throws(InputFileError) in
            let message: Registry_V1_StoredTemplate
            do {
                message = try Registry_V1_StoredTemplate(serializedBytes: body)
            } catch {
                throw InputFileError(file: file, message: "record \(record) at byte \(offset): not a registry.v1.StoredTemplate message")
            }
            items.append(try self.item(message, record: record, offset: offset, file: file))
        }
        return items
    }

    /// Calls `body` with each length-prefixed frame of `bytes` after `start`: its number (from 1),
    /// offset and bytes.
    static func forEachFrame(
        in bytes: [UInt8], from start: Int, file: String, _ body: (Int, Int, [UInt8]) throws(InputFileError) -> Void
    ) throws(InputFileError) {
        try self.forEachFrameRange(in: bytes, from: start, file: file) { (record, offset, range) throws(InputFileError) in
            try body(record, offset, Array(bytes[range]))
        }
    }

    /// Calls `body` with each length-prefixed frame of `bytes` after `start`: its number (from 1),
    /// offset and where its message lies in `bytes` (a walk over the framing alone, copying nothing).
    static func forEachFrameRange(
        in bytes: [UInt8], from start: Int, file: String, _ body: (Int, Int, Range<Int>) throws(InputFileError) -> Void
    ) throws(InputFileError) {
        var offset = start
        var record = 0
        while offset < bytes.count {
            record += 1
            guard bytes.count - offset >= 4 else {
                throw InputFileError(
                    file: file, message: "record \(record) at byte \(offset): truncated length prefix (\(bytes.count - offset) of 4 bytes)")
            }
            let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let bodyStart = offset + 4
            guard bytes.count - bodyStart >= length else {
                throw InputFileError(
                    file: file,
                    message: "record \(record) at byte \(offset): truncated (\(length) bytes announced, \(bytes.count - bodyStart) remain)")
            }
            try body(record, offset, bodyStart..<bodyStart + length)
            offset = bodyStart + length
        }
    }

    /// The import item of an exported template; what the export recorded travels with it.
    static func item(_ message: Registry_V1_StoredTemplate, record: Int, offset: Int, file: String) throws(InputFileError) -> ImportItem {
        guard !message.identifier.isEmpty else {
            throw InputFileError(file: file, message: "record \(record) at byte \(offset): no identifier")
        }
        guard message.hasTemplate, !message.template.vector.isEmpty || !message.template.landmarks.isEmpty else {
            throw InputFileError(file: file, message: "record \(record) at byte \(offset): no template data")
        }
        return ImportItem(
            identifier: message.identifier, template: FaceTemplate(message.template),
            registeredAt: message.registeredAtMicros == 0 ? nil : message.registeredAtMicros,
            source: TemplateSource(message.source), quality: message.hasQuality ? message.quality : nil)
    }
}
