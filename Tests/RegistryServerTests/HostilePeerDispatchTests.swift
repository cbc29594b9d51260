import Glibc
import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

@testable import RegistryServer

/// A hostile local peer through the dispatcher, with peers made up for the test and a real store:
/// fields far past their bounds, a flood of refusals, and an admin of `*` whom a gallery's own entry
/// leaves out. (tools/hostile-peer does the same as real users against the real daemon.)
@Suite struct HostilePeerDispatchTests {
    let directory = TemporaryDirectory("registryd-hostile").path
    let engine: Engine
    let dispatcher: RequestDispatcher
    let root = Peer(uid: 0, gid: 0, pid: 1, groups: [0])
    /// An admin of `*`, left out of gallery alpha's entry.
    let starAdmin = Peer(uid: 61_000, gid: 61_000, pid: 610, groups: [61_000])
    /// No right anywhere.
    let nobody = Peer(uid: 62_000, gid: 62_000, pid: 620, groups: [62_000])

    init() throws {
        self.engine = try Engine(path: self.directory + "/data")
        let policy = try AccessPolicy([
            "*": ["admin": ["uid:0", "uid:61000"], "identify": ["uid:0"], "enrol": ["uid:0"]],
            "alpha": ["admin": ["uid:0"], "identify": ["uid:0"], "enrol": ["uid:0"]],
        ])
        self.dispatcher = RequestDispatcher(engine: self.engine, logger: Logger(label: "test"), policy: policy)
    }

    func cleanUp() {
        self.engine.close()
        _ = system("rm -rf '\(self.directory)'")
    }

    func send(_ request: Registry_V1_Request, from peer: Peer?) async throws -> Registry_V1_Response {
        try await self.send(try request.serializedBytes(), from: peer)
    }

    func send(_ bytes: [UInt8], from peer: Peer?) async throws -> Registry_V1_Response {
        let reply = await self.dispatcher.respond(to: ByteBuffer(bytes: bytes), from: peer)
        return try Registry_V1_Response(serializedBytes: Array(reply.frame.readableBytesView))
    }

    func code(_ response: Registry_V1_Response) -> RegistryError.Code? {
        guard case .error(let error) = response.result else { return nil }
        return RegistryError.Code(error.code)
    }

