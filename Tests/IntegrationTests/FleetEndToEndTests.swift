import Glibc
import RegistryClient
import RegistryModel
import Synchronization
import TestSupport
import Testing

/// Several `registryd` in fleet mode on one machine with a real PostgreSQL (docs/fleet.md): what a
/// site with door terminals and an enrolment desk relies on, checked through the daemons' sockets.
@Suite(.serialized) struct FleetEndToEndTests {
    /// A PostgreSQL of its own, a fleet key, and nodes started on it.
    final class Fleet: @unchecked Sendable {
        let server: TestPostgres
        let directory: String
        let keyPath: String
        /// The `fleet` section's compaction settings every node gets (nil: the defaults, a minute
        /// and a week, under which no test sees a compaction).
        let compaction: (seconds: Int, retentionSeconds: Int)?
        /// A streaming standby of ``server`` that every commit waits for, when asked for: the URL
        /// then names both, the primary first.
        let standby: TestPostgres?

        init(compaction: (seconds: Int, retentionSeconds: Int)? = nil, standby: Bool = false) throws {
            self.server = try TestPostgres()
            if standby {
                self.standby = try TestPostgres(standbyOf: self.server)
                self.server.requireSynchronousStandby()
            } else {
                self.standby = nil
            }
            self.directory = TemporaryDirectory("registry-fleet").path
            self.keyPath = self.directory + "/fleet.key"
            self.compaction = compaction
            try Self.writeKey(to: self.keyPath)
        }

        /// The fleet URL the nodes get.
        var url: String {
            guard let standby else { return self.server.url() }
            return "postgresql://postgres@/registry?host=\(self.server.socketDirectory),\(standby.socketDirectory)&port=\(self.server.port)"
        }

        /// A random key, as 64 hexadecimal characters, in a file of its own (0600).
        static func writeKey(to path: String) throws {
            var generator = SystemRandomNumberGenerator()
            let key = hex((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }) + "\n"
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            defer { if fd >= 0 { close(fd) } }
            guard fd >= 0, write(fd, key, key.utf8.count) == key.utf8.count else { throw HarnessError("cannot write a key to \(path)") }
        }

        func node(_ name: String, keyPath: String? = nil) throws -> Daemon {
            try Daemon(arguments: self.arguments(name, keyPath: keyPath))
        }

        func arguments(_ name: String, keyPath: String? = nil) -> [String] {
            var arguments = ["--fleet", self.url, "--node", name, "--fleet-key", keyPath ?? self.keyPath, "--log-level", "info"]
            if let compaction {
                // The settings only a configuration file carries; the command line gives the rest.
                let path = "\(self.directory)/\(name).json"
                let json =
                    #"{"fleet": {"url": "x", "node": "x", "compactionSeconds": \#(compaction.seconds), "retentionSeconds": \#(compaction.retentionSeconds)}}"#
                _ = json.withCString { text in
                    let file = fopen(path, "w")
                    defer { fclose(file) }
                    return fputs(text, file)
                }
                arguments += ["--config", path]
            }
            return arguments
        }

        /// What the database says, one value (psql, as `postgres`).
        func query(_ sql: String) -> String { self.server.psql(sql) }

        /// Another random key, in a file of its own.
        func otherKey() throws -> String {
            let path = self.directory + "/other.key"
            try Self.writeKey(to: path)
            return path
        }

        deinit {
            self.standby?.remove()
            self.server.remove()
            _ = system("rm -rf '\(self.directory)'")
        }
    }

    final class Names: Sendable {
        let set = Mutex<Set<String>>([])
    }

    /// A random unit-free vector of algorithm 24: two of them are never similar.
    static func face(_ generator: inout some RandomNumberGenerator) -> Face {
        Face(FaceTemplate(algorithm: 24, vector: (0..<128).map { _ in Float.random(in: -1...1, using: &generator) }))
    }

    /// Registers `name` through `client` with a random face, and returns the first four values of
    /// its template as stored (what the erasure checks search data files and dumps for).
    static func register(_ name: String, on client: RegistryConnection, _ generator: inout some RandomNumberGenerator) async throws -> [UInt8] {
        _ = try await client.register(identifier: name, face: Self.face(&generator))
        let template = try #require(try await client.templates(identifier: name, includeData: true).first)
        guard case .vector(let vector) = template.template?.data else { throw HarnessError("no values") }
        return Array(vector.prefix(4)).withUnsafeBytes { Array($0) }
    }

