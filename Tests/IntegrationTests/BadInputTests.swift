import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

/// Every bad input gets its error code, the daemon keeps serving other clients, the store is unchanged.
@Suite struct BadInputTests {
    /// A second client that must keep working whatever the first one does.
    private func expectStillServing(_ daemon: Daemon, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let client = try await daemon.client()
        let galleries = try await client.galleries()
        #expect(galleries.map(\.name).contains("default"), sourceLocation: sourceLocation)
        await client.close()
    }

    private func request(_ id: UInt64, _ operation: Registry_V1_Request.OneOf_Operation) -> Registry_V1_Request {
        var request = Registry_V1_Request()
        request.id = id
        request.operation = operation
        return request
    }

    @Test func aZeroLengthFrameIsMalformedAndTheConnectionKeepsWorking() async throws {
        let daemon = try Daemon()
        let connection = try RawConnection(daemon.socketPath)
        connection.send([0, 0, 0, 0])
        let response = try #require(try connection.response())
        #expect(response.id == 0)
        #expect(response.error.code == .malformedRequest)
        connection.send(try RawConnection.frame(self.request(5, .listGalleries(.init()))))
        #expect(try connection.response()?.id == 5)
    }

    @Test func garbageBytesAreMalformedAndTheConnectionKeepsWorking() async throws {
        let daemon = try Daemon()
        let connection = try RawConnection(daemon.socketPath)
        connection.send(RawConnection.frame([0xFF, 0xFF, 0xFF, 0x07, 0x01, 0x02]))
        let response = try #require(try connection.response())
        #expect(response.error.code == .malformedRequest)
        connection.send(try RawConnection.frame(self.request(6, .listGalleries(.init()))))
        #expect(try connection.response()?.id == 6)
    }

    @Test func aValidRequestWithNoOperationIsMalformedWithItsId() async throws {
        let daemon = try Daemon()
        let connection = try RawConnection(daemon.socketPath)
        var empty = Registry_V1_Request()
        empty.id = 42
        connection.send(try RawConnection.frame(empty))
        let response = try #require(try connection.response())
        #expect(response.id == 42)
        #expect(response.error.code == .malformedRequest)
    }

    @Test func aLengthPrefixAboveTheMaximumIsRefusedAndTheConnectionClosed() async throws {
        let daemon = try Daemon(arguments: ["--maximum-frame-bytes", "65536"])
        let connection = try RawConnection(daemon.socketPath)
        connection.send([0x7F, 0xFF, 0xFF, 0xFF])  // announces 2 GB, sends nothing more
        let response = try #require(try connection.response(), "the refusal must come without waiting for the body")
        #expect(response.error.code == .frameTooLarge)
        #expect(connection.isClosedByPeer())
        // Exactly at the maximum is fine (an import of one big template would be).
        let ok = try RawConnection(daemon.socketPath)
        ok.send(RawConnection.frame([UInt8](repeating: 0, count: 65536 - 2) + [0x08, 0x01]))
        #expect(try ok.response() != nil)
        try await self.expectStillServing(daemon)
    }

