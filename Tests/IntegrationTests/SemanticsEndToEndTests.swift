import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Testing

/// the README's engine behaviour through the real daemon and the client library: a representative case per rule.
@Suite struct SemanticsEndToEndTests {
    func arcface(_ flipped: Set<Int> = []) -> FaceTemplate { FaceTemplate(algorithm: 24, vector: signs(flipped)) }
    func dlib(_ flipped: Set<Int> = []) -> FaceTemplate { FaceTemplate(algorithm: 16, vector: signs(flipped)) }

    @Test func registerIdentifyAuthenticateAndTheirRefusals() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        let hello = try await client.hello(clientName: "tests")
        #expect(hello.protocolMajor == 1)

        // register; a similar face under another name names the best-scoring other identifier
        _ = try await client.register(identifier: "alice", face: Face(self.arcface(Set(0..<3))))  // 0.625 to the probe
        _ = try await client.register(identifier: "bob", face: Face(self.arcface([8])))  // 0.875 to the probe
        do {
            _ = try await client.register(identifier: "carol", face: Face(self.arcface()))
            Issue.record("expected SIMILAR_FACE_REGISTERED")
        } catch let error as RegistryError {
            #expect(error.code == .similarFaceRegistered)
            guard case .registration(let decisive, _) = error.details else {
                Issue.record("no details")
                return
            }
            #expect(decisive.kind == .similarFace(identifier: "bob", score: 0.875))
        }
        // mismatch with the best score
        do {
            _ = try await client.register(identifier: "alice", face: Face(self.arcface(Set(8..<16))))
            Issue.record("expected FACE_MISMATCH")
        } catch let error as RegistryError {
            #expect(error.code == .faceMismatch)
            guard case .registration(let decisive, _) = error.details else {
                Issue.record("this guard did not hold: case .registration(let decisive, _) = error.details")
                return
            }
            #expect(decisive.kind == .faceMismatch(bestScore: 0))
        }
        // force stores and reports
        let forced = try await client.register(identifier: "carol", face: Face(self.arcface()), force: true)
        #expect(forced.stored.map(\.source) == [.forced])
        #expect(forced.findings.count == 1)

        // identify: one per identifier, best first, ties by registration order
        let identified = try await client.identify(face: Face(self.arcface()), autoEnrol: false)
        #expect(identified.matches.map(\.identifier) == ["carol", "bob", "alice"])
        #expect(identified.matches.map(\.score) == [1, 0.875, 0.625])
        let limited = try await client.identify(face: Face(self.arcface()), autoEnrol: false, limit: 1)
        #expect(limited.matches.map(\.identifier) == ["carol"])

