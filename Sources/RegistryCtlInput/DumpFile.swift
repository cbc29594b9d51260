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
/// daemon. The 8 bytes `REGDUMP2`, then `registry.v1.DumpRecord` messages, each framed by a 4-byte
/// big-endian length: per gallery, its definition, its templates (with data, without their
/// store-local ids), then its liveness profiles; and last, once, a trailer: the number of records
/// before it and the CRC-32C of every byte before its frame. Without the trailer a dump cut at a
/// record boundary would read as a smaller, well-formed dump; with it, a dump cut short, damaged or
/// extended is refused. Dumps written before the trailer start with `REGDUMP1` and have none: they
/// are still read, but nothing tells whether one is complete. An export file of bare
/// `StoredTemplate` frames (as written before dumps) cannot start with either magic: its first frame
/// would announce over 1 GiB.
public enum DumpFile {
    /// The magic of the dumps export writes, which end with a trailer.
    public static let magic: [UInt8] = Array("REGDUMP2".utf8)
    /// The magic of dumps written before the trailer (no trailer: they cannot be checked).
    public static let uncheckedMagic: [UInt8] = Array("REGDUMP1".utf8)

    /// Whether `bytes` are a dump, with a trailer or from before it.
    public static func isDump(_ bytes: [UInt8]) -> Bool { bytes.starts(with: self.magic) || self.isUnchecked(bytes) }

    /// Whether `bytes` are a dump from before the trailer, of which nothing tells whether it is
    /// complete.
    public static func isUnchecked(_ bytes: [UInt8]) -> Bool { bytes.starts(with: self.uncheckedMagic) }

    /// One framed record.
    public static func frame(_ record: Registry_V1_DumpRecord) throws -> [UInt8] {
        let message: [UInt8] = try record.serializedBytes()
        let length = UInt32(message.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + message
    }

    /// A dump's bytes as they are written, in order: the magic, the records, then the trailer, which
    /// counts and checksums what came before it.
    public struct Writer {
        /// CRC-32C rather than another checksum: the engine already checks its records with it, and
        /// it moved to RegistryModel so that registryctl, which must not depend on the engine, uses
        /// the same code (with the crc32 instruction: a dump of a million templates is read whole).
        private var checksum = CRC32C()
        /// Records written, the trailer aside.
        public private(set) var records = 0

        public init() {}

        /// The first bytes: the magic.
        public mutating func header() -> [UInt8] {
            self.checksum.update(DumpFile.magic)
            return DumpFile.magic
        }

        /// One framed record, to be written next.
        public mutating func record(_ record: Registry_V1_DumpRecord) throws -> [UInt8] {
            let bytes = try DumpFile.frame(record)
            self.checksum.update(bytes)
            self.records += 1
            return bytes
        }

        /// The framed trailer, the last bytes of the dump.
        public func trailer() throws -> [UInt8] {
            try DumpFile.frame(
                .with {
                    $0.trailer = .with {
                        $0.recordCount = UInt64(self.records)
                        $0.checksum = self.checksum.value
                    }
                })
        }
    }

    /// The gallery sections of a dump, in file order. A `REGDUMP2` dump must end with its trailer,
    /// and its count and checksum must match; a `REGDUMP1` dump is read as it is.
    /// - Throws: ``InputFileError`` naming the record and what is wrong with it.
    public static func sections(from bytes: [UInt8], file: String) throws(InputFileError) -> [DumpSection] {
        guard self.isDump(bytes) else {
            throw InputFileError(file: file, message: "not a registry dump (it does not start with REGDUMP2, nor REGDUMP1)")
        }
        let checked = !self.isUnchecked(bytes)
        if checked { try self.checkTrailer(bytes, file: file) }
        var sections: [DumpSection] = []
        var trailers = 0
        var records = 0
        try TemplateStreamReader.forEachFrame(in: bytes, from: self.magic.count, file: file) { (record, offset, body) throws(InputFileError) in
            records = record
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
            case .trailer:
                guard checked else {
                    throw InputFileError(
                        file: file, message: "record \(record) at byte \(offset): a trailer in a REGDUMP1 dump (only REGDUMP2 dumps have one)")
                }
                // A trailer that is the last record has passed checkTrailer; one with records after it has no place.
                let next = offset + 4 + body.count
                guard next == bytes.count else {
                    throw InputFileError(
                        file: file,
                        message: "record \(record + 1) at byte \(next): a record after the trailer (record \(record)), which must be "
                            + "the last: the file holds more than one dump, or was extended")
                }
                trailers += 1
            case nil:
                throw InputFileError(file: file, message: "record \(record) at byte \(offset): an empty record")
            }
        }
        guard !checked || trailers == 1 else {
            let end = records == 0 ? "its REGDUMP2 header" : "record \(records)"
            throw InputFileError(file: file, message: "the dump ends after \(end) without its trailer: the file was cut short")
        }
        return sections
    }

    /// When the last record of a `REGDUMP2` dump is a trailer, whether it counts the records before
    /// it and its checksum is that of the bytes before its frame. Checked before any record is read,
    /// so that a damaged file is called damaged rather than named by whatever the damage made of one
    /// of its records. A last record that is no trailer is left to ``sections(from:file:)``, which
    /// tells a file cut short from one with records after its trailer.
    static func checkTrailer(_ bytes: [UInt8], file: String) throws(InputFileError) {
        var last: (record: Int, offset: Int, body: Range<Int>)?
        do {
            try TemplateStreamReader.forEachFrameRange(in: bytes, from: self.magic.count, file: file) { record, offset, body in
                last = (record, offset, body)
            }
        } catch {
            // A frame that runs past the end: what a dump cut inside a record looks like.
            throw InputFileError(file: file, message: error.message + ": the file was cut short, or damaged")
        }
        guard let last, let message = try? Registry_V1_DumpRecord(serializedBytes: Array(bytes[last.body])),
            case .trailer(let trailer) = message.record
        else { return }
        let before = last.record - 1
        guard trailer.recordCount == UInt64(before) else {
            throw InputFileError(
                file: file,
                message: "record \(last.record) at byte \(last.offset): the trailer counts \(trailer.recordCount) records before it, "
                    + "the file holds \(before): records were lost or added")
        }
        let checksum = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[..<last.offset])) }
        guard checksum == trailer.checksum else {
            throw InputFileError(
                file: file,
                message: "record \(last.record) at byte \(last.offset): the bytes before the trailer do not have its checksum "
                    + "(CRC-32C \(self.hex(checksum)), the trailer says \(self.hex(trailer.checksum))): the file was damaged")
        }
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }
}
