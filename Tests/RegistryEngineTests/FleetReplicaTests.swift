import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// A store as a fleet replica (docs/fleet.md): the positions of the log it applied, recorded with
/// the writes, contiguous whatever fails; nothing written outside the log; joining refused to stores
/// that cannot join.
@Suite struct FleetReplicaTests {
    /// Registers `identifier` as the entry at `position` would, and returns the outcome.
    static func apply(
        _ engine: Engine, position: Int64, previous: Int64? = nil, identifier: String, face: Face
    ) async -> Result<Registration, any Error> {
        await withCheckedContinuation { continuation in
            FleetApplication.$current.withValue(FleetApplication(position: position, previous: previous ?? position - 1) {}) {
                engine.register(
                    identifier: identifier, face: face, force: false, completion: CompletionClosure { continuation.resume(returning: $0) })
            }
        }
    }

    static func face(_ flipped: Set<Int>) -> Face { Face(arcface(flipped)) }

    @Test func positionsAreRecordedWithTheirWritesAndOnlyInOrder() async throws {
        try await withEngine { engine in
            try await engine.joinFleet(id: 42)
            #expect(try engine.fleetPosition() == 0)
            // Applied: recorded.
            _ = try await Self.apply(engine, position: 1, identifier: "alice", face: Self.face([])).get()
            #expect(try engine.fleetPosition() == 1)
            // Refused as on every replica (a similar face): recorded as applied, nothing stored.
            let similar = await Self.apply(engine, position: 2, identifier: "bob", face: Self.face([0]))
            #expect((try? similar.get()) == nil)
            #expect(Engine.failsEverywhere(similar.failure!))
            #expect(try engine.fleetPosition() == 2)
            // A position that does not follow the last: refused, nothing stored, nothing recorded.
            let gap = await Self.apply(engine, position: 4, identifier: "carol", face: Self.face(flips(0, 8)))
            #expect((gap.failure as? RegistryError)?.code == .internal)
            #expect(!Engine.failsEverywhere(gap.failure!))
            #expect(try engine.fleetPosition() == 2)
            #expect(try await engine.identifiers().identifiers == ["alice"])
            // The same entry applied again (a restart that had not recorded it): refused as a gap.
            let again = await Self.apply(engine, position: 1, identifier: "alice", face: Self.face([]))
            #expect((again.failure as? RegistryError)?.code == .internal)
            // Position 3 then goes in.
            _ = try await Self.apply(engine, position: 3, identifier: "carol", face: Self.face(flips(0, 8))).get()
            #expect(try engine.fleetPosition() == 3)
            // Positions with a gap (values of the log's sequence that rolled back, or that a failover
            // skipped): the entry the log holds after 3 is 7, and it goes in as such.
            _ = try await Self.apply(engine, position: 7, previous: 3, identifier: "dave", face: Self.face(flips(8, 8))).get()
            #expect(try engine.fleetPosition() == 7)
            // But not one read after an entry this store never applied, nor one at or before its last.
            let skipped = await Self.apply(engine, position: 9, previous: 8, identifier: "erin", face: Self.face(flips(0, 4).union(flips(8, 4))))
            #expect((skipped.failure as? RegistryError)?.code == .internal)
            let behind = await Self.apply(engine, position: 7, previous: 7, identifier: "erin", face: Self.face(flips(0, 4).union(flips(8, 4))))
            #expect((behind.failure as? RegistryError)?.code == .internal)
            #expect(try engine.fleetPosition() == 7)
            #expect(try await engine.identifiers().identifiers == ["alice", "carol", "dave"])
        }
    }

    @Test func aReplicaWritesNothingOutsideTheLogButItsHousekeeping() async throws {
        try await withEngine { engine in
            try await engine.joinFleet(id: 7)
            let refused = await #expect(throws: RegistryError.self) {
                _ = try await engine.register(identifier: "alice", face: Self.face([]))
            }
            #expect(refused?.code == .internal)
            #expect(try await engine.identifiers().identifiers.isEmpty)
            // Verify is the node's own: allowed.
            _ = try await engine.verify()
            #expect(try engine.fleetMembership() == FleetMembership(fleetId: 7, position: 0, holdsStandaloneData: false))
        }
    }

    @Test func storesThatCannotJoinAreRefusedWithWhatToDo() async throws {
        try await withEngine { engine in
            _ = try await engine.register(identifier: "alice", face: Self.face([]))
            #expect(try engine.fleetMembership().holdsStandaloneData)
            let error = await #expect(throws: RegistryError.self) { try await engine.joinFleet(id: 1) }
            #expect(error?.message.contains("registryctl export --all") == true)
        }
        try await withEngine { engine in
            try await engine.joinFleet(id: 1)
            try await engine.joinFleet(id: 1)  // the same fleet again: fine
            let error = await #expect(throws: RegistryError.self) { try await engine.joinFleet(id: 2) }
            #expect(error?.message.contains("another fleet") == true)
        }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
