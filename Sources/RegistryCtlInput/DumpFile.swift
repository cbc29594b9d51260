import RegistryModel
import RegistryProtocol
import SwiftProtobuf

/// One gallery of a dump: its definition, its templates in registration order, and its liveness
/// profiles in identifier order.
public struct DumpSection: Sendable, Hashable {
    public var gallery: GalleryConfiguration
    public var items: [ImportItem]
    public var profiles: [ProfileEntry]

    public init(gallery: GalleryConfiguration, items: [ImportItem] = [], profiles: [ProfileEntry] = []) {
        self.gallery = gallery
        self.items = items
        self.profiles = profiles
    }
}

/// `registryctl export`'s dump file: everything `import` needs to recreate galleries in another
/// daemon. The 8 bytes `REGDUMP1`, then `registry.v1.DumpRecord` messages, each framed by a 4-byte
/// big-endian length: per gallery, its definition, its templates (with data, without their
/// store-local ids), then its liveness profiles. An export file of bare `StoredTemplate` frames (as
/// written before dumps) cannot start with these bytes: its first frame would announce over 1 GiB.
public enum DumpFile {
    public static let magic: [UInt8] = Array("REGDUMP1".utf8)

    /// Whether `bytes` are a dump.
    public static func isDump(_ bytes: [UInt8]) -> Bool { bytes.starts(with: self.magic) }

    /// One framed record.
    public static func frame(_ record: Registry_V1_DumpRecord) throws -> [UInt8] {
        let message: [UInt8] = try record.serializedBytes()
        let length = UInt32(message.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + message
    }

    /// The gallery sections of a dump, in file order.
    /// - Throws: ``InputFileError`` naming the record and what is wrong with it.
    public static func sections(from bytes: [UInt8], file: String) throws(InputFileError) -> [DumpSection] {
        guard self.isDump(bytes) else { throw InputFileError(file: file, message: "not a registry dump (it does not start with REGDUMP1)") }
        var sections: [DumpSection] = []
        try TemplateStreamReader.forEachFrame(in: bytes, from: self.magic.count, file: file) { (record, offset, body) throws(InputFileError) in
            let message: Registry_V1_DumpRecord
            do {
                message = try Registry_V1_DumpRecord(serializedBytes: body)
            } catch {
                throw InputFileError(file: file, message: "record \(record) at byte \(offset): not a registry.v1.DumpRecord message")
            }
            switch message.record {
            case .gallery(let definition):
                sections.append(DumpSection(gallery: GalleryConfiguration(definition)))
            case .template(let stored):
                guard !sections.isEmpty else {
                    throw InputFileError(file: file, message: "record \(record) at byte \(offset): a template before any gallery")
                }
                sections[sections.count - 1].items.append(try TemplateStreamReader.item(stored, record: record, offset: offset, file: file))
            case .livenessProfile(let entry):
                guard !sections.isEmpty else {
                    throw InputFileError(file: file, message: "record \(record) at byte \(offset): a liveness profile before any gallery")
                }
                guard let profile = ProfileEntry(entry) else {
                    throw InputFileError(file: file, message: "record \(record) at byte \(offset): a liveness profile missing a statistic")
                }
                sections[sections.count - 1].profiles.append(profile)
            case nil:
                throw InputFileError(file: file, message: "record \(record) at byte \(offset): an empty record")
            }
        }
        return sections
    }
}