    @Test func aTruncatedFrameGetsNoAnswerAndHarmsNobody() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(1))))
        let connection = try RawConnection(daemon.socketPath, timeoutSeconds: 1)
        let frame = try RawConnection.frame(
            self.request(
                9,
                .register(
                    .with {
                        $0.identifier = "mallory"
                        $0.face = Registry_V1_Face(Face(FaceTemplate(algorithm: 24, vector: axis(2))))
                    })))
        connection.send(Array(frame.prefix(frame.count / 2)))
        #expect(try connection.response() == nil, "half a frame must not be answered")
        // The client disconnects mid-request: nothing of it may be stored.
        connection.disconnect()
        try await self.expectStillServing(daemon)
        do {
            _ = try await client.templates(identifier: "mallory")
            Issue.record("a truncated registration was stored")
        } catch let error as RegistryError {
            #expect(error.code == .identifierNotRegistered)
        }
        #expect(try await client.verify().problems.isEmpty)
        await client.close()
    }

    @Test func aClientThatDisconnectsRightAfterAWholeRequestLeavesNoPartialWrite() async throws {
        let daemon = try Daemon()
        for index in 0..<20 {
            let connection = try RawConnection(daemon.socketPath)
            connection.send(
                try RawConnection.frame(
                    self.request(
                        1,
                        .register(
                            .with {
                                $0.identifier = "gone-\(index)"
                                $0.face = Registry_V1_Face(
                                    Face(
                                        FaceTemplate(algorithm: 24, vector: axis(index)), FaceTemplate(algorithm: 16, vector: axis(index + 64))))
                            }))))
            connection.disconnect()  // before the answer
        }
        usleep(300_000)
        let client = try await daemon.client()
        // Each registration is either wholly stored (both registries) or absent.
        for index in 0..<20 {
            do {
                let templates = try await client.templates(identifier: "gone-\(index)")
                #expect(templates.map(\.algorithm).sorted() == [16, 24])
            } catch let error as RegistryError where error.code == .identifierNotRegistered {
                // Absent as a whole: the daemon may not have read the request before the client left.
            }
        }
        #expect(try await client.verify().problems.isEmpty)
        await client.close()
    }

    @Test func aSilentClientIsClosedAfterTheIdleTimeout() async throws {
        let daemon = try Daemon(arguments: ["--idle-timeout", "1"])
        let connection = try RawConnection(daemon.socketPath, timeoutSeconds: 5)
        let start = Date.now
        #expect(connection.isClosedByPeer())
        let waited = Date.now.timeIntervalSince(start)
        #expect(waited >= 0.8 && waited < 4, "closed after \(waited) s")
        // Other clients are still served. A raw connection sends at once: with a 1 s idle timeout, a
        // client library connecting on a loaded machine could itself be idle long enough to be closed.
        let other = try RawConnection(daemon.socketPath)
        other.send(try RawConnection.frame(self.request(4, .listGalleries(.init()))))
        #expect(try other.response()?.id == 4)
    }

    @Test func anUnsupportedProtocolVersionIsRefusedAndTheConnectionClosed() async throws {
        let daemon = try Daemon()
        let connection = try RawConnection(daemon.socketPath)
        connection.send(try RawConnection.frame(self.request(3, .hello(.with { $0.protocolMajor = 2 }))))
        let response = try #require(try connection.response())
        #expect(response.id == 3)
        #expect(response.error.code == .unsupportedVersion)
        #expect(connection.isClosedByPeer())
    }

    @Test func aTemplateWithBothAVectorAndLandmarksIsMalformed() async throws {
        let daemon = try Daemon()
        let connection = try RawConnection(daemon.socketPath)
        connection.send(
            try RawConnection.frame(
                self.request(
                    8,
                    .register(
                        .with {
                            $0.identifier = "x"
                            $0.face.templates = [
                                .with {
                                    $0.algorithm = 1000
                                    $0.vector = [1, 2, 3]
                                    $0.landmarks = [.with { $0.name = "NOSE_TIP" }]
                                }
                            ]
                        }))))
        let response = try #require(try connection.response())
        #expect(response.id == 8)
        #expect(response.error.code == .malformedRequest)
    }

    @Test func invalidRequestsGetTheirCodesAndChangeNothing() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        _ = try await client.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: axis(0))))
        let before = try await client.export().templates
        var nan = axis(3)
        nan[7] = .nan
        let cases: [(String, RegistryError.Code, () async throws -> Void)] = [
            (
                "unknown gallery", .unknownGallery,
                { _ = try await client.register(gallery: "nowhere", identifier: "x", face: Face(FaceTemplate(algorithm: 24, vector: axis(3)))) }
            ),
            (
                "unknown algorithm", .unknownAlgorithm,
                { _ = try await client.register(identifier: "x", face: Face(FaceTemplate(algorithm: 77, vector: axis(3)))) }
            ),
            (
                "wrong dimension", .invalidTemplate,
                { _ = try await client.register(identifier: "x", face: Face(FaceTemplate(algorithm: 24, vector: [1, 0, 0]))) }
            ),
            ("NaN", .invalidTemplate, { _ = try await client.register(identifier: "x", face: Face(FaceTemplate(algorithm: 24, vector: nan))) }),
            (
                "empty identifier", .malformedRequest,
                { _ = try await client.register(identifier: "", face: Face(FaceTemplate(algorithm: 24, vector: axis(3)))) }
            ),
            (
                "over-long identifier", .malformedRequest,
                {
                    _ = try await client.register(
                        identifier: String(repeating: "x", count: 257), face: Face(FaceTemplate(algorithm: 24, vector: axis(3))))
                }
            ),
            ("no templates", .malformedRequest, { _ = try await client.identify(face: Face(templates: [])) }),
        ]
        for (name, code, call) in cases {
            do {
                try await call()
                Issue.record("\(name): expected \(code.rawValue)")
            } catch let error as RegistryError {
                #expect(error.code == code, "\(name): got \(error)")
            }
        }
        // The NaN case carries its problem, without the template's values.
        do {
            _ = try await client.register(identifier: "x", face: Face(FaceTemplate(algorithm: 24, vector: nan)))
        } catch let error as RegistryError {
            guard case .invalidTemplate(let algorithm, let problem) = error.details else {
                Issue.record("no template problem")
                return
            }
            #expect(algorithm == 24)
            #expect(problem == .nonFiniteValue(index: 7))
        }
        #expect(try await client.export().templates == before)
        await client.close()
        #expect(!daemon.log.contains("nan"), "template values must not reach the log")
    }
}
