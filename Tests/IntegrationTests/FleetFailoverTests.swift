import Glibc
import RegistryClient
import RegistryModel
import Synchronization
import TestSupport
import Testing

/// Faults of the fleet (docs/fleet.md, "Faults"): its PostgreSQL failing over (a primary with a
/// synchronous standby, the nodes given both; the primary crashes under load and the standby is
/// promoted), a node paused.
@Suite(.serialized) struct FleetFailoverTests {
    /// What the load saw: acknowledged and refused registrations, and each node's first write
    /// acknowledged after the promotion.
    final class Load: Sendable {
        let acknowledged = Mutex<Set<String>>([])
        let refused = Mutex<[String: RegistryError.Code]>([:])
        let other = Mutex<[String]>([])
        let promotedAt = Mutex<ContinuousClock.Instant?>(nil)
        let againAt = Mutex<[Int: ContinuousClock.Instant]>([:])
        let stop = Atomic<Bool>(false)
    }

    @Test
    func aFailoverUnderLoadLosesNoAcknowledgedWriteAndWritesResume() async throws {
        let fleet = try FleetEndToEndTests.Fleet(standby: true)
        let standby = try #require(fleet.standby)
        let nodes = try ["door-1", "desk"].map { try fleet.node($0) }
        let load = Load()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Two clients a node, registering new people until told to stop.
            for worker in 0..<4 {
                group.addTask {
                    let node = worker % 2
                    let client = try await nodes[node].client()
                    var generator = SystemRandomNumberGenerator()
                    var index = 0
                    while !load.stop.load(ordering: .relaxed) {
                        let name = "w\(worker)-\(index)"
                        index += 1
                        do {
                            _ = try await client.register(identifier: name, face: FleetEndToEndTests.face(&generator))
                            load.acknowledged.withLock { _ = $0.insert(name) }
                            if load.promotedAt.withLock({ $0 }) != nil {
                                load.againAt.withLock { if $0[node] == nil { $0[node] = .now } }
                            }
                        } catch let error as RegistryError {
                            load.refused.withLock { $0[name] = error.code }
                            try await Task.sleep(for: .milliseconds(20))
                        } catch {
                            load.other.withLock { $0.append("\(name): \(error)") }
                            try await Task.sleep(for: .milliseconds(20))
                        }
                    }
                    await client.close()
                }
            }
            // Enough acknowledged before the crash for its loss to show (a loaded machine starts slowly).
            let warmed = try await FleetEndToEndTests.within(.seconds(90)) { load.acknowledged.withLock { $0.count } >= 50 }
            let seen =
                "\(load.acknowledged.withLock { $0.count }) acknowledged, \(load.refused.withLock { $0.count }) refused; standbys: "
                + "\(fleet.server.replication); door-1's log: \(nodes[0].log.suffix(2000))"
            #expect(warmed != nil, "fewer than 50 registrations were acknowledged in 90 s before the crash: \(seen)")
            let before = load.acknowledged.withLock { $0.count }
            // The primary crashes; the standby is promoted a moment later, as a failover manager would.
            fleet.server.stop(immediately: true)
            try await Task.sleep(for: .milliseconds(300))
            standby.promote()
            load.promotedAt.withLock { $0 = .now }
            _ = try await FleetEndToEndTests.within(.seconds(15)) { load.againAt.withLock { $0.count } == 2 }
            try await Task.sleep(for: .seconds(1))
            load.stop.store(true, ordering: .relaxed)
            try await group.waitForAll()
            print("fleet failover: \(before) registrations acknowledged before the crash")
        }
        let promoted = try #require(load.promotedAt.withLock { $0 })
        let again = load.againAt.withLock { $0 }
        for node in 0..<2 {
            let took = again[node].map { $0 - promoted }
            #expect(took != nil && took! <= .seconds(5), "node \(node) did not write again within 5 s of the promotion: \(nodes[node].log)")
            print("fleet failover: node \(node) wrote again \(took.map { "\($0)" } ?? "never") after the promotion")
        }
        let acknowledged = load.acknowledged.withLock { $0 }
        let refused = load.refused.withLock { $0 }
        #expect(load.other.withLock { $0 }.isEmpty, "\(load.other.withLock { $0 }.prefix(3))")
        // Converged: every acknowledged registration on both nodes, and nothing refused as not
        // carried out (FLEET_UNAVAILABLE) anywhere.
        let clients = try await nodes.asyncMap { try await $0.client() }
        let converged = try await FleetEndToEndTests.within(.seconds(5)) {
            let held = try await clients.asyncMap { try await identifiersStored(in: $0) }
            return held[0] == held[1] && acknowledged.isSubset(of: held[0])
        }
        let held = try await clients.asyncMap { try await identifiersStored(in: $0) }
        let missing = (acknowledged.subtracting(held[0]).count, acknowledged.subtracting(held[1]).count)
        #expect(converged != nil, "after the failover, acknowledged registrations missing: \(missing.0) on door-1, \(missing.1) on desk")
        #expect(held[0] == held[1], "the nodes disagree after the failover")
        let notCarriedOut = refused.filter { $0.value == .fleetUnavailable }.map(\.key)
        #expect(held[0].intersection(notCarriedOut).isEmpty, "registrations refused with FLEET_UNAVAILABLE are stored")
        let codes = Dictionary(grouping: refused.values, by: { $0 }).mapValues(\.count)
        print(
            "fleet failover: \(acknowledged.count) acknowledged, \(refused.count) refused \(codes), 0 of the acknowledged lost: \(acknowledged.isSubset(of: held[0]) && acknowledged.isSubset(of: held[1]))"
        )
        for client in clients { await client.close() }
    }

    /// A node paused (SIGSTOP, as a host that stalls) while another takes writes: the fleet goes on
    /// without it, and once resumed it applies what it missed and writes again.
    @Test
    func aPausedNodeCatchesUpWhenResumed() async throws {
        let fleet = try FleetEndToEndTests.Fleet()
        let nodes = try ["door-1", "desk"].map { try fleet.node($0) }
        let clients = try await nodes.asyncMap { try await $0.client() }
        var generator = SystemRandomNumberGenerator()
        _ = try await clients[0].register(identifier: "before", face: FleetEndToEndTests.face(&generator))
        #expect(try await FleetEndToEndTests.within(.seconds(2)) { try await identifiersStored(in: clients[1]) == ["before"] } != nil)
        kill(nodes[0].pid, SIGSTOP)
        // Whatever fails below, the node is not left stopped (it could not be stopped for good).
        defer { kill(nodes[0].pid, SIGCONT) }
        var names: Set<String> = ["before"]
        for person in 0..<200 {
            _ = try await clients[1].register(identifier: "p\(person)", face: FleetEndToEndTests.face(&generator))
            names.insert("p\(person)")
        }
        try await Task.sleep(for: .seconds(2))
        kill(nodes[0].pid, SIGCONT)
        let resumed = ContinuousClock.now
        let caughtUp = try await FleetEndToEndTests.within(.seconds(10)) { try await identifiersStored(in: clients[0]) == names }
        #expect(caughtUp != nil, "the resumed node did not have the 200 registrations within 10 s: \(nodes[0].log)")
        print("fleet: a node paused while 200 registrations were made elsewhere had them \(caughtUp.map { "\($0)" } ?? "never") after it resumed")
        _ = try await clients[0].register(identifier: "after", face: FleetEndToEndTests.face(&generator))
        #expect(try await FleetEndToEndTests.within(.seconds(2)) { try await identifiersStored(in: clients[1]).contains("after") } != nil)
        print("fleet: the resumed node wrote again \(ContinuousClock.now - resumed) after it resumed")
        for client in clients { await client.close() }
    }
}
