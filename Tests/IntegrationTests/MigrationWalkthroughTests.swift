import FoundationEssentials
import Glibc
import TestSupport
import Testing

/// The repository's examples/migration/ (this file is Tests/IntegrationTests/MigrationWalkthroughTests.swift):
/// the faces examples/generate-migration-examples writes.
private let migrationExamples: String = {
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/") + "/examples/migration"
}()

private func example(_ name: String) -> String { migrationExamples + "/" + name }

// The parts of registryctl's --json documents the walkthrough looks at.

private struct GalleryDocument: Decodable {
    struct Gallery: Decodable {
        struct Registry: Decodable {
            struct Algorithm: Decodable {
                var version: UInt32
                var name: String
            }
            var algorithm: Algorithm
            var templates: Int
            var identifiers: Int
        }
        var name: String
        var registries: [Registry]
    }
    var gallery: Gallery
}

private struct RegisterDocument: Decodable {
    struct Stored: Decodable {
        var id: UInt64
        var algorithm: UInt32
    }
    var identifier: String
    var stored: [Stored]
}

private struct MigrationDocument: Decodable {
    struct Entry: Decodable, Equatable {
        var algorithm: UInt32
        var identifiersHeld: Int
        var galleryIdentifiers: Int
        var percent: Double?
    }
    var registries: [Entry]
}

private struct AutoEnrolmentEntry: Decodable, Equatable {
    var algorithm: UInt32
    var status: String
    var templateId: UInt64?
}

private struct AuthenticateDocument: Decodable {
    var authenticated: Bool
    var score: Float
    var algorithm: UInt32
    var autoEnrolment: [AutoEnrolmentEntry]
}

private struct IdentifyDocument: Decodable {
    struct Match: Decodable {
        var identifier: String
        var score: Float
        var templateId: UInt64
        var algorithm: UInt32
    }
    var algorithm: UInt32?
    var matches: [Match]
    var autoEnrolment: [AutoEnrolmentEntry]
}

/// The README's walkthrough "Migrating from landmarks to landmarks-aligned", command for command:
/// registryctl against a real daemon with the committed faces of examples/migration/.
@Suite struct MigrationWalkthroughTests {
    static let people = ["alice", "bob", "carol"]

    @Test func landmarksToLandmarksAlignedByAutoEnrolmentThenTheReorderedGalleryIdentifiesATurnedHead() throws {
        let ctl = try Registryctl(Daemon())

        // The old algorithm first, the new one second.
        let defined = try ctl.json(GalleryDocument.self, ["gallery", "define", "doors", "--registry", "landmarks", "landmarks-aligned"])
        #expect(defined.gallery.name == "doors")
        #expect(defined.gallery.registries.map(\.algorithm.version) == [1000, 1001])
        #expect(defined.gallery.registries.map(\.algorithm.name) == ["landmarks", "landmarks-aligned"])

        // Everyone registered with a landmarks (1000) template only: the new registry holds no one.
        for name in Self.people {
            let registered = try ctl.json(RegisterDocument.self, ["register", name, example("\(name)-landmarks.json"), "--gallery", "doors"])
            #expect(registered.identifier == name)
            #expect(registered.stored.map(\.algorithm) == [1000], "\(name)")
        }
        let before = try ctl.json(MigrationDocument.self, ["migration", "--gallery", "doors"])
        #expect(
            before.registries == [
                .init(algorithm: 1000, identifiersHeld: 3, galleryIdentifiers: 3, percent: 100),
                .init(algorithm: 1001, identifiersHeld: 0, galleryIdentifiers: 3, percent: 0),
            ])

        // Each authenticates with a face carrying both templates: landmarks decides (the only
        // registry holding them), and the landmarks-aligned template is auto-enrolled.
        var enrolled: [String: UInt64] = [:]
        for name in Self.people {
            let authentication = try ctl.json(
                AuthenticateDocument.self, ["authenticate", name, example("\(name)-both.json"), "--gallery", "doors"])
            #expect(authentication.authenticated, "\(name)")
            #expect(authentication.algorithm == 1000, "\(name)")
            #expect(authentication.score >= 0.65, "\(name): \(authentication.score)")
            #expect(authentication.autoEnrolment.map(\.algorithm) == [1001], "\(name)")
            #expect(authentication.autoEnrolment.map(\.status) == ["enrolled"], "\(name)")
            enrolled[name] = authentication.autoEnrolment.first?.templateId
        }
        #expect(Set(enrolled.values).count == 3, "three new templates: \(enrolled)")
        let after = try ctl.json(MigrationDocument.self, ["migration", "--gallery", "doors"])
        #expect(
            after.registries == [
                .init(algorithm: 1000, identifiersHeld: 3, galleryIdentifiers: 3, percent: 100),
                .init(algorithm: 1001, identifiersHeld: 3, galleryIdentifiers: 3, percent: 100),
            ])

        // Safe identify still searches landmarks, the first registry holding everyone: the turned head
        // matches no one there (exit 1).
        let turned = example("alice-turned.json")
        let unordered = try ctl.json(IdentifyDocument.self, ["identify", turned, "--gallery", "doors"], exit: 1)
        #expect(unordered.algorithm == 1000)
        #expect(unordered.matches.isEmpty, "\(unordered.matches.map(\.identifier))")
        #expect(unordered.autoEnrolment.isEmpty)

        // The operator puts landmarks-aligned first; every template stays.
        let reordered = try ctl.json(GalleryDocument.self, ["gallery", "define", "doors", "--registry", "landmarks-aligned", "landmarks"])
        #expect(reordered.gallery.registries.map(\.algorithm.version) == [1001, 1000])
        #expect(reordered.gallery.registries.map(\.templates) == [3, 3])
        #expect(reordered.gallery.registries.map(\.identifiers) == [3, 3])

        // Now safe identify uses landmarks-aligned and finds alice, with the template her
        // authentication auto-enrolled.
        let ordered = try ctl.json(IdentifyDocument.self, ["identify", turned, "--gallery", "doors"])
        #expect(ordered.algorithm == 1001)
        let top = try #require(ordered.matches.first)
        #expect(top.identifier == "alice")
        #expect(top.algorithm == 1001)
        #expect(top.templateId == enrolled["alice"])
        #expect(top.score >= 0.65, "\(top.score)")
        #expect(ordered.autoEnrolment == [AutoEnrolmentEntry(algorithm: 1000, status: "already_registered", templateId: nil)])
    }
}
