import Glibc
import RegistryClient
import RegistryModel
import Synchronization
import SyntheticFaces

/// The mixed load on every node: new people registered; one face registered on several nodes at
/// once under different identifiers; deletions of people registered before; identifications (of a
/// face on the node that registered it, or anywhere); galleries defined and deleted. Every request
/// and its answer go to the ``History``.
final class Workload: Sendable {
    let nodes: [Node]
    let history: History
    let seed: UInt64
    let stop = Atomic<Bool>(false)
    /// How long a request may go unanswered before the loop gives up on it (and counts it: every
    /// request the daemon reads must be answered; a paused node is paused for at most 3 s, and the
    /// slowest answer a node gives, when PostgreSQL does not confirm a commit, comes within 35 s).
    static let answerDeadline: Duration = .seconds(60)
    /// The galleries the load defines and deletes besides `default`.
    static let extraGalleries = ["g1", "g2"]

    struct Model {
        var nextFace: UInt64 = 0
        var nextGroup = 0
        /// Registrations acknowledged and not yet picked for a deletion.
        var registered: [Event] = []
        var galleries: Set<String> = [GalleryConfiguration.defaultName]
    }

    let model = Mutex(Model())

    init(nodes: [Node], history: History, seed: UInt64) {
        self.nodes = nodes
        self.history = history
        self.seed = seed
    }

    /// Runs `workers` clients until ``stop`` is set.
    func run(workers: Int) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask { await Worker(load: self, index: worker).run() }
            }
        }
    }

    /// A new face: its number in the run (which names its identifiers: unique, unlike a part of the
    /// seed, whose collisions among tens of thousands of faces made two registrations of one name)
    /// and its seed.
    func newFace() -> (number: UInt64, seed: UInt64) {
        let index = self.model.withLock { model in
            defer { model.nextFace += 1 }
            return model.nextFace
        }
        var generator = SeededRandom(seed: self.seed ^ (index &* 0x2545_F491_4F6C_DD1D))
        return (index, generator.next())
    }
}

/// One client of the load, with a connection to each node (made again after the node restarts).
private final class Worker: @unchecked Sendable {
    let load: Workload
    let index: Int
    var generator: SeededRandom
    var connections: [RegistryConnection?]

    init(load: Workload, index: Int) {
        self.load = load
        self.index = index
        self.generator = SeededRandom(seed: load.seed &+ UInt64(index) &* 0x9E37_79B9)
        self.connections = Array(repeating: nil, count: load.nodes.count)
    }

    func run() async {
        while !self.load.stop.load(ordering: .relaxed) {
            let choice = Int(self.generator.next() % 100)
            switch choice {
            case 0..<40: await self.registerNew()
            case 40..<48: await self.registerOnSeveralNodes()
            case 48..<62: await self.deleteSomeone()
            case 62..<95: await self.identifySomeone()
            case 95..<98: await self.defineGallery()
            default: await self.deleteGallery()
            }
        }
        for connection in self.connections { await connection?.close() }
    }

    private func randomNode() -> Int { Int(self.generator.next() % UInt64(self.load.nodes.count)) }

    private func randomGallery() -> String {
        let galleries = self.load.model.withLock { $0.galleries }.sorted()
        // Mostly the default gallery: the others come and go.
        if self.generator.next() % 4 != 0 { return GalleryConfiguration.defaultName }
        return galleries[Int(self.generator.next() % UInt64(galleries.count))]
    }

    private func registerNew() async {
        let (number, face) = self.load.newFace()
        let node = self.randomNode()
        let gallery = self.randomGallery()
        await self.register(node: node, gallery: gallery, identifier: "p\(number)", face: face, group: nil)
    }

    /// One new face registered on two or three nodes at once under different identifiers: at most
    /// one may hold it (the others are similar faces).
    private func registerOnSeveralNodes() async {
        let face = self.load.newFace().seed
        let group = self.load.model.withLock { model in
            defer { model.nextGroup += 1 }
            return model.nextGroup
        }
        let gallery = self.randomGallery()
        let first = self.randomNode()
        let count = 2 + Int(self.generator.next() % 2)
        let targets = (0..<count).map { (first + $0) % self.load.nodes.count }
        // Each registration on its own connection: the worker's connection to each node.
        var connections: [(Int, RegistryConnection)] = []
        for node in Set(targets) {
            if let connection = await self.connection(node) { connections.append((node, connection)) }
        }
        let events = await withTaskGroup(of: (Int, Event).self) { tasks in
            for (node, connection) in connections {
                tasks.addTask {
                    let identifier = "c\(group)n\(node)"
                    let (event, _) = await self.load.call(
                        connection, node: node, kind: .register, gallery: gallery, identifier: identifier, face: face, group: group
                    ) { try await $0.register(gallery: gallery, identifier: identifier, face: LoopFace.face(face)) }
                    return (node, event)
                }
            }
            return await tasks.reduce(into: []) { $0.append($1) }
        }
        for (node, event) in events { self.settle(node, event) }
    }

    private func register(node: Int, gallery: String, identifier: String, face: UInt64, group: Int?) async {
        guard let connection = await self.connection(node) else { return }
        let (event, _) = await self.load.call(
            connection, node: node, kind: .register, gallery: gallery, identifier: identifier, face: face, group: group
        ) {
            try await $0.register(gallery: gallery, identifier: identifier, face: LoopFace.face(face))
        }
        self.settle(node, event)
    }

