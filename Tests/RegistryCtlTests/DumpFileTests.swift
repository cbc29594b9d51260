import Glibc
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

@testable import RegistryCtlInput
@testable import registryctl

/// A dump ends with a trailer that counts its records and checksums its bytes, so that one cut short,
/// damaged or extended is refused rather than imported as a different dump; dumps from before the
/// trailer (REGDUMP1) still read.
@Suite("Dump trailer")
struct DumpFileTests {
    static let profile = LivenessProfile(
        mean: 0.4...0.6, stdDev: 0.01...0.02, range: 0.05...0.1, edgeStdDev: 0.01...0.03, centerStdDev: 0.005...0.01,
        gradientMean: 0.1...0.2, gradientStdDev: 0.01...0.05, realisticDepth: 0.3...0.9, k: 3, frameCount: 35)

    /// The galleries of ``dump()``: names, then what each holds.
    static let galleries = ["default", "lobby", "empty"]
    static let items: [[ImportItem]] = {
        let all = TemplateStreamTests.expected(.protobuf)
        return [Array(all.prefix(2)), Array(all.suffix(1)), []]
    }()
    static let profiles = [[ProfileEntry(identifier: "alice", profile: Self.profile)], [], []]
    /// Three galleries, three templates and a profile.
    static let records = 7

    /// A dump as export writes it: three galleries, one with templates and a profile, one with a
    /// landmark template, one empty.
    static func dump() throws -> [UInt8] {
        let directory = TemporaryDirectory("registryctl-tests")
        defer { directory.remove() }
        let path = directory.path + "/all.dump"
        let sink = try OutputSink(path: path)
        var writer = TemplateStreamWriter(format: .protobuf, sink: sink)
        try writer.begin()
        try writer.beginGallery(GalleryConfiguration(name: "default", registries: [RegistryConfiguration(algorithm: 24)]))
        try writer.append(Array(TemplateStreamTests.stored.prefix(2)))
        try writer.append(profiles: Self.profiles[0])
        try writer.beginGallery(GalleryConfiguration(name: "lobby", registries: [RegistryConfiguration(algorithm: 1000)]))
        try writer.append(Array(TemplateStreamTests.stored.suffix(1)))
        try writer.beginGallery(GalleryConfiguration(name: "empty", registries: [RegistryConfiguration(algorithm: 24)]))
        try writer.end()
        try sink.commit()
        return try FileIO.read(path)
    }

