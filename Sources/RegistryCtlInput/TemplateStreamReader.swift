import RegistryModel
import RegistryProtocol
import SwiftProtobuf

/// Reads the protobuf export stream (registryctl's `TemplateStreamWriter` writes it; the format is
/// described there) into the items `import` sends; registryctl adds the choice of format.
public enum TemplateStreamReader {
    /// Reads a stream of length-prefixed `StoredTemplate` messages.
    public static func protobufItems(from bytes: [UInt8], file: String) throws(InputFileError) -> [ImportItem] {
        var items: [ImportItem] = []
        var offset = 0
        while offset < bytes.count {
            let record = items.count + 1
            guard bytes.count - offset >= 4 else {
                throw InputFileError(
                    file: file, message: "record \(record) at byte \(offset): truncated length prefix (\(bytes.count - offset) of 4 bytes)")
            }
            let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let start = offset + 4
            guard bytes.count - start >= length else {
                throw InputFileError(
                    file: file,
                    message: "record \(record) at byte \(offset): truncated (\(length) bytes announced, \(bytes.count - start) remain)")
            }
            let message: Registry_V1_StoredTemplate
            do {
                message = try Registry_V1_StoredTemplate(serializedBytes: Array(bytes[start..<start + length]))
            } catch {
                throw InputFileError(file: file, message: "record \(record) at byte \(offset): not a registry.v1.StoredTemplate message")
            }
            guard !message.identifier.isEmpty else {
                throw InputFileError(file: file, message: "record \(record) at byte \(offset): no identifier")
            }
            guard message.hasTemplate, !message.template.vector.isEmpty || !message.template.landmarks.isEmpty else {
                throw InputFileError(file: file, message: "record \(record) at byte \(offset): no template data")
            }
            // What the export recorded travels with the template (kept by the import).
            items.append(
                ImportItem(
                    identifier: message.identifier, template: FaceTemplate(message.template),
                    registeredAt: message.registeredAtMicros == 0 ? nil : message.registeredAtMicros,
                    source: TemplateSource(message.source), quality: message.hasQuality ? message.quality : nil))
            offset = start + length
        }
        return items
    }
}
