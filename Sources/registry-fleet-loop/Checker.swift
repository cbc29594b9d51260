import Glibc
import RegistryClient
import RegistryModel
import TestSupport

/// A node's contents as its clients can read them: per gallery, per identifier, the faces (seeds)
/// of its templates, and every template as (gallery, id, identifier, payload) to compare nodes.
struct NodeState: Equatable {
    var galleries: [String: [String: [UInt64]]] = [:]
    var rows: [String] = []

    func holds(_ gallery: String, _ identifier: String) -> Bool { self.galleries[gallery]?[identifier] != nil }

    /// Reads every gallery's templates with their data (export pages).
    static func read(_ node: Node, faces: [[UInt8]: UInt64]) async throws -> NodeState {
        let client = try await RegistryConnection.connect(socketPath: node.socketPath)
        defer { Task { await client.close() } }
        var state = NodeState()
        for gallery in try await client.galleries().map(\.name).sorted() {
            var held: [String: [UInt64]] = [:]
            var after: UInt64 = 0
            while true {
                let page = try await client.export(gallery: gallery, after: after, limit: 1000)
                for template in page.templates {
                    guard case .vector(let values) = template.template?.data else {
                        throw LoopError("node \(node.name) exported template \(template.id) of '\(gallery)' without its values")
                    }
                    let payload = values.withUnsafeBytes { Array($0) }
                    // A payload the load never sent: a face of no seed (counted as its own face).
                    let face = faces[payload] ?? UInt64.max
                    held[template.identifier, default: []].append(face)
                    state.rows.append("\(gallery) \(template.id) \(template.identifier) \(face)")
                }
                guard let next = page.next else { break }
                after = next
            }
            state.galleries[gallery] = held
        }
        return state
    }
}

/// What the checker found: each violation once, by rule.
struct Findings {
    var violations: [String: [String]] = [:]

    mutating func add(_ rule: String, _ detail: String) { self.violations[rule, default: []].append(detail) }

    var count: Int { self.violations.values.reduce(0) { $0 + $1.count } }

    func count(_ rule: String) -> Int { self.violations[rule]?.count ?? 0 }
}

/// Reads the history and every node's final state (and data directory), and finds what a fleet
/// must never do (docs/fleet.md, "Faults"):
/// - **lost**: an acknowledged registration missing on a node, with no deletion that may have
///   come after it;
/// - **refused but stored**: a registration refused (any code but `INTERNAL`) held anywhere;
/// - **doubled**: an identifier with other than the one template its registration stored, or one
///   face held by two identifiers of a gallery (the loop never forces a registration);
/// - **resurrected**: an identifier whose deletion was acknowledged after its registration's,
///   held again (and, found by the loop with ``ErasedBytes``, an erased face's bytes in a node's
///   data directory);
/// - **disagree**: nodes whose contents differ after convergence;
/// - **stale read**: an identify on the node that acknowledged a registration, sent after the
///   acknowledgement, that did not find it (no deletion of it begun before the identify ended).
struct Checker {
    let events: [Event]