    /// How long until `node` (through `client`) holds exactly `expected` (nil: not within 10 s);
    /// a failure to ask carries the node's log.
    static func holds(_ expected: Set<String>, _ node: Daemon, _ client: RegistryConnection) async throws -> Duration? {
        do {
            return try await Self.within(.seconds(10)) { try await identifiersStored(in: client) == expected }
        } catch {
            throw HarnessError("\(error); the node's log: \(node.log)")
        }
    }

    /// Polls `condition` every 20 ms until it holds or `limit` passes; how long it took (nil: never).
    static func within(_ limit: Duration, _ condition: () async throws -> Bool) async throws -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < limit {
            if try await condition() { return ContinuousClock.now - start }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await condition() ? ContinuousClock.now - start : nil
    }

    @Test
    func registrationsReachEveryNodeAndTheWriterReadsItsOwn() async throws {
        let fleet = try Fleet()
        let nodes = try ["door-1", "door-2", "desk"].map { try fleet.node($0) }
        let clients = try await nodes.asyncMap { try await $0.client() }
        var generator = SystemRandomNumberGenerator()
        var names: Set<String> = []
        for person in 0..<300 {
            let face = Self.face(&generator)
            _ = try await clients[2].register(identifier: "p\(person)", face: face)
            names.insert("p\(person)")
            if person % 10 == 0 {
                // Read-your-writes on the node that wrote: found at once.
                let found = try await clients[2].identify(face: face, autoEnrol: false)
                #expect(found.matches.first?.identifier == "p\(person)")
            }
        }
        for index in 0..<2 {
            let took = try await Self.within(.seconds(1)) { try await identifiersStored(in: clients[index]) == names }
            #expect(took != nil, "node \(index) did not have the 300 registrations within 1 s")
            print("fleet: 300 registrations on desk were on \(nodes[index].socketPath) \(took.map { "\($0)" } ?? "never") after the last reply")
        }
        // The replicas agree on every template: its id, its registration time (the entry's commit
        // time, not each node's clock when it applied it), its data.
        for person in stride(from: 0, to: 300, by: 37) {
            let copies = try await clients.asyncMap { try await $0.templates(identifier: "p\(person)", includeData: true) }
            #expect(copies[0].count == 1 && copies[0] == copies[1] && copies[1] == copies[2], "p\(person): the nodes hold different templates")
        }
        // registryctl status shows where each node is: everything applied, the database reachable.
        struct Status: Decodable {
            struct Fleet: Decodable {
                let node: String
                let appliedPosition: UInt64
                let headPosition: UInt64
                let lagEntries: UInt64
                let databaseReachable: Bool
                let fleetId: String
            }
            let fleet: Fleet?
        }
        let statuses = try nodes.map { try Registryctl($0).json(Status.self, ["status"]).fleet }
        #expect(statuses.map { $0?.node } == ["door-1", "door-2", "desk"])
        // 300 registrations and the galleries each node proposed: one position for all.
        #expect(Set(statuses.map { $0?.appliedPosition }).count == 1 && (statuses[0]?.appliedPosition ?? 0) >= 300)
        #expect(statuses.allSatisfy { $0?.lagEntries == 0 && $0?.databaseReachable == true && $0?.fleetId.count == 16 })
        let standalone = try Daemon()
        #expect(try Registryctl(standalone).json(Status.self, ["status"]).fleet == nil)
        for client in clients { await client.close() }
    }

