import Glibc
import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryServer

/// Authentications read by hand (``AuthenticateDecoding``) against the same requests read by
/// SwiftProtobuf: two stores with the same people, one dispatcher each way, the same random
/// requests. Replies must be the same bytes, the audit trails the same entries, the metrics the
/// same counts, including authentications that auto-enrol (they write) and ones refused.
@Suite struct AuthenticatePathsTests {
    static let root = Peer(uid: 0, gid: 0, pid: 7, groups: [0])

    static func vector(_ random: inout SeededRandom, near base: [Float]?, dimension: Int) -> [Float] {
        let raw = (0..<dimension).map { index -> Float in
            let noise = Float(random.uniform() * 2 - 1)
            return (base?[index] ?? 0) + (base == nil ? noise : noise * 0.15)
        }
        let norm = (raw.reduce(0) { $0 + $1 * $1 }).squareRoot()
        return raw.map { $0 / norm }
    }

    static func frame(_ request: Registry_V1_Request) throws -> ByteBuffer {
        try ByteBuffer(message: request)
    }

    /// Metric lines that depend on neither timing nor the disk, sorted.
    static func counts(_ world: ServerFixture) -> [Substring] {
        world.metrics.exposition(engine: world.engine, counters: world.dispatcher.counters).split(separator: "\n").filter {
            // Commits are counted too, and the audit trail's are made on a timer. The prefilter's row
            // counts are the process's (every engine's scans, other tests' included), not this one's.
            !$0.hasPrefix("#") && !$0.contains("_seconds") && !$0.contains("_bytes") && !$0.contains("commit_batch")
                && !$0.contains("prefilter_rows")
        }.sorted()
    }

    @Test func theHandReadAndTheGeneralPathGiveTheSameRepliesAuditAndMetrics() async throws {
        let hand = try ServerFixture("registryd-auth-paths")
        let general = try ServerFixture("registryd-auth-paths", handReadsRequests: false)
        defer {
            hand.close()
            general.close()
        }
        var random = SeededRandom(seed: 0xA17E_2929)
        // 12 people, registered with arcface (24) only, the same in both stores.
        var people: [[Float]] = []
        for index in 0..<12 {
            let vector = Self.vector(&random, near: nil, dimension: 128)
            people.append(vector)
            let request = Registry_V1_Request.with {
                $0.id = UInt64(index + 1)
                $0.register = .with {
                    $0.identifier = "person-\(index)"
                    $0.face.templates = [
                        .with {
                            $0.algorithm = 24
                            $0.vector = vector
                        }
                    ]
                    $0.force = true
                }
            }
            // Registrations are read by hand too (RegisterDecoding) on one side: the same replies but
            // for the registration times, which are each store's clock.
            #expect(RegisterDecoding.decode(try Self.frame(request)) != nil)
            var replies: [Registry_V1_Response] = []
            for world in [hand, general] {
                let reply = await world.dispatcher.respond(to: try Self.frame(request), from: Self.root)
                var response = try Registry_V1_Response(serializedBytes: Array(reply.frame.readableBytesView))
                guard case .register = response.result else { throw RegistryError(.internal, "registration failed: \(response)") }
                for index in response.register.stored.indices { response.register.stored[index].registeredAtMicros = 0 }
                replies.append(response)
            }
            #expect(replies[0] == replies[1], "registration \(index): the two paths replied differently")
        }
        // Registrations refused: the same face under another name, a bad gallery, no face, a
        // template of another length. The same refusal both ways.
        let changes: [(inout Registry_V1_RegisterRequest) -> Void] = [
            { $0.identifier = "someone-else" }, { $0.gallery = "Bad Name!" }, { $0.face = .init() },
            { $0.face.templates[0].vector = [1, 0] },
        ]
        for (index, change) in changes.enumerated() {
            var register = Registry_V1_RegisterRequest.with {
                $0.identifier = "person-0"
                $0.face.templates = [
                    .with {
                        $0.algorithm = 24
                        $0.vector = people[0]
                    }
                ]
            }
            change(&register)
            let frame = try Self.frame(
                .with {
                    $0.id = UInt64(50 + index)
                    $0.register = register
                })
            let expected = await general.dispatcher.respond(to: frame, from: Self.root)
            let actual = await hand.dispatcher.respond(to: frame, from: Self.root)
            #expect(actual == expected, "refused registration \(index): the two paths replied differently")
        }
        var sent = 0
        var enrolling = 0
        for id in 100..<400 {
            let person = Int.random(in: 0..<people.count, using: &random)
            let claimed = Int.random(in: 0..<5, using: &random) == 0 ? Int.random(in: 0..<14, using: &random) : person
            let request = Registry_V1_Request.with {
                $0.id = UInt64(id)
                $0.authenticate = .with {
                    if Int.random(in: 0..<8, using: &random) == 0 { $0.gallery = ["default", "nope", "Bad Name!"].randomElement(using: &random)! }
                    $0.identifier = "person-\(claimed)"
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: $0.autoEnrol = false
                    case 1: $0.autoEnrol = true
                    default: break  // not said: on
                    }
                    $0.face.templates = [
                        .with {
                            $0.algorithm = 24
                            $0.vector = Self.vector(&random, near: people[person], dimension: 128)
                        }
                    ]
                    // Some carry a dlib template too, which auto-enrolment may store.
                    if Int.random(in: 0..<3, using: &random) == 0 {
                        $0.face.templates.append(
                            .with {
                                $0.algorithm = 16
                                $0.vector = Self.vector(&random, near: nil, dimension: 128)
                            })
                    }
                    if Int.random(in: 0..<25, using: &random) == 0 { $0.face.templates = [] }
                }
            }
            let frame = try Self.frame(request)
            #expect(AuthenticateDecoding.decode(frame) != nil, "request \(id) does not have the usual shape")
            let expected = await general.dispatcher.respond(to: frame, from: Self.root)
            let actual = await hand.dispatcher.respond(to: frame, from: Self.root)
            #expect(actual == expected, "request \(id): the two paths replied differently")
            let response = try Registry_V1_Response(serializedBytes: Array(actual.frame.readableBytesView))
            if case .authenticate(let result) = response.result, result.autoEnrolment.contains(where: { $0.status == .enrolled }) { enrolling += 1 }
            sent += 1
        }
        #expect(enrolling > 0, "no authentication auto-enrolled: the write path was not compared")
        // Refusals beyond the first of their kind are in the trail once summarised (RefusalSummary).
        hand.dispatcher.refusals.flush()
        general.dispatcher.refusals.flush()
        let query = AuditQuery(limit: 10_000)
        let strip = { (entry: AuditEntry) -> AuditEntry in
            var entry = entry
            entry.time = 0
            return entry
        }
        let handTrail = try await hand.engine.auditEntries(query).map(strip)
        let generalTrail = try await general.engine.auditEntries(query).map(strip)
        #expect(handTrail.reduce(0) { $0 + Int($1.count) } >= sent)
        #expect(handTrail == generalTrail, "the audit trails differ")
        #expect(Self.counts(hand) == Self.counts(general), "the metrics differ")
    }
}