    func check(states: [NodeState], nodes: [Node]) -> Findings {
        var findings = Findings()
        let registrations = self.events.filter { $0.kind == .register }
        // Deletions that may have happened, by what they remove; each registration's, looked up once.
        let deletions = self.events.filter { $0.mayHaveHappened }
        let identifierDeletions = Dictionary(grouping: deletions.filter { $0.kind == .deleteIdentifier }) { "\($0.gallery)/\($0.identifier)" }
        let galleryDeletions = Dictionary(grouping: deletions.filter { $0.kind == .deleteGallery }, by: \.gallery)
        let removers = registrations.map { registration in
            (identifierDeletions["\(registration.gallery)/\(registration.identifier)"] ?? []) + (galleryDeletions[registration.gallery] ?? [])
        }
        // Acknowledged registrations by the node that acknowledged them, their face and gallery.
        var acknowledged: [String: [Int]] = [:]
        for (index, registration) in registrations.enumerated() where registration.acknowledged {
            acknowledged["\(registration.node)/\(registration.face)/\(registration.gallery)", default: []].append(index)
        }
        for (index, state) in states.enumerated() {
            let name = nodes[index].name
            for (number, registration) in registrations.enumerated() {
                let held = state.holds(registration.gallery, registration.identifier)
                if registration.acknowledged && !held && !removers[number].contains(where: { $0.end > registration.start }) {
                    findings.add(
                        "lost", "\(name): \(registration.identifier) in '\(registration.gallery)' (acknowledged by node-\(registration.node + 1))")
                }
                if case .refused(let code) = registration.outcome, held {
                    findings.add("refused but stored", "\(name): \(registration.identifier) in '\(registration.gallery)' (refused with \(code))")
                }
                if held, let undone = removers[number].first(where: { $0.acknowledged && $0.start > registration.end }) {
                    findings.add(
                        "resurrected",
                        "\(name): \(registration.identifier) in '\(registration.gallery)', deleted (\(undone.kind.rawValue)) at \(undone.end) s")
                }
            }
            for (gallery, identifiers) in state.galleries {
                var holders: [UInt64: [String]] = [:]
                for (identifier, faces) in identifiers {
                    if faces.count != 1 { findings.add("doubled", "\(name): \(identifier) in '\(gallery)' holds \(faces.count) templates") }
                    for face in Set(faces) { holders[face, default: []].append(identifier) }
                }
                for (_, holding) in holders where holding.count > 1 {
                    findings.add("doubled", "\(name): one face under \(holding.sorted().joined(separator: ", ")) in '\(gallery)'")
                }
            }
            for identify in self.events where identify.kind == .identify && identify.node == index && identify.acknowledged {
                let matches = identify.matches ?? []
                for number in acknowledged["\(index)/\(identify.face)/\(identify.gallery)"] ?? [] {
                    let registration = registrations[number]
                    guard registration.end < identify.start, !matches.contains(registration.identifier),
                        !removers[number].contains(where: { $0.start < identify.end })
                    else { continue }
                    findings.add(
                        "stale read",
                        "\(name): identify at \(identify.start) s missed \(registration.identifier), acknowledged at \(registration.end) s")
                }
            }
        }
        for (index, state) in states.enumerated().dropFirst() where state != states[0] {
            let differing = Set(state.rows).symmetricDifference(states[0].rows).count
            findings.add("disagree", "\(nodes[index].name) and \(nodes[0].name) differ in \(differing) templates")
        }
        return findings
    }

    /// The faces sent and held by no identifier on any node: no node's files may keep them.
    func erased(states: [NodeState]) -> Set<UInt64> {
        let held = Set(states.flatMap { $0.galleries.values.flatMap { $0.values.flatMap { $0 } } })
        return Set(self.events.filter { $0.kind == .register }.map(\.face)).subtracting(held)
    }
}

/// Searches files for the payloads of faces, in one pass a file: a rolling hash of every 512-byte
/// window, looked up among the payloads' hashes, compared byte for byte on a hit.
struct ErasedBytes {
    /// The payloads by their hash, their length, and base^length: what the byte leaving the window
    /// weighs once the hash is multiplied again. Built once for every directory and search.
    private let byHash: [UInt64: [[UInt8]]]
    private let width: Int
    private let weight: UInt64

    init(faces: Set<UInt64>) {
        let needles = faces.map(LoopFace.payload)
        self.width = needles.first?.count ?? 0
        self.byHash = Dictionary(grouping: needles) { Self.hash($0[...]) }
        self.weight = (0..<self.width).reduce(UInt64(1)) { power, _ in power &* Self.base }
    }

    /// How many of the faces each file of `directory` holds.
    func find(in directory: String) -> [(file: String, count: Int)] {
        let (byHash, width, weight) = (self.byHash, self.width, self.weight)
        guard width > 0 else { return [] }
        var found: [(String, Int)] = []
        for entry in (directoryEntries(directory) ?? []).sorted() {
            let path = directory + "/" + entry
            guard let bytes = readFileBytes(path), bytes.count >= width else { continue }
            var hits: Set<[UInt8]> = []
            bytes.withUnsafeBufferPointer { bytes in
                var hash = Self.hash(bytes[0..<width])
                var offset = 0
                while true {
                    if let candidates = byHash[hash] {
                        for needle in candidates where memcmp(bytes.baseAddress! + offset, needle, width) == 0 { hits.insert(needle) }
                    }
                    guard offset + width < bytes.count else { break }
                    // The window moves one byte: the leaving byte's weight out, the entering byte in.
                    hash = hash &* Self.base &- UInt64(bytes[offset]) &* weight &+ UInt64(bytes[offset + width])
                    offset += 1
                }
            }
            found.append((path, hits.count))
        }
        return found
    }

    private static let base: UInt64 = 1_099_511_628_211

    private static func hash<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> UInt64 {
        bytes.reduce(0) { $0 &* Self.base &+ UInt64($1) }
    }
}