    @Test
    func oneFaceRegisteredOnThreeNodesAtOnceIsStoredOnce() async throws {
        let fleet = try Fleet()
        let nodes = try ["door-1", "door-2", "desk"].map { try fleet.node($0) }
        let clients = try await nodes.asyncMap { try await $0.client() }
        var generator = SystemRandomNumberGenerator()
        for trial in 0..<30 {
            let face = Self.face(&generator)
            let outcomes = await withTaskGroup(of: String.self) { group in
                for (index, client) in clients.enumerated() {
                    group.addTask {
                        do {
                            _ = try await client.register(identifier: "t\(trial)-n\(index)", face: face)
                            return "stored"
                        } catch let error as RegistryError {
                            return error.code.rawValue
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                return await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(outcomes.sorted() == ["SIMILAR_FACE_REGISTERED", "SIMILAR_FACE_REGISTERED", "stored"], "trial \(trial): \(outcomes)")
        }
        // The nodes agree: the same 30 identifiers everywhere, the face of each found as it.
        let everywhere = try await clients.asyncMap { try await identifiersStored(in: $0) }
        #expect(everywhere[0].count == 30 && everywhere[0] == everywhere[1] && everywhere[1] == everywhere[2])
        for client in clients { await client.close() }
    }

    @Test
    func deletionsReachEveryNodeAndLeaveNoTemplateInAnyStoreOrInTheDatabase() async throws {
        // Compaction every second: the deleted templates' entries leave the log too.
        let fleet = try Fleet(compaction: (seconds: 1, retentionSeconds: 3600))
        let nodes = try ["door-1", "door-2", "desk"].map { try fleet.node($0) }
        let clients = try await nodes.asyncMap { try await $0.client() }
        var generator = SystemRandomNumberGenerator()
        var values: [String: [UInt8]] = [:]
        for person in 0..<40 { values["p\(person)"] = try await Self.register("p\(person)", on: clients[2], &generator) }
        let deleted = (0..<20).map { "p\($0)" }
        let kept = (20..<40).map { "p\($0)" }
        _ = try await Self.within(.seconds(2)) {
            let first = try await identifiersStored(in: clients[0]).count
            let second = try await identifiersStored(in: clients[1]).count
            return first == 40 && second == 40
        }
        for name in deleted { #expect(try await clients[0].deleteIdentifier(identifier: name) == 1) }
        let lastDeletion = ContinuousClock.now
        let head = Int(fleet.query("SELECT max(position) FROM fleet_log")) ?? 0
        for index in 1..<3 {
            let took = try await Self.within(.seconds(2)) { try await identifiersStored(in: clients[index]) == Set(kept) }
            #expect(took != nil, "node \(index) still held deleted identifiers 2 s after the last deletion")
            print("fleet: 20 deletions on door-1 were on node \(index) \(took.map { "\($0)" } ?? "never") after the last reply")
        }
        // Erasure on every node: none of the deleted templates' values in any data.mdb (the kept
        // ones are, which shows the search finds what is there).
        try await Task.sleep(for: .milliseconds(500))
        for node in nodes {
            let scan = try DataFileScan(directory: node.dataPath)
            #expect(scan.count(deleted.map { values[$0]! }) == 0, "\(node.dataPath) still holds a deleted template's values")
            #expect(scan.count(kept.map { values[$0]! }) == kept.count)
        }
        // In PostgreSQL, the entries that carried the deleted templates (sealed) leave the log: a
        // snapshot after the deletions, and the log trimmed up to it once every node applied them.
        let compacted = try await Self.within(.seconds(10)) {
            fleet.query("SELECT count(*) FROM fleet_log WHERE position <= \(head)") == "0"
                && (Int(fleet.query("SELECT max(position) FROM fleet_snapshots")) ?? 0) >= head
        }
        let sinceDeletion = ContinuousClock.now - lastDeletion
        #expect(compacted != nil, "the log still held the deleted templates' entries 10 s after the deletions")
        print(
            "fleet: the deleted templates' entries had left the log \(compacted != nil ? "\(sinceDeletion)" : "never") after the last deletion's reply"
        )
        #expect(fleet.query("SELECT count(*) FROM fleet_snapshots") == "1")
        // Nor in the clear in a dump of the database (raw, or as bytea's hex text).
        let dumpPath = fleet.directory + "/dump.sql"
        _ = system(
            "runuser -u postgres -- pg_dump -h '\(fleet.server.socketDirectory)' -p \(fleet.server.port) -U postgres registry >'\(dumpPath)' 2>&1")
        let dump = Array(readFileText(dumpPath).utf8)
        #expect(dump.count > 1000 && String(decoding: dump, as: UTF8.self).contains("fleet_log"))
        let hexes = values.values.map { Array(hex($0).utf8) }
        let raw = Array(values.values)
        let found = (hexes + raw).filter { needle in
            dump.indices.dropLast(needle.count).contains { dump[$0..<($0 + needle.count)].elementsEqual(needle) }
        }
        #expect(found.isEmpty, "\(found.count) template values are in the clear in a pg_dump of the fleet's database")
        for client in clients { await client.close() }
    }

    @Test
    func withPostgresStoppedReadsGoOnAndWritesAreRefusedUntilItReturns() async throws {
        let fleet = try Fleet()
        let nodes = try ["door-1", "desk"].map { try fleet.node($0) }
        let clients = try await nodes.asyncMap { try await $0.client() }
        var generator = SystemRandomNumberGenerator()
        let alice = Self.face(&generator)
        _ = try await clients[1].register(identifier: "alice", face: alice)
        _ = try await Self.within(.seconds(2)) { try await identifiersStored(in: clients[0]) == ["alice"] }

        fleet.server.stop()
        let found = try await clients[0].identify(face: alice, autoEnrol: false)
        #expect(found.matches.first?.identifier == "alice", "a replica answers identify with PostgreSQL stopped")
        let bob = Self.face(&generator)
        await #expect {
            _ = try await clients[0].register(identifier: "bob", face: bob)
        } throws: { error in
            (error as? RegistryError)?.code == .fleetUnavailable
        }
        #expect(try await identifiersStored(in: clients[0]) == ["alice"], "a refused registration is not stored")

        fleet.server.start()
        let resumed = try await Self.within(.seconds(10)) {
            do {
                _ = try await clients[0].register(identifier: "bob", face: bob)
                return true
            } catch let error as RegistryError where error.code == .fleetUnavailable {
                return false
            }
        }
        #expect(resumed != nil, "writes did not resume within 10 s of PostgreSQL's return")
        print("fleet: writes resumed \(resumed.map { "\($0)" } ?? "never") after PostgreSQL started again")
        #expect(try await Self.within(.seconds(2)) { try await identifiersStored(in: clients[1]) == ["alice", "bob"] } != nil)
        for client in clients { await client.close() }
    }

    /// SIGTERM while a write's commit is unconfirmed (the synchronous standby it waits for is not
    /// there): the write cannot be settled before the drain deadline, so it is answered then, as of
    /// unknown outcome, and the daemon exits 0 within the deadline instead of leaving the request
    /// unanswered and failing its stop (found by the fleet fault loop: a node that exited 1).
    @Test
    func aWriteUnsettledAtShutdownIsAnsweredWithinTheDrainDeadline() async throws {
        let fleet = try Fleet()
        let node = try Daemon(arguments: fleet.arguments("door-1") + ["--drain-deadline", "8"])
        let client = try await node.client()
        var generator = SystemRandomNumberGenerator()
        _ = try await client.register(identifier: "alice", face: Self.face(&generator))
        // Every commit now waits for a standby that never comes.
        _ = fleet.server.psql("ALTER SYSTEM SET synchronous_standby_names = 'absent'")
        _ = fleet.server.psql("SELECT pg_reload_conf()")
        let started = ContinuousClock.now
        let bob = Self.face(&generator)
        let answer = Task { () -> Result<Registration, any Error> in
            do {
                return .success(try await client.register(identifier: "bob", face: bob))
            } catch {
                return .failure(error)
            }
        }
        // The append's 5 s pass, the write is being settled from the log; then SIGTERM.
        try await Task.sleep(for: .seconds(6))
        let stopping = ContinuousClock.now
        let status = node.stop(signal: SIGTERM)
        let stopped = ContinuousClock.now - stopping
        let answered = await answer.value
        #expect(status == 0, "registryd exited with wait status \(status): \(node.log.suffix(1500))")
        #expect(stopped < .seconds(8), "the stop took \(stopped), past the 8 s drain deadline")
        switch answered {
        case .success: Issue.record("the write was acknowledged with its commit unconfirmed")
        case .failure(let error as RegistryError): #expect(error.code == .internal, "answered \(error.code): \(error.message)")
        case .failure(let error): Issue.record("no answer: \(error) after \(ContinuousClock.now - started)")
        }
        fleet.server.allowAsynchronousCommits()
        await client.close()
    }

    /// Compaction with a short retention time: a node stopped for longer than it finds the log
    /// trimmed past its position, loads the fleet's state instead (the templates deleted meanwhile
    /// erased from its store), and goes on with the same template ids as the others; a new node
    /// starts from the same state.
    @Test
    func aNodeAwayPastTheRetentionTimeLoadsTheFleetsState() async throws {
        let fleet = try Fleet(compaction: (seconds: 1, retentionSeconds: 2))
        let nodes = try ["door-1", "desk"].map { try fleet.node($0) }
        let desk = try await nodes[1].client()
        var generator = SystemRandomNumberGenerator()
        var values: [String: [UInt8]] = [:]
        for person in 0..<30 { values["p\(person)"] = try await Self.register("p\(person)", on: desk, &generator) }
        let door = try await nodes[0].client()
        #expect(try await Self.within(.seconds(2)) { try await identifiersStored(in: door).count == 30 } != nil)
        await door.close()
        nodes[0].stop(signal: SIGKILL)
        let away = Int(fleet.query("SELECT applied FROM fleet_nodes WHERE node = 'door-1'")) ?? 0

        // While door-1 is away: 30 more, and 10 of the first 30 deleted.
        for person in 30..<60 { values["p\(person)"] = try await Self.register("p\(person)", on: desk, &generator) }
        let deleted = (0..<10).map { "p\($0)" }
        for name in deleted { #expect(try await desk.deleteIdentifier(identifier: name) == 1) }
        let expected = Set((10..<60).map { "p\($0)" })
        let trimmed = try await Self.within(.seconds(15)) {
            (Int(fleet.query("SELECT value FROM registry_fleet_meta WHERE key = 'trimmed'")) ?? 0) > away
        }
        #expect(trimmed != nil, "the log was not trimmed past the stopped node's position (\(away))")

        try nodes[0].start()
        let back = try await nodes[0].client()
        let reloaded = try await Self.holds(expected, nodes[0], back)
        #expect(reloaded != nil, "the node back after the retention time did not have the fleet's state within 10 s; its log: \(nodes[0].log)")
        print("fleet: a node away past the retention time had the fleet's state \(reloaded.map { "\($0)" } ?? "never") after its start")
        #expect(nodes[0].log.contains("loaded the fleet's state"))
        // What was deleted while it was away is gone from its store, bytes and all.
        try await Task.sleep(for: .milliseconds(500))
        let scan = try DataFileScan(directory: nodes[0].dataPath)
        #expect(scan.count(deleted.map { values[$0]! }) == 0, "door-1's store still holds a template deleted while it was away")
        #expect(scan.count(expected.map { values[$0]! }) == expected.count)
        // The same templates, ids and times as the desk's, and writes go on from both.
        for person in stride(from: 10, to: 60, by: 7) {
            #expect(
                try await back.templates(identifier: "p\(person)", includeData: true) == desk.templates(identifier: "p\(person)", includeData: true))
        }
        _ = try await back.register(identifier: "after", face: Self.face(&generator))
        // On the desk once it has applied the entry (the writer reads its own write at once; the others follow).
        #expect(try await Self.within(.seconds(2)) { try await identifiersStored(in: desk).contains("after") } != nil)
        let onDesk = try #require(try await desk.templates(identifier: "after").first)
        #expect(try await back.templates(identifier: "after").first?.id == onDesk.id)

        let newcomer = try fleet.node("door-3")
        let fresh = try await newcomer.client()
        let copied = try await Self.within(.seconds(10)) { try await identifiersStored(in: fresh) == expected.union(["after"]) }
        #expect(copied != nil, "a new node did not have the fleet's state within 10 s")
        #expect(newcomer.log.contains("loaded the fleet's state"))
        print("fleet: a new node had the fleet's state \(copied.map { "\($0)" } ?? "never") after its start")
        for client in [desk, back, fresh] { await client.close() }
    }

    @Test
    func aKilledNodeCatchesUpAndANewNodeCopiesEverything() async throws {
        let fleet = try Fleet()
        let nodes = try ["door-1", "door-2", "desk"].map { try fleet.node($0) }
        let desk = try await nodes[2].client()
        nodes[1].stop(signal: SIGKILL)
        // 500 registrations from 8 clients while door-2 is down.
        let names = Names()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    let client = try await nodes[2].client()
                    var generator = SystemRandomNumberGenerator()
                    for index in stride(from: worker, to: 500, by: 8) {
                        _ = try await client.register(identifier: "p\(index)", face: Self.face(&generator))
                        names.set.withLock { _ = $0.insert("p\(index)") }
                    }
                    await client.close()
                }
            }
            do {
                try await group.waitForAll()
            } catch {
                var status: Int32 = 0
                let exited = waitpid(nodes[2].pid, &status, WNOHANG)
                throw HarnessError("\(error); desk exited: \(exited) status \(status); the desk's log: \(nodes[2].log)")
            }
        }
        let all = names.set.withLock { $0 }
        #expect(all.count == 500)
        try nodes[1].start()
        let restarted = try await nodes[1].client()
        let caughtUp = try await Self.holds(all, nodes[1], restarted)
        #expect(caughtUp != nil, "the restarted node did not have the 500 registrations within 10 s")
        print("fleet: the restarted node had the 500 registrations \(caughtUp.map { "\($0)" } ?? "never") after its start")

        let newcomer = try fleet.node("door-3")
        let fresh = try await newcomer.client()
        let copied = try await Self.within(.seconds(10)) { try await identifiersStored(in: fresh) == all }
        #expect(copied != nil, "the new node did not have the 500 registrations within 10 s")
        print("fleet: a new empty node had the 500 registrations \(copied.map { "\($0)" } ?? "never") after its start")
        for client in [desk, restarted, fresh] { await client.close() }
    }

    /// A node that catches up applies many entries at once; a registration reads its gallery before
    /// its write is queued. Entries that change galleries must end before the next starts there too,
    /// or the catching-up node reads a gallery the entries ahead have not made yet and refuses what
    /// the others stored (found by the fleet fault loop: the same people, other template ids).
    @Test
    func aNodeCatchingUpAppliesGalleryChangesBeforeTheRegistrationsAfterThem() async throws {
        let fleet = try Fleet()
        let nodes = try ["door-1", "desk"].map { try fleet.node($0) }
        let desk = try await nodes[1].client()
        nodes[0].stop(signal: SIGKILL)
        var generator = SystemRandomNumberGenerator()
        let gallery = GalleryConfiguration(name: "visitors", registries: [RegistryConfiguration(algorithm: 24)])
        for round in 0..<5 {
            _ = try await desk.defineGallery(gallery)
            for person in 0..<3 { _ = try await desk.register(gallery: "visitors", identifier: "v\(round)-\(person)", face: Self.face(&generator)) }
            _ = try await desk.register(identifier: "d\(round)", face: Self.face(&generator))
            if round < 4 { _ = try await desk.deleteGallery("visitors") }
        }
        try nodes[0].start()
        let door = try await nodes[0].client()
        let expected = try await desk.export(gallery: "visitors").templates.map { "\($0.id) \($0.identifier)" }
        #expect(expected.count == 3)
        let caughtUp = try await Self.within(.seconds(10)) {
            (try? await door.export(gallery: "visitors").templates.map { "\($0.id) \($0.identifier)" }) == expected
        }
        let held = try? await door.export(gallery: "visitors").templates.map { "\($0.id) \($0.identifier)" }
        #expect(caughtUp != nil, "the node that caught up holds \(held.map { "\($0)" } ?? "no gallery 'visitors'"), the desk \(expected)")
        let defaults = try await [desk, door].asyncMap { try await $0.export().templates.map { "\($0.id) \($0.identifier)" } }
        #expect(defaults[0] == defaults[1], "the default gallery differs: template ids taken differently")
        for client in [desk, door] { await client.close() }
    }

    /// Migration on a fleet: a face recognised on one node is auto-enrolled in the registry that
    /// lacked it, through the log, on every node with the same template id.
    @Test
    func autoEnrolmentOnOneNodeReachesEveryNode() async throws {
        let fleet = try Fleet()
        let nodes = try ["door-1", "door-2", "desk"].map { try fleet.node($0) }
        let clients = try await nodes.asyncMap { try await $0.client() }
        var generator = SystemRandomNumberGenerator()
        let arcface = (0..<128).map { _ in Float.random(in: -1...1, using: &generator) }
        let dlib = (0..<128).map { _ in Float.random(in: -1...1, using: &generator) }
        _ = try await clients[2].register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: arcface)))
        _ = try await Self.within(.seconds(2)) { try await identifiersStored(in: clients[0]) == ["alice"] }
        let found = try await clients[0].identify(
            face: Face(templates: [FaceTemplate(algorithm: 24, vector: arcface), FaceTemplate(algorithm: 16, vector: dlib)]))
        #expect(found.matches.first?.identifier == "alice")
        let enrolled = found.autoEnrolment.compactMap { outcome -> UInt64? in
            if case .enrolled(let id) = outcome.result, outcome.algorithm == 16 { return id }
            return nil
        }
        #expect(enrolled.count == 1, "\(found.autoEnrolment)")
        for client in clients {
            let held = try await Self.within(.seconds(2)) {
                try await client.templates(identifier: "alice").map(\.id).sorted().contains(enrolled.first ?? 0)
            }
            #expect(held != nil, "a node lacks the auto-enrolled template")
        }
        for client in clients { await client.close() }
    }

    /// A node that cannot apply the log (here: started with another fleet key, so the entries do not
    /// open) stops where it is rather than skip an entry, goes on answering reads, and refuses writes
    /// before they reach the log; the rest of the fleet goes on.
    @Test
    func aNodeThatCannotApplyTheLogRefusesWritesAndSkipsNothing() async throws {
        let fleet = try Fleet()
        let good = try fleet.node("door-1")
        let wrong = try fleet.node("door-2", keyPath: try fleet.otherKey())
        let (writer, stuck) = (try await good.client(), try await wrong.client())
        var generator = SystemRandomNumberGenerator()
        let alice = Self.face(&generator)
        _ = try await writer.register(identifier: "alice", face: alice)
        let entries = fleet.server.psql("SELECT count(*) FROM fleet_log")
        // The wrong node stops at alice's entry (nothing applied) and says so by refusing writes.
        let refused = try await Self.within(.seconds(5)) {
            do {
                _ = try await stuck.register(identifier: "bob", face: Self.face(&generator))
                return false
            } catch let error as RegistryError where error.code == .fleetUnavailable {
                return error.message.contains("cannot apply")
            }
        }
        #expect(refused != nil, "a node that cannot apply the log accepted a write")
        #expect(fleet.server.psql("SELECT count(*) FROM fleet_log") == entries, "a refused write reached the log")
        #expect(try await stuck.identify(face: alice, autoEnrol: false).matches.isEmpty, "reads go on, from what was applied")
        #expect(try await identifiersStored(in: stuck).isEmpty)
        // The rest of the fleet goes on.
        _ = try await writer.register(identifier: "carol", face: Self.face(&generator))
        #expect(try await identifiersStored(in: writer) == ["alice", "carol"])
        await writer.close()
        await stuck.close()
    }

    @Test
    func aStoreOfAnotherFleetOrWithStandaloneDataRefusesToJoin() async throws {
        let fleet = try Fleet()
        // Standalone data: a daemon without --fleet registered someone.
        let standalone = try Daemon()
        let client = try await standalone.client()
        var generator = SystemRandomNumberGenerator()
        _ = try await client.register(identifier: "alice", face: Self.face(&generator))
        await client.close()
        standalone.stop()
        #expect(throws: HarnessError.self) { _ = try Daemon(reusing: standalone, arguments: fleet.arguments("door-1")) }
        // A replica of this fleet started without its fleet settings refuses too (it would diverge).
        let member = try fleet.node("door-2")
        member.stop()
        #expect(throws: HarnessError.self) { _ = try Daemon(reusing: member, arguments: []) }
        // And one of another fleet (another database).
        let other = try Fleet()
        #expect(throws: HarnessError.self) { _ = try Daemon(reusing: member, arguments: other.arguments("door-2")) }
    }
}

/// Lower-case hexadecimal, as pg_dump writes bytea.
func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
