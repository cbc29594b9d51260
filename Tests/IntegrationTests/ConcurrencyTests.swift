import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Synchronization
import TestSupport
import Testing

/// Pipelining, ordering and many clients at once.
@Suite struct ConcurrencyTests {
    @Test func a1000PipelinedRequestsOnOneConnectionAreAnsweredInOrderWithTheirIds() async throws {
        let daemon = try Daemon()
        let connection = try RawConnection(daemon.socketPath)
        // All 1,000 frames written before any response is read.
        var bytes: [UInt8] = []
        for id in 1...1000 {
            var request = Registry_V1_Request()
            request.id = UInt64(id) * 7  // not simply 1, 2, 3: the ids must be echoed, not counted
            if id.isMultiple(of: 3) {
                request.listGalleries = .init()
            } else {
                request.identify = .with { $0.face = Registry_V1_Face(Face(FaceTemplate(algorithm: 24, vector: axis(id % 128)))) }
            }
            bytes += try RawConnection.frame(request)
        }
        connection.send(bytes)
        for id in 1...1000 {
            let response = try #require(try connection.response(), "response \(id) missing")
            #expect(response.id == UInt64(id) * 7)
            switch response.result {
            case .listGalleries: #expect(id.isMultiple(of: 3))
            case .identify: #expect(!id.isMultiple(of: 3))
            default: Issue.record("unexpected result for \(id): \(String(describing: response.result))")
            }
        }
    }

    @Test func sixtyFourConcurrentClientsGetTheirOwnAnswers() async throws {
        let daemon = try Daemon()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let client = try await daemon.client()
                    let name = "client-\(index)"
                    let face = Face(FaceTemplate(algorithm: 24, vector: axis(index)))
                    let registration = try await client.register(identifier: name, face: face)
                    #expect(registration.stored.first?.identifier == name)
                    for _ in 0..<5 {
                        async let identified = client.identify(face: face, autoEnrol: false)
                        async let authenticated = client.authenticate(identifier: name, face: face, autoEnrol: false)
                        let (identification, authentication) = try await (identified, authenticated)
                        // Only this client's face can match this client's probe.
                        #expect(identification.matches.map(\.identifier) == [name])
                        #expect(authentication.authenticated)
                        #expect(authentication.templateId == registration.stored.first?.id)
                    }
                    await client.close()
                }
            }
            try await group.waitForAll()
        }
        let client = try await daemon.client()
        var all: [String] = []
        var after: String?
        repeat {
            let page = try await client.identifiers(after: after, limit: 50)
            all += page.identifiers
            after = page.next
        } while after != nil
        #expect(Set(all) == Set((0..<64).map { "client-\($0)" }))
        #expect(all.count == 64)
        await client.close()
    }

    @Test func sigtermWithRequestsInFlightKeepsEveryAcknowledgedRegistration() async throws {
        let daemon = try Daemon()
        let acknowledgedSoFar = Counter()
        let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in 0..<8 {
                group.addTask {
                    // A worker that starts after the daemon stopped has nothing acknowledged.
                    guard let client = try? await daemon.client() else { return [] }
                    var mine: [String] = []
                    for index in 0..<16 {
                        let name = "w\(worker)-\(index)"
                        do {
                            _ = try await client.register(
                                identifier: name, face: Face(FaceTemplate(algorithm: 24, vector: axis(worker * 16 + index))))
                            mine.append(name)
                            acknowledgedSoFar.increment()
                        } catch {
                            break  // the daemon went away: later registrations were never acknowledged
                        }
                    }
                    await client.close()
                    return mine
                }
            }
            // Let some registrations through, then stop the daemon while the workers keep sending.
            while acknowledgedSoFar.value < 16 { try await Task.sleep(for: .milliseconds(1)) }
            #expect(daemon.stop(signal: SIGTERM) == 0, "registryd should exit cleanly on SIGTERM")
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(!acknowledged.isEmpty, "some registrations should have been acknowledged before SIGTERM")
        try daemon.start()
        let client = try await daemon.client()
        for name in acknowledged {
            let templates = try await client.templates(identifier: name)
            #expect(templates.count == 1, "\(name) was acknowledged but is missing after the restart")
        }
        let verified = try await client.verify()
        #expect(verified.problems.isEmpty)
        await client.close()
    }
}

/// A thread-safe count shared by test tasks.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { self.count.add(1, ordering: .relaxed) }
    var value: Int { self.count.load(ordering: .relaxed) }
}