    /// Where each record's frame starts, read from the length prefixes here rather than by the code
    /// under test.
    static func frameStarts(_ bytes: [UInt8], from start: Int = 8) -> [Int] {
        var starts: [Int] = []
        var offset = start
        while offset + 4 <= bytes.count {
            starts.append(offset)
            offset += 4 + bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        return starts
    }

    /// A gallery's definition as a dump record.
    static func galleryRecord(_ name: String) -> Registry_V1_DumpRecord {
        .with { $0.gallery = Registry_V1_DefineGalleryRequest(GalleryConfiguration(name: name, registries: [RegistryConfiguration(algorithm: 24)])) }
    }

    /// The message of the error reading `bytes` as a dump, or nil when it reads.
    static func refusal(_ bytes: [UInt8]) -> String? {
        do {
            _ = try DumpFile.sections(from: bytes, file: "d.dump")
            return nil
        } catch {
            #expect(error.file == "d.dump")
            return error.message
        }
    }

    static func expectDumpContents(_ sections: [DumpSection]) {
        #expect(sections.map(\.gallery.name) == Self.galleries)
        #expect(sections.map(\.items) == Self.items)
        #expect(sections.map(\.profiles) == Self.profiles)
    }

    @Test func aDumpEndsWithOneTrailerThatCountsAndChecksumsTheBytesBeforeIt() throws {
        let bytes = try Self.dump()
        #expect(bytes.starts(with: Array("REGDUMP2".utf8)))
        let starts = Self.frameStarts(bytes)
        #expect(starts.count == Self.records + 1)
        let last = try #require(starts.last)
        let message = try Registry_V1_DumpRecord(serializedBytes: Array(bytes[(last + 4)...]))
        guard case .trailer(let trailer) = message.record else {
            Issue.record("the last record is not the trailer: \(message)")
            return
        }
        #expect(trailer.recordCount == UInt64(Self.records))
        #expect(trailer.checksum == CRC32C.checksum(Array(bytes[..<last])))
        // No other record is a trailer.
        for start in starts.dropLast() {
            let length = bytes[start..<start + 4].reduce(0) { $0 << 8 | Int($1) }
            let record = try Registry_V1_DumpRecord(serializedBytes: Array(bytes[start + 4..<start + 4 + length]))
            if case .trailer = record.record { Issue.record("a trailer at byte \(start), before the last record") }
        }
        Self.expectDumpContents(try DumpFile.sections(from: bytes, file: "d.dump"))
        #expect(try TemplateStreamReader.items(from: bytes, format: nil, file: "d.dump") == Self.items.flatMap { $0 })
        #expect(!DumpFile.isUnchecked(bytes))
    }

    /// Cut at a record boundary, a dump without its trailer would read as a smaller one: every such
    /// cut is refused, naming the last record that is there. A cut inside a record is refused too.
    @Test func aDumpCutShortAnywhereIsRefused() throws {
        let bytes = try Self.dump()
        let starts = Self.frameStarts(bytes)
        for (records, boundary) in starts.enumerated() {
            let end = records == 0 ? "its REGDUMP2 header" : "record \(records)"
            #expect(
                Self.refusal(Array(bytes[..<boundary])) == "the dump ends after \(end) without its trailer: the file was cut short",
                "cut at byte \(boundary)")
        }
        for (index, start) in starts.enumerated() {
            let next = index + 1 < starts.count ? starts[index + 1] : bytes.count
            for cut in Set([start + 1, start + 3, start + 4, start + 5, (start + next) / 2, next - 1]) where cut < next {
                let message = Self.refusal(Array(bytes[..<cut]))
                #expect(
                    message?.hasPrefix("record \(index + 1) at byte \(start): truncated") == true
                        && message?.hasSuffix(": the file was cut short, or damaged") == true, "cut at byte \(cut): \(message ?? "read")")
            }
        }
        #expect(Self.refusal(Array(bytes[..<7])) == "not a registry dump (it does not start with REGDUMP2, nor REGDUMP1)")
    }

    /// Every byte changed (one bit, the high bit, all bits, or two bits: the magic's '2' would
    /// become '1') makes the file refused; a changed value inside a template, which still decodes,
    /// is caught by the checksum.
    @Test func aChangedByteIsRefused() throws {
        let bytes = try Self.dump()
        var read: [String] = []
        for offset in bytes.indices {
            for mask: UInt8 in [0x01, 0x03, 0x80, 0xFF] {
                var damaged = bytes
                damaged[offset] ^= mask
                if (try? DumpFile.sections(from: damaged, file: "d.dump")) != nil { read.append("byte \(offset) ^ \(mask)") }
            }
        }
        #expect(read.isEmpty, "\(read.count) of \(4 * bytes.count) changes were read, the first: \(read.prefix(5))")
        // The last byte of alice's first float (0.1): the record still decodes, to another value.
        let float = try #require(bytes.indices.first { Array(bytes[$0..<$0 + 4]) == [0xCD, 0xCC, 0xCC, 0x3D] })
        var damaged = bytes
        damaged[float + 3] ^= 0x01
        let trailer = try #require(Self.frameStarts(bytes).last)
        let message = Self.refusal(damaged)
        #expect(
            message?.hasPrefix("record \(Self.records + 1) at byte \(trailer): the bytes before the trailer do not have its checksum") == true
                && message?.hasSuffix("the file was damaged") == true, "\(message ?? "read")")
    }

    /// One trailer, the last record: records after it are refused (two dumps run together, or one
    /// extended), and so is a trailer whose count is wrong although its checksum is right.
    @Test func aRecordAfterTheTrailerOrAWrongCountIsRefused() throws {
        let bytes = try Self.dump()
        let gallery = try DumpFile.frame(Self.galleryRecord("late"))
        let extended = Self.refusal(bytes + gallery)
        #expect(
            extended == "record 9 at byte \(bytes.count): a record after the trailer (record 8), which must be the last: "
                + "the file holds more than one dump, or was extended")

        // A trailer, then another that counts and checksums all before it, the first included.
        var writer = DumpFile.Writer()
        var twice = writer.header()
        twice += try writer.record(Self.galleryRecord("a"))
        let first = try Registry_V1_DumpRecord(serializedBytes: Array(try writer.trailer().dropFirst(4)))
        twice += try writer.record(first)
        twice += try writer.trailer()
        let second = try #require(Self.frameStarts(twice).last)
        #expect(
            Self.refusal(twice) == "record 3 at byte \(second): a record after the trailer (record 2), which must be the last: "
                + "the file holds more than one dump, or was extended")

        // A count that does not match, with the right checksum.
        var counted = DumpFile.Writer()
        var miscounted = counted.header()
        miscounted += try counted.record(Self.galleryRecord("a"))
        let checksum = CRC32C.checksum(miscounted)
        let at = miscounted.count
        miscounted += try DumpFile.frame(
            .with {
                $0.trailer = .with {
                    $0.recordCount = 2
                    $0.checksum = checksum
                }
            })
        #expect(
            Self.refusal(miscounted) == "record 2 at byte \(at): the trailer counts 2 records before it, the file holds 1: records were lost or added"
        )
    }

    /// A dump written as before the trailer (REGDUMP1, no trailer) still reads, all of it; and, as
    /// import's warning says, one cut at a record boundary reads too, as a smaller dump.
    @Test func aREGDUMP1DumpWithoutTrailerStillReads() throws {
        let current = try Self.dump()
        let starts = Self.frameStarts(current)
        // The old format: the old magic, the same records, no trailer.
        let old = Array("REGDUMP1".utf8) + Array(current[8..<starts[starts.count - 1]])
        #expect(DumpFile.isDump(old) && DumpFile.isUnchecked(old))
        Self.expectDumpContents(try DumpFile.sections(from: old, file: "d.dump"))
        #expect(try TemplateStreamReader.items(from: old, format: nil, file: "d.dump") == Self.items.flatMap { $0 })
        let cut = try DumpFile.sections(from: Array(old[..<starts[3]]), file: "d.dump")
        #expect(cut.map(\.gallery.name) == ["default"] && cut[0].items == Self.items[0] && cut[0].profiles.isEmpty)
        // A trailer has no place in it.
        #expect(
            Self.refusal(Array("REGDUMP1".utf8) + Array(current[8...]))
                == "record 8 at byte \(starts[7]): a trailer in a REGDUMP1 dump (only REGDUMP2 dumps have one)")
    }
}
