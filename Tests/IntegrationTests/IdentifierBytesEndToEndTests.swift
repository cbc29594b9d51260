import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// Identifiers are their UTF-8 bytes (PROTOCOL.md, names): two spellings that Swift's `String`
/// calls equal (canonically equivalent) are two people, through registryctl and a real daemon —
/// listed, paged, shown, exported, imported, erased and audited apart.
@Suite struct IdentifierBytesEndToEndTests {
    /// Canonically equivalent spellings: precomposed ë and e + combining diaeresis; the Hangul
    /// syllable 한 and its conjoining jamo; K and KELVIN SIGN (a singleton that NFC turns into K).
    static let twins: [(composed: String, other: String)] = [
        ("Zo\u{EB}", "Zoe\u{308}"), ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}"), ("Kelvin", "\u{212A}elvin"),
    ]
    static let everyone = twins.flatMap { [$0.composed, $0.other] }

    /// Everyone in the store's order: by UTF-8 bytes.
    static let inByteOrder = everyone.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }

    static func bytes(_ identifiers: [String]) -> [[UInt8]] { identifiers.map { Array($0.utf8) } }

    /// Two unit vectors on person `index`'s own axes (2·index and 2·index + 1), scoring 0.96
    /// together and 0 against everyone else's: a second template that matches the first, and no
    /// similar face between twins.
    static func faceFiles(_ index: Int, in directory: String) throws -> [String] {
        try [[(2 * index, Float(1))], [(2 * index, Float(0.96)), (2 * index + 1, Float(0.28))]].enumerated().map { number, axes in
            var values = [Float](repeating: 0, count: 128)
            for (axis, value) in axes { values[axis] = value }
            let path = directory + "/face-\(index)-\(number).json"
            let text = #"{"version": 24, "data": ["# + values.map { "\($0)" }.joined(separator: ", ") + "]}"
            guard let file = fopen(path, "w") else { throw HarnessError("cannot write \(path)") }
            defer { fclose(file) }
            fputs(text, file)
            return path
        }
    }

    @Test func canonicallyEquivalentSpellingsAreDifferentPeopleEverywhere() async throws {
        for (composed, other) in Self.twins {
            // What the test is about: Swift merges them, their bytes differ.
            #expect(composed == other && !composed.utf8.elementsEqual(other.utf8))
        }
        let source = try Daemon()
        let ctl = try Registryctl(source)
        for (index, identifier) in Self.everyone.enumerated() {
            for file in try Self.faceFiles(index, in: source.directory) {
                let (status, output) = try ctl.run(["register", identifier, file])
                #expect(status == 0, "register \(identifier): \(output)")
            }
        }
        #expect(try ctl.json(GalleriesDocument.self, ["galleries"]).galleries.first?.identifiers == 6)

        // One page holding every twin, then pages of 1 to 4: twins side by side in a page and across
        // a page boundary (the cursor is one twin, the next page starts with the other).
        let all = try ctl.json(IdentifiersDocument.self, ["identifiers", "--all"])
        #expect(Self.bytes(all.identifiers) == Self.inByteOrder, "\(all.identifiers)")
        for limit in 1...4 {
            var listed: [String] = []
            var after: String?
            repeat {
                let page = try ctl.json(
                    IdentifiersDocument.self, ["identifiers", "--limit", "\(limit)"] + (after.map { ["--after", $0] } ?? []))
                listed += page.identifiers
                after = page.next
            } while after != nil && listed.count <= Self.everyone.count
            #expect(Self.bytes(listed) == Self.inByteOrder, "pages of \(limit): \(listed)")
        }
        for identifier in Self.everyone {
            let shown = try ctl.json(ShowDocument.self, ["show", identifier])
            #expect(shown.templates.count == 2 && shown.templates.allSatisfy { $0.identifier.utf8.elementsEqual(identifier.utf8) })
        }

        // A dump carries both of each pair, and importing it again finds every template already stored
        // under its own spelling (none under its twin's).
        let dump = source.directory + "/twins.dump"
        #expect(try ctl.json(ExportDocument.self, ["export", "--output", dump]).templates == 12)
        let verid = source.directory + "/twins.json"
        #expect(try ctl.json(ExportDocument.self, ["export", "--format", "verid", "--output", verid]).templates == 12)
        for (file, format) in [(dump, "protobuf"), (verid, "verid")] {
            let target = try Daemon()
            let copy = try Registryctl(target)
            let first = try copy.json(ImportDocument.self, ["import", file])
            #expect(first.imported == 12 && first.skipped == 0, "\(format): \(first)")
            let again = try copy.json(ImportDocument.self, ["import", file])
            #expect(again.imported == 0 && again.skipped == 12, "\(format): \(again)")
            let imported = try copy.json(IdentifiersDocument.self, ["identifiers", "--all"])
            #expect(Self.bytes(imported.identifiers) == Self.inByteOrder, "\(format): \(imported.identifiers)")
            for identifier in Self.everyone {
                #expect(try copy.json(ShowDocument.self, ["show", identifier]).templates.count == 2, "\(format): \(identifier)")
            }
        }

        // Erasing one spelling leaves the other with both its templates.
        for (composed, other) in Self.twins {
            let erased = try ctl.json(DeleteDocument.self, ["delete", "identifier", other])
            #expect(erased.templatesDeleted == 2, "\(other)")
            #expect(try ctl.run(["show", other]).status == 2, "\(other) was erased")
            let kept = try ctl.json(ShowDocument.self, ["show", composed])
            #expect(kept.templates.count == 2 && kept.templates.allSatisfy { $0.identifier.utf8.elementsEqual(composed.utf8) })
        }
        let remaining = try ctl.json(IdentifiersDocument.self, ["identifiers", "--all"])
        let composed = Self.twins.map { Array($0.composed.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(Self.bytes(remaining.identifiers) == composed, "\(remaining.identifiers)")

        // The audit trail tells the spellings apart: each one's entries name it, byte for byte, and
        // only the erased spelling's include the erasure.
        for (composed, other) in Self.twins {
            for (identifier, operations) in [
                (composed, ["register", "register", "get_templates", "get_templates"]),
                (other, ["register", "register", "get_templates", "delete_identifier", "get_templates"]),
            ] {
                let trail = try ctl.json(AuditDocument.self, ["audit", "--identifier", identifier, "--limit", "1000"])
                #expect(trail.entries.map(\.operation) == operations, "\(identifier): \(trail.entries.map(\.operation))")
                #expect(trail.entries.allSatisfy { $0.identifiers.contains { $0.utf8.elementsEqual(identifier.utf8) } })
            }
        }
    }
}

extension IdentifierBytesEndToEndTests {
    /// Gallery names are ASCII by validation, but a name given on the command line is compared as
    /// bytes before anything validates it: "\u{212A}iosk" (KELVIN SIGN) is "Kiosk" to Swift's `==`
    /// and no gallery at all to the daemon, and registryctl must not pick Kiosk for it either.
    @Test func aGalleryNameIsItsBytesInTheDaemonAndInRegistryctl() async throws {
        let kelvin = "\u{212A}iosk"
        #expect(kelvin == "Kiosk")
        let source = try Daemon()
        let client = try await source.client()
        try await client.defineGallery(GalleryConfiguration(name: "Kiosk", registries: [RegistryConfiguration(algorithm: 24)]))
        await client.close()
        let ctl = try Registryctl(source)
        #expect(try ctl.run(["register", "ann", try Self.faceFiles(0, in: source.directory)[0], "--gallery", "Kiosk"]).status == 0)
        for arguments in [["identifiers"], ["show", "ann"], ["export", "--output", source.directory + "/kelvin.dump"]] {
            let (status, output) = try ctl.run(arguments + ["--gallery", kelvin])
            #expect(status != 0 && output.contains("UNKNOWN_GALLERY"), "\(arguments): \(output)")
        }
        let dump = source.directory + "/all.dump"
        #expect(try ctl.json(ExportDocument.self, ["export", "--all", "--output", dump]).templates == 1)
        let target = try Registryctl(try Daemon())
        let (status, output) = try target.run(["import", dump, "--gallery", kelvin])
        #expect(status != 0 && output.contains("holds no gallery"), "\(output)")
        #expect(try target.json(ImportDocument.self, ["import", dump, "--gallery", "Kiosk"]).imported == 1)
    }
}

// The parts of registryctl's --json documents the test looks at.

private struct GalleriesDocument: Decodable {
    struct Gallery: Decodable {
        var name: String
        var identifiers: Int
    }
    var galleries: [Gallery]
}

private struct IdentifiersDocument: Decodable {
    var identifiers: [String]
    var next: String?
}

private struct ShowDocument: Decodable {
    struct Template: Decodable {
        var id: UInt64
        var identifier: String
    }
    var templates: [Template]
}

private struct ExportDocument: Decodable {
    var templates: Int
}

private struct ImportDocument: Decodable {
    var imported: Int
    var skipped: Int
}

private struct DeleteDocument: Decodable {
    var templatesDeleted: Int
}

private struct AuditDocument: Decodable {
    struct Entry: Decodable {
        var operation: String
        var identifiers: [String]
    }
    var entries: [Entry]
}
