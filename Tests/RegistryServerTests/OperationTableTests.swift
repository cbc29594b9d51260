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

/// The table of request kinds (`Operations/`) and the dispatcher's generic checks, in-process.
@Suite struct OperationTableTests {
    /// Every request kind the wire defines, found from the generated message itself (each field of the
    /// `operation` oneof decoded from an empty submessage), so a kind added to the proto is covered here
    /// without editing this test.
    static let everyKind: [(field: String, request: Registry_V1_Request)] = (1..<200).compactMap { number in
        // Tag: field number, wire type 2 (length-delimited), then length 0.
        var bytes: [UInt8] = []
        var tag = UInt64(number) << 3 | 2
        while tag >= 0x80 {
            bytes.append(UInt8(tag & 0x7F) | 0x80)
            tag >>= 7
        }
        bytes.append(UInt8(tag))
        bytes.append(0)
        guard let request = try? Registry_V1_Request(serializedBytes: bytes), request.operation != nil else { return nil }
        let field = request.textFormatString().split(separator: " ").first.map(String.init) ?? ""
        return (field, request)
    }

    @Test func everyRequestKindIsNamedAsOnTheWireAndOnlyOnce() {
        #expect(Self.everyKind.count == 23)
        var seen: Set<String> = []
        for (field, request) in Self.everyKind {
            let name = type(of: request.operation!.operation).name
            #expect(name == field, "the audit trail and the logs name \(field) '\(name)'")
            #expect(seen.insert(name).inserted, "two request kinds are both named \(name)")
        }
    }

    @Test func eachRequestKindNeedsTheDocumentedRight() {
        // PROTOCOL.md, access: the right each operation needs.
        let expected: [String: OperationClass?] = [
            "hello": nil, "list_galleries": nil, "list_algorithms": nil, "stats": nil,
            "identify": .identify, "authenticate": .identify,
            "register": .enrol, "enrol_liveness_profile": .enrol,
        ]
        for (field, request) in Self.everyKind {
            let right = type(of: request.operation!.operation).right
            #expect(right == (expected[field] ?? .admin), "\(field) needs \(right.map(\.rawValue) ?? "no right")")
        }
    }

    /// The audit trail is for what touches people's data or changes the store: what any peer may ask
    /// (and registryctl's name lookups and the metrics timer ask all the time) is not in it.
    @Test func exactlyTheKindsThatNeedARightAreAudited() {
        let unaudited: Set<String> = ["hello", "list_galleries", "list_algorithms", "stats"]
        for (field, request) in Self.everyKind {
            let audited = type(of: request.operation!.operation).isAudited
            #expect(audited == !unaudited.contains(field), "\(field) is \(audited ? "" : "not ")audited")
        }
    }

    @Test func storeWideKindsNeedTheRightOnEveryGallery() {
        let storeWide: Set<String> = ["hello", "list_galleries", "list_algorithms", "stats", "backup", "verify", "set_encryption_key"]
        for (field, request) in Self.everyKind {
            let scope = request.operation!.operation.scope
            // The audit trail is read gallery by gallery: what the peer is an admin of.
            if field == "audit" {
                #expect(scope == .permittedGalleries)
                continue
            }
            #expect((scope == .store) == storeWide.contains(field), "\(field) works in \(scope)")
            if case .gallery = scope { #expect(scope.galleryName == GalleryConfiguration.defaultName, "an empty gallery is the default one") }
        }
    }
}

/// Access decisions through the dispatcher, with peers made up for the test and a real store.
@Suite struct DispatcherAccessTests {
    /// Default policy: root, the daemon's own user and group registryd-admin; nobody else.
    let fixture: ServerFixture
    var engine: Engine { self.fixture.engine }
    var dispatcher: RequestDispatcher { self.fixture.dispatcher }
    let stranger = Peer(uid: 54_321, gid: 54_321, pid: 4242, groups: [54_321])

    init() throws {
        self.fixture = try ServerFixture("registryd-dispatcher")
    }

    func cleanUp() {
        self.fixture.close()
    }

    func send(_ request: Registry_V1_Request, from peer: Peer?) async throws -> Registry_V1_Response {
        let reply = await self.dispatcher.respond(to: try ByteBuffer(message: request), from: peer)
        return try Registry_V1_Response(serializedBytes: Array(reply.frame.readableBytesView))
    }

    static func registration(_ identifier: String) -> Registry_V1_Request {
        var template = Registry_V1_Template()
        template.algorithm = 24
        template.vector = (0..<128).map { $0 == 7 ? 1 : 0 }
        return .with {
            $0.id = 9
            $0.register = .with {
                $0.identifier = identifier
                $0.face.templates = [template]
            }
        }
    }

    @Test func aPeerWithoutTheRightIsRefusedNothingIsStoredAndTheRefusalIsAudited() async throws {
        defer { self.cleanUp() }
        for peer in [self.stranger, nil] as [Peer?] {
            let response = try await self.send(Self.registration("mallory"), from: peer)
            #expect(response.id == 9)
            guard case .error(let error) = response.result else {
                Issue.record("a peer without the enrol right registered: \(response)")
                continue
            }
            #expect(RegistryError.Code(error.code) == .permissionDenied)
            #expect(error.message.contains("'enrol' right"))
        }
        #expect(try await self.engine.identifiers(gallery: "default", after: nil, limit: 10).identifiers.isEmpty)
        try await self.engine.flushAudit()
        let entries = try await self.engine.auditEntries(AuditQuery(identifier: "mallory"))
        #expect(entries.count == 2)
        #expect(entries.allSatisfy { $0.operation == "register" && $0.outcome == .refused && $0.errorCode == "PERMISSION_DENIED" })
        #expect(entries.contains { $0.uid == 54_321 && $0.pid == 4242 })
    }

    @Test func theSameRequestFromRootIsCarriedOutAndAudited() async throws {
        defer { self.cleanUp() }
        let response = try await self.send(Self.registration("alice"), from: Peer(uid: 0, gid: 0, pid: 1, groups: [0]))
        guard case .register = response.result else {
            Issue.record("root could not register: \(response)")
            return
        }
        #expect(try await self.engine.identifiers(gallery: "default", after: nil, limit: 10).identifiers == ["alice"])
        try await self.engine.flushAudit()
        let entries = try await self.engine.auditEntries(AuditQuery(identifier: "alice"))
        #expect(entries.map(\.outcome) == [.ok])
    }

    @Test func operationsWithoutARightAnswerAnyPeer() async throws {
        defer { self.cleanUp() }
        let stats = try await self.send(.with { $0.stats = .init() }, from: self.stranger)
        guard case .stats(let result) = stats.result else {
            Issue.record("stats refused a connected peer: \(stats)")
            return
        }
        #expect(result.requestsServed == 1)
        let backup = try await self.send(.with { $0.backup = .with { $0.directory = "/tmp/nowhere" } }, from: self.stranger)
        guard case .error(let error) = backup.result else {
            Issue.record("a stranger could back up the store")
            return
        }
        #expect(error.message.contains("on every gallery"))
    }
}
