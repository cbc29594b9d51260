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
///
/// The code is the one source of what each kind needs: the operations say their name, right, scope
/// and audit, and ``OperationTable`` collects them. These tests take the list of kinds from
/// proto/registry.proto itself, so that a kind added there cannot be left out of the table, and hold
/// the documentation's copies (docs/operations.md's table, docs/security.md's list of rights,
/// PROTOCOL.md's list of requests) to the code, so that one changed without the other fails here.
@Suite struct OperationTableTests {
    /// The fields of `Request`'s `operation` oneof as proto/registry.proto declares them, in its order.
    static let declared: [(name: String, number: Int)] = {
        let lines = readFileText(repositoryPath("proto/registry.proto")).split(separator: "\n").map { line in
            // Without its comment: a field line is `Type name = number;`.
            line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false)[0].split(separator: " ")
        }
        guard let message = lines.firstIndex(where: { $0 == ["message", "Request", "{"] }),
            let oneof = lines[message...].firstIndex(where: { $0 == ["oneof", "operation", "{"] })
        else { return [] }
        return lines[(oneof + 1)...].prefix { $0 != ["}"] }.compactMap { words in
            guard words.count == 4, words[2] == "=", words[3].hasSuffix(";"), let number = Int(words[3].dropLast()) else { return nil }
            return (String(words[1]), number)
        }
    }()

    /// The table the dispatcher builds.
    static let table = OperationTable(metrics: ServerMetrics())

    /// The request of each declared kind, as the generated code decodes its field (an empty
    /// submessage), with the field's name as the generated code spells it.
    static let everyKind: [(field: String, number: Int, request: Registry_V1_Request)] = Self.declared.compactMap { kind in
        // Tag: field number, wire type 2 (length-delimited), then length 0.
        var bytes: [UInt8] = []
        var tag = UInt64(kind.number) << 3 | 2
        while tag >= 0x80 {
            bytes.append(UInt8(tag & 0x7F) | 0x80)
            tag >>= 7
        }
        bytes.append(UInt8(tag))
        bytes.append(0)
        guard let request = try? Registry_V1_Request(serializedBytes: bytes), request.operation != nil else { return nil }
        let field = request.textFormatString().split(separator: " ").first.map(String.init) ?? ""
        return (field, kind.number, request)
    }

    /// The generated code and the table know every kind the proto declares, under its name and
    /// number: a kind added to the proto without regenerating, or numbered past what the table looks
    /// at (``OperationTable/highestFieldNumber``), fails here.
    @Test func theTableHoldsEveryKindTheProtoDeclares() throws {
        try #require(Self.declared.count > 1, "no request kinds read from proto/registry.proto")
        #expect(Set(Self.declared.map(\.name)).count == Self.declared.count, "two request kinds share a name")
        #expect(Self.everyKind.map(\.field) == Self.declared.map(\.name), "the generated Request is not the proto's")
        #expect(Self.table.numbers == Self.declared.map(\.number).sorted())
        for kind in Self.declared {
            #expect(Self.table[kind.number]?.name == kind.name, "field \(kind.number) is \(kind.name) in the proto")
        }
    }

    @Test func everyRequestKindIsNamedAsOnTheWire() {
        for (field, _, request) in Self.everyKind {
            let name = type(of: request.operation!.operation).name
            #expect(name == field, "the audit trail and the logs name \(field) '\(name)'")
        }
    }

    /// The audit trail is for what touches people's data or changes the store: what any peer may ask
    /// (and registryctl's name lookups and the metrics timer ask all the time) is not in it.
    @Test func exactlyTheKindsThatNeedARightAreAudited() {
        for (field, _, request) in Self.everyKind {
            let operation = type(of: request.operation!.operation)
            #expect(operation.isAudited == (operation.right != nil), "\(field) is \(operation.isAudited ? "" : "not ")audited")
        }
    }

    /// A kind that works in one gallery takes the default gallery when the request names none.
    @Test func anEmptyGalleryIsTheDefaultOne() {
        for (field, _, request) in Self.everyKind {
            let scope = request.operation!.operation.scope
            if case .gallery = scope { #expect(scope.galleryName == GalleryConfiguration.defaultName, "\(field) works in \(scope)") }
        }
    }

    // MARK: The documentation

    /// A right as the documentation writes it ("–": any connected peer).
    static func documented(_ right: OperationClass?) -> String { right?.rawValue ?? "–" }

    /// A scope as docs/operations.md's table writes it.
    static func documented(_ wholeStore: OperationScope?) -> String {
        switch wholeStore {
        case nil, .gallery: "gallery"
        case .store: "store"
        case .permittedGalleries: "its galleries"
        }
    }

    /// docs/operations.md, *The operations at a glance*: one row per kind, in the proto's order, with
    /// the kind's right, scope and whether it is audited as the code has them. (Its `writes` column
    /// says what the code has no property for, and is not compared.)
    @Test func theOperationsTableOfTheDocsIsTheCodes() throws {
        let text = readFileText(repositoryPath("docs/operations.md"))
        let table = try #require(markdownTable(in: text, under: "## The operations at a glance"), "docs/operations.md has no table of operations")
        #expect(table.header == ["operation", "right", "scope", "writes", "audit records"])
        #expect(table.rows.map { $0.first ?? "" } == Self.declared.map { "`\($0.name)`" }, "the docs' operations are not the proto's")
        for (row, (field, number, request)) in zip(table.rows, Self.everyKind) {
            guard row.count == table.header.count else {
                Issue.record("the docs' row of \(field) has \(row.count) cells")
                continue
            }
            let operation = type(of: request.operation!.operation)
            let kind = try #require(Self.table[number])
            #expect(row[1] == Self.documented(kind.right), "\(field) needs \(Self.documented(kind.right)), the docs say \(row[1])")
            #expect(row[2] == Self.documented(kind.wholeStore), "\(field) works in \(Self.documented(kind.wholeStore)), the docs say \(row[2])")
            #expect((row[4] == "nothing (not audited)") == !operation.isAudited, "\(field) is \(operation.isAudited ? "" : "not ")audited")
        }
    }

    /// docs/security.md, *The access policy*: the operations under each right, and under "none".
    @Test func theRightsListedInTheSecurityDocsAreTheCodes() throws {
        let text = readFileText(repositoryPath("docs/security.md"))
        let section = try #require(text.split(separator: "## ").first { $0.hasPrefix("The access policy\n") }, "no access policy section")
        // Its bullets, each joined with the lines that continue it.
        var bullets: [String] = []
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("- ") {
                bullets.append(String(line.dropFirst(2)))
            } else if line.hasPrefix("  "), !bullets.isEmpty {
                bullets[bullets.count - 1] += " " + line.drop { $0 == " " }
            } else if !bullets.isEmpty {
                break
            }
        }
        var documented: [String: Set<String>] = [:]
        for bullet in bullets {
            // "`admin`: what it covers: list_identifiers, …;": the right, then the names after the last colon.
            let right = bullet.prefix { $0 != ":" }.filter { $0 != "`" }
            let names = bullet.split(separator: ": ").last.map { $0.trimmingSuffix(";.") } ?? ""
            documented[right] = Set(names.split(separator: ", ").map(String.init))
        }
        var expected: [String: Set<String>] = [:]
        for kind in Self.declared {
            let right = Self.table[kind.number]?.right
            expected[right?.rawValue ?? "none", default: []].insert(kind.name)
        }
        #expect(documented == expected)
    }

    /// PROTOCOL.md §4: every request field, with its number.
    @Test func theRequestsListedInTheProtocolAreTheProtos() {
        let text = readFileText(repositoryPath("PROTOCOL.md"))
        let table = markdownTable(in: text, under: "## 4. Operations")
        let listed = (table?.rows ?? []).map { $0.first ?? "" }.sorted()
        #expect(listed == Self.declared.map { "`\($0.name)` (\($0.number))" }.sorted())
    }
}

extension Substring {
    /// Without the characters of `characters` at its end.
    fileprivate func trimmingSuffix(_ characters: String) -> String {
        var text = self
        while let last = text.last, characters.contains(last) { text = text.dropLast() }
        return String(text)
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