        // authenticate: not registered first; a non-match is a result
        do {
            _ = try await client.authenticate(identifier: "zed", face: Face(self.dlib()))
            Issue.record("expected IDENTIFIER_NOT_REGISTERED")
        } catch let error as RegistryError {
            #expect(error.code == .identifierNotRegistered)
        }
        let rejected = try await client.authenticate(identifier: "alice", face: Face(self.arcface(Set(0..<16))))
        #expect(!rejected.authenticated)
        let accepted = try await client.authenticate(identifier: "bob", face: Face(self.arcface([8])), autoEnrol: false)
        #expect(accepted.authenticated && accepted.score == 1 && accepted.algorithm == 24)
        await client.close()
    }

    @Test func multiRegistrySafeIdentifyAutoEnrolmentAndMigrationStatus() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        let strict = Thresholds(authentication: 0.75, identification: 0.75, autoEnrolment: 0.75)
        try await client.defineGallery(
            GalleryConfiguration(
                name: "g",
                registries: [
                    RegistryConfiguration(algorithm: 24, thresholds: strict), RegistryConfiguration(algorithm: 16, thresholds: strict),
                ]))
        _ = try await client.register(gallery: "g", identifier: "alice", face: Face(self.arcface()))
        _ = try await client.register(gallery: "g", identifier: "bob", face: Face(self.dlib(Set(0..<8))))
        // Nobody's registry holds both: safe identify refuses with a dlib-less face.
        do {
            _ = try await client.identify(gallery: "g", face: Face(self.arcface()))
            Issue.record("expected INCOMPATIBLE_TEMPLATES")
        } catch let error as RegistryError {
            #expect(error.code == .incompatibleTemplates)
        }
        // Unsafe: arcface finds alice and auto-enrols her dlib template; the report says so.
        let result = try await client.identify(gallery: "g", face: Face(self.arcface(), self.dlib()), safe: false)
        #expect(result.algorithm == 24)
        #expect(result.matches.map(\.identifier) == ["alice"])
        guard case .enrolled(let templateId) = result.autoEnrolment.first?.result else {
            Issue.record("expected an enrolment, got \(result.autoEnrolment)")
            return
        }
        let templates = try await client.templates(gallery: "g", identifier: "alice")
        #expect(templates.map(\.id).contains(templateId))
        #expect(templates.last?.source == .autoEnrolled)
        let status = try await client.migrationStatus(gallery: "g")
        #expect(status.map(\.identifiersHeld) == [1, 2])
        #expect(status.map(\.galleryIdentifiers) == [2, 2])
        // Now dlib holds everyone: safe identify uses it.
        let safe = try await client.identify(gallery: "g", face: Face(self.arcface(), self.dlib()), autoEnrol: false)
        #expect(safe.algorithm == 16)
        await client.close()
    }

    @Test func everythingSurvivesARestart() async throws {
        let daemon = try Daemon()
        var client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(self.arcface([0])))
        let bob = try await client.register(identifier: "bob", face: Face(self.arcface(Set(0..<8)), self.dlib()))
        try await client.defineGallery(GalleryConfiguration(name: "visitors", registries: [RegistryConfiguration(algorithm: 16)]))
        _ = try await client.register(gallery: "visitors", identifier: "vic", face: Face(self.dlib()))
        _ = try await client.deleteTemplate(id: bob.stored[1].id)
        let before = (
            try await client.galleries(), try await client.templates(identifier: "bob", includeData: true),
            try await client.identify(face: Face(self.arcface()), autoEnrol: false)
        )
        await client.close()
        #expect(daemon.stop(signal: SIGTERM) == 0)

        try daemon.start()
        client = try await daemon.client()
        #expect(try await client.galleries() == before.0)
        #expect(try await client.templates(identifier: "bob", includeData: true) == before.1)
        #expect(try await client.identify(face: Face(self.arcface()), autoEnrol: false) == before.2)
        let verified = try await client.verify()
        #expect(verified.checked == 3)
        #expect(verified.problems.isEmpty)
        await client.close()
    }

    @Test func exportImportAndBackupThroughTheDaemon() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        for index in 0..<25 {
            _ = try await client.register(identifier: "p\(index)", face: Face(FaceTemplate(algorithm: 24, vector: axis(index))))
        }
        var exported: [StoredTemplate] = []
        var after: UInt64 = 0
        while true {
            let page = try await client.export(after: after, limit: 10)
            exported += page.templates
            guard let next = page.next else { break }
            after = next
        }
        #expect(exported.map(\.identifier) == (0..<25).map { "p\($0)" })
        #expect(exported.allSatisfy { $0.template != nil })

        try await client.defineGallery(GalleryConfiguration(name: "copy", registries: [RegistryConfiguration(algorithm: 24)]))
        let ids = try await client.importTemplates(gallery: "copy", exported.map { ImportItem(identifier: $0.identifier, template: $0.template!) })
        #expect(ids.count == 25)
        #expect(try await client.templates(gallery: "copy", identifier: "p7").map(\.source) == [.imported])

        // An export's record travels: time, source and quality kept; importing it twice with
        // skipExisting stores it once.
        try await client.defineGallery(GalleryConfiguration(name: "mirror", registries: [RegistryConfiguration(algorithm: 24)]))
        let items = exported.map {
            ImportItem(identifier: $0.identifier, template: $0.template!, registeredAt: $0.registeredAt, source: $0.source, quality: $0.quality)
        }
        // A repeat within one import is skipped too.
        let first = try await client.importTemplates(gallery: "mirror", items + items.prefix(2), skipExisting: true)
        #expect(first.skipped == 2 && first.templateIds.count == 27 && Array(first.templateIds.suffix(2)) == Array(first.templateIds.prefix(2)))
        let p7 = try #require(exported.first { $0.identifier == "p7" })
        let mirrored = try #require(try await client.templates(gallery: "mirror", identifier: "p7").first)
        #expect(mirrored.registeredAt == p7.registeredAt && mirrored.source == p7.source && mirrored.quality == p7.quality)
        let again = try await client.importTemplates(gallery: "mirror", items + items.prefix(3), skipExisting: true)
        #expect(again.skipped == 28 && again.templateIds == Array(first.templateIds.prefix(25)) + first.templateIds.prefix(3))
        #expect(try await client.templates(gallery: "mirror", identifier: "p7").count == 1)

        // Into the daemon's default backup root: the data directory's path with -backups appended.
        let (backup, bytes) = try await client.backup()
        #expect(bytes > 0 && backup.hasPrefix(daemon.dataPath + "-backups/"), "\(backup)")
        #expect(access(backup + "/data.mdb", R_OK) == 0)
        await client.close()
    }
}