    /// Registers `identifier` with face `axis` as root (the setting-up every test needs).
    func register(_ identifier: String, face axis: Int, in gallery: String = "") async throws -> Registry_V1_Response {
        try await self.send(
            .with {
                $0.register = .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                    $0.face = Self.face(axis)
                }
            }, from: self.root)
    }

    static func face(_ axis: Int) -> Registry_V1_Face {
        .with {
            $0.templates = [
                .with {
                    $0.algorithm = 24
                    $0.vector = (0..<128).map { $0 == axis ? 1 : 0 }
                }
            ]
        }
    }

    @Test("identifiers and galleries at 65,535, 65,536, 70,000 bytes and 1 MiB: MALFORMED_REQUEST, audited cut short, nothing stored")
    func longFields() async throws {
        defer { self.cleanUp() }
        for length in [65_535, 65_536, 70_000, 1 << 20] {
            let long = String(repeating: "x", count: length)
            for peer in [self.root, self.nobody] {
                let byIdentifier = try await self.send(
                    .with {
                        $0.id = 3
                        $0.authenticate = .with {
                            $0.identifier = long
                            $0.face = Self.face(1)
                        }
                    }, from: peer)
                #expect(byIdentifier.id == 3 && self.code(byIdentifier) == .malformedRequest)
                let byGallery = try await self.send(
                    .with {
                        $0.register = .with {
                            $0.gallery = long
                            $0.identifier = "m"
                        }
                    }, from: peer)
                #expect(self.code(byGallery) == .malformedRequest)
                if case .error(let error) = byGallery.result { #expect(error.message.utf8.count < 200, "the message echoes the name") }
            }
        }
        // Still serving, nothing stored; the refusals are in the trail with their names cut to the bound.
        let stats = try await self.send(.with { $0.listGalleries = .init() }, from: self.nobody)
        #expect(self.code(stats) == nil)
        #expect(try await self.engine.identifiers(gallery: "default", after: nil, limit: 10).identifiers.isEmpty)
        self.dispatcher.refusals.flush()
        let refused = try await self.engine.auditEntries(AuditQuery(outcome: .refused, limit: 1_000))
        #expect(!refused.isEmpty)
        #expect(refused.allSatisfy { $0.errorCode == "MALFORMED_REQUEST" })
        #expect(refused.allSatisfy { $0.gallery.utf8.count <= 64 && $0.identifiers.allSatisfy { $0.utf8.count <= 256 } })
    }

    @Test("10,000 refusals from a peer without rights: two audit entries, the second counting 9,999; an earlier entry stays")
    func aFloodOfRefusals() async throws {
        defer { self.cleanUp() }
        let registered = try await self.register("alice", face: 2)
        #expect(self.code(registered) == nil)
        for index in 0..<10_000 {
            let response = try await self.send(
                .with {
                    $0.id = UInt64(index)
                    $0.identify = .with {
                        $0.gallery = "default"
                        $0.face = Self.face(2)
                    }
                }, from: self.nobody)
            #expect(response.id == UInt64(index) && self.code(response) == .permissionDenied)
        }
        self.dispatcher.refusals.flush()
        let entries = try await self.engine.auditEntries(AuditQuery(limit: 100))
        let refusals = entries.filter { $0.uid == 62_000 }
        #expect(refusals.map(\.count) == [1, 9_999], "\(refusals)")
        #expect(refusals.allSatisfy { $0.operation == "identify" && $0.errorCode == "PERMISSION_DENIED" && $0.gallery == "default" })
        #expect(entries.contains { $0.uid == 0 && $0.identifiers == ["alice"] && $0.outcome == .ok })
        // A refusal that is a decision about a person is recorded each time.
        for _ in 0..<3 {
            let unknown = try await self.send(
                .with {
                    $0.authenticate = .with {
                        $0.identifier = "bob"
                        $0.face = Self.face(3)
                    }
                }, from: self.root)
            #expect(self.code(unknown) == .identifierNotRegistered)
        }
        self.dispatcher.refusals.flush()
        #expect(try await self.engine.auditEntries(AuditQuery(identifier: "bob")).count == 3)
    }

    @Test("an admin of * whom alpha's entry leaves out learns nothing of alpha: no listing, no trail, no backup, verify or re-key")
    func storeWideOperationsNeedEveryGallery() async throws {
        defer { self.cleanUp() }
        let alpha = try await self.send(
            .with {
                $0.defineGallery = .with {
                    $0.gallery = "alpha"
                    $0.registries = [.with { $0.algorithm = 24 }]
                }
            }, from: self.root)
        #expect(self.code(alpha) == nil, "\(alpha)")
        let carol = try await self.register("carol", face: 4, in: "alpha")
        #expect(self.code(carol) == nil)
        let dave = try await self.register("dave", face: 5)
        #expect(self.code(dave) == nil)

        // In default (the * entry) the admin lists; in alpha it may not.
        let listDefault = try await self.send(.with { $0.listIdentifiers = .with { $0.gallery = "default" } }, from: self.starAdmin)
        #expect(self.code(listDefault) == nil)
        let listAlpha = try await self.send(.with { $0.listIdentifiers = .with { $0.gallery = "alpha" } }, from: self.starAdmin)
        #expect(self.code(listAlpha) == .permissionDenied)
        for request in [
            Registry_V1_Request.with { $0.backup = .init() }, .with { $0.verify = .init() },
            .with { $0.setEncryptionKey = .with { $0.keyFile = "/k" } },
        ] {
            #expect(self.code(try await self.send(request, from: self.starAdmin)) == .permissionDenied, "\(request)")
        }
        // The trail: default's entries, none of alpha's, none of the whole store's.
        let trail = try await self.send(.with { $0.audit = .with { $0.limit = 1_000 } }, from: self.starAdmin)
        guard case .audit(let result) = trail.result else {
            Issue.record("the admin of * could not read the trail: \(trail)")
            return
        }
        #expect(result.entries.contains { $0.identifiers == ["dave"] })
        #expect(!result.entries.contains { $0.gallery == "alpha" || $0.identifiers.contains("carol") || $0.gallery.isEmpty }, "\(result.entries)")
        // Root, an admin of every gallery, sees all of it.
        let rootTrail = try await self.send(.with { $0.audit = .with { $0.limit = 1_000 } }, from: self.root)
        guard case .audit(let all) = rootTrail.result else {
            Issue.record("root could not read the trail")
            return
        }
        #expect(all.entries.contains { $0.identifiers == ["carol"] })
        // A peer with no admin right anywhere may not read it at all.
        #expect(self.code(try await self.send(.with { $0.audit = .init() }, from: self.nobody)) == .permissionDenied)
    }

    @Test("set_encryption_key gives one answer for every file it will not take as a key, and takes a private one")
    func keyFilesAnswerAlike() async throws {
        defer { self.cleanUp() }
        let key = String(repeating: "0123456789abcdef", count: 4)
        func write(_ path: String, mode: mode_t) {
            let file = fopen(path, "w")
            fputs(key, file)
            fclose(file)
            chmod(path, mode)
        }
        let open = self.directory + "/open.key"
        write(open, mode: 0o644)
        let secret = self.directory + "/secret.key"
        write(secret, mode: 0o600)
        symlink(secret, self.directory + "/link.key")
        mkdir(self.directory + "/dir.key", 0o700)
        mkfifo(self.directory + "/fifo.key", 0o600)
        var answers: Set<String> = []
        for path in [
            "/nonexistent/key", open, self.directory + "/link.key", self.directory + "/dir.key", self.directory + "/fifo.key", "relative.key",
        ] {
            let response = try await self.send(.with { $0.setEncryptionKey = .with { $0.keyFile = path } }, from: self.root)
            guard case .error(let error) = response.result else {
                Issue.record("\(path) was taken as a key")
                continue
            }
            #expect(RegistryError.Code(error.code) == .malformedRequest)
            answers.insert(error.message)
        }
        #expect(answers.count == 1, "the answers tell the files apart: \(answers)")
        let taken = try await self.send(.with { $0.setEncryptionKey = .with { $0.keyFile = secret } }, from: self.root)
        guard case .setEncryptionKey = taken.result else {
            Issue.record("a private key file was refused: \(taken)")
            return
        }
    }
}