    private func deleteSomeone() async {
        let target: Event? = self.load.model.withLock { model in
            guard !model.registered.isEmpty else { return nil }
            return model.registered.remove(at: Int(self.generator.next() % UInt64(model.registered.count)))
        }
        guard let target else { return await self.registerNew() }
        let node = self.randomNode()
        guard let connection = await self.connection(node) else { return }
        let (event, _) = await self.load.call(
            connection, node: node, kind: .deleteIdentifier, gallery: target.gallery, identifier: target.identifier, face: target.face, group: nil
        ) { _ = try await $0.deleteIdentifier(gallery: target.gallery, identifier: target.identifier) }
        self.settle(node, event)
    }

    /// A registered face identified: half the time on the node that registered it (which must find
    /// it: it acknowledged the registration), else on any node.
    private func identifySomeone() async {
        let target: Event? = self.load.model.withLock { model in
            model.registered.isEmpty ? nil : model.registered[Int(self.generator.next() % UInt64(model.registered.count))]
        }
        guard let target else { return await self.registerNew() }
        let node = self.generator.next() % 2 == 0 ? target.node : self.randomNode()
        guard let connection = await self.connection(node) else { return }
        var (event, matches) = await self.load.call(
            connection, node: node, kind: .identify, gallery: target.gallery, identifier: target.identifier, face: target.face, group: nil
        ) { try await $0.identify(gallery: target.gallery, face: LoopFace.face(target.face), autoEnrol: false, limit: 4).matches.map(\.identifier) }
        event.matches = matches
        self.settle(node, event)
    }

    private func defineGallery() async {
        let name = Workload.extraGalleries[Int(self.generator.next() % UInt64(Workload.extraGalleries.count))]
        let node = self.randomNode()
        guard let connection = await self.connection(node) else { return }
        let configuration = GalleryConfiguration(name: name, registries: [RegistryConfiguration(algorithm: LoopFace.algorithm)])
        let (event, _) = await self.load.call(connection, node: node, kind: .defineGallery, gallery: name, identifier: "", face: 0, group: nil) {
            _ = try await $0.defineGallery(configuration)
        }
        self.settle(node, event)
    }

    private func deleteGallery() async {
        let name = Workload.extraGalleries[Int(self.generator.next() % UInt64(Workload.extraGalleries.count))]
        let node = self.randomNode()
        guard let connection = await self.connection(node) else { return }
        let (event, _) = await self.load.call(connection, node: node, kind: .deleteGallery, gallery: name, identifier: "", face: 0, group: nil) {
            _ = try await $0.deleteGallery(name)
        }
        self.settle(node, event)
    }

    /// Records `event`, updates the model, and drops a connection that failed.
    private func settle(_ node: Int, _ event: Event) {
        self.load.history.record(event)
        if event.acknowledged {
            self.load.model.withLock { model in
                switch event.kind {
                case .register: model.registered.append(event)
                case .defineGallery: model.galleries.insert(event.gallery)
                case .deleteGallery:
                    model.galleries.remove(event.gallery)
                    model.registered.removeAll { $0.gallery == event.gallery }
                case .deleteIdentifier, .identify: break
                }
            }
        }
        if case .unknown = event.outcome, let connection = self.connections[node] {
            self.connections[node] = nil
            Task { await connection.close() }
        }
    }

    /// The worker's connection to `node`, made if there is none; nil (after a pause) while the
    /// node is down: a request never sent is not part of the history.
    private func connection(_ node: Int) async -> RegistryConnection? {
        if let connection = self.connections[node], connection.isActive { return connection }
        guard let connection = try? await RegistryConnection.connect(socketPath: self.load.nodes[node].socketPath) else {
            try? await Task.sleep(for: .milliseconds(50))
            return nil
        }
        self.connections[node] = connection
        return connection
    }
}

extension Workload {
    /// Sends one request through `connection`, with the loop's deadline (the connection is closed
    /// when it passes: the request's outcome is then unknown); the request as an event, and what
    /// `body` returned when it was answered.
    func call<T: Sendable>(
        _ connection: RegistryConnection, node: Int, kind: Event.Kind, gallery: String, identifier: String, face: UInt64, group: Int?,
        _ body: @escaping @Sendable (RegistryConnection) async throws -> T
    ) async -> (Event, T?) {
        let start = self.history.now
        let timedOut = Atomic<Bool>(false)
        let timer = Task {
            try await Task.sleep(for: Self.answerDeadline)
            timedOut.store(true, ordering: .relaxed)
            await connection.close()
        }
        let outcome: Event.Outcome
        var value: T?
        do {
            value = try await body(connection)
            outcome = .ok
        } catch let error as RegistryError {
            // INTERNAL: the fleet's database did not confirm the commit, or this node did not apply
            // it in time: carried out or not, the answer does not say.
            outcome = error.code == .internal ? .unknown("INTERNAL") : .refused(error.code.rawValue)
        } catch {
            outcome = .unknown(timedOut.load(ordering: .relaxed) ? "no answer" : "connection closed")
        }
        timer.cancel()
        let event = Event(
            id: self.history.newId(), node: node, kind: kind, gallery: gallery, identifier: identifier, face: face, start: start,
            end: self.history.now, outcome: outcome, matches: nil, group: group)
        return (event, value)
    }
}
