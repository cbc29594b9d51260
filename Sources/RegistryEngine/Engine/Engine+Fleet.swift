import LMDB
import RegistryModel
import Synchronization

/// An entry of the fleet's log being applied to this store (fleet mode, docs/fleet.md): the write
/// the operation makes carries the entry's position, which the same commit records
/// (``Engine/fleetPosition()``), so that a crash never applies an entry twice or skips one.
///
/// Bound as a task-local around the start of the entry's operation: the one write the operation
/// makes, wherever it is made (at once, in a task, or after a publication on the writer thread),
/// takes it. `queued` runs once that write is in the writer's queue, so the node can start the next
/// entry knowing the two commit in order.
public struct FleetApplication: Sendable {
    public let position: Int64
    /// The position of the entry before it in the log (or of the snapshot the node loaded; 0: none).
    /// The write applies only if it is the store's last: positions have gaps (a sequence's values
    /// taken by appends that rolled back, or skipped by a failover), so "the next one" is the one
    /// the log holds after the last applied, not the last plus one.
    public let previous: Int64
    /// When the entry was committed to the log (microseconds since 1970): the registration time of
    /// the templates it stores, the same on every replica (nil: this node's clock).
    public let committedAt: Int64?
    let queued: @Sendable () -> Void

    public init(position: Int64, previous: Int64, committedAt: Int64? = nil, queued: @escaping @Sendable () -> Void) {
        self.position = position
        self.previous = previous
        self.committedAt = committedAt
        self.queued = queued
    }

    @TaskLocal public static var current: FleetApplication?
}

/// An auto-enrolment as the fleet's log carries it: the recognition that triggered it (the face's
/// templates, the identifier found, the deciding registry's algorithm and score, the capture's
/// quality and liveness), from which each replica plans and carries it out as the node that
/// recognised the face would have.
public struct AutoEnrolmentEntry: Sendable, Equatable {
    public var gallery: String
    public var identifier: String
    public var face: Face
    public var deciderAlgorithm: UInt32
    public var score: Float
    public var quality: Float?
    public var live: Bool?

    public init(gallery: String, identifier: String, face: Face, deciderAlgorithm: UInt32, score: Float, quality: Float?, live: Bool?) {
        self.gallery = gallery
        self.identifier = identifier
        self.face = face
        self.deciderAlgorithm = deciderAlgorithm
        self.score = score
        self.quality = quality
        self.live = live
    }
}

/// What a store says about the fleet it belongs to.
public struct FleetMembership: Sendable, Equatable {
    /// The fleet the store was joined to (nil: never joined).
    public var fleetId: Int64?
    /// The last log position applied to it (0: none).
    public var position: Int64
    /// Whether it ever held a template or a gallery besides the default one: a store that did keeps
    /// template ids and galleries the fleet's other replicas do not have, so it cannot join.
    public var holdsStandaloneData: Bool
}

extension Engine {
    // MARK: Fleet mode

    /// The store's fleet, position and whether it holds data of its own.
    public func fleetMembership() throws -> FleetMembership {
        try self.store.environment.read { txn in
            let id = try self.store.readUInt64(txn, Keys.fleetId).map { Int64(bitPattern: $0) }
            let position = Int64(try self.store.readUInt64(txn, Keys.fleetPosition) ?? 0)
            var galleries = 0
            try txn.forEach(self.store.galleries) { _, _ in
                galleries += 1
                return .continue
            }
            let nextTemplate = try self.store.readUInt64(txn, Keys.nextTemplateId) ?? 1
            return FleetMembership(fleetId: id, position: position, holdsStandaloneData: id == nil && (nextTemplate > 1 || galleries > 1))
        }
    }

    /// The last fleet log position applied to the store (0: none).
    public func fleetPosition() throws -> Int64 {
        try self.store.environment.read { txn in Int64(try self.store.readUInt64(txn, Keys.fleetPosition) ?? 0) }
    }

    /// Makes the store a replica of fleet `id`: from now on every write but the node's own
    /// housekeeping (audit trail, verify, encryption at rest) must be an entry of the log. A store
    /// of another fleet, or one holding standalone data, is refused with what to do instead.
    public func joinFleet(id: Int64) async throws {
        let membership = try self.fleetMembership()
        if let joined = membership.fleetId, joined != id {
            throw RegistryError(
                .malformedRequest,
                "the store in \(self.path) belongs to another fleet (\(FleetMembership.hex(joined))), not to this database's "
                    + "(\(FleetMembership.hex(id))): start this node with an empty data directory to join this fleet")
        }
        if membership.holdsStandaloneData {
            throw RegistryError(
                .malformedRequest,
                "the store in \(self.path) holds standalone data, which a fleet replica cannot keep: start the node with an empty "
                    + "data directory, and move the data in with registryctl export --all on a standalone daemon and registryctl import "
                    + "through any node of the fleet")
        }
        if membership.fleetId == nil {
            try await self.write(exclusive: true, local: true) { txn, _ in
                try self.store.writeInteger(txn, Keys.fleetId, UInt64(bitPattern: id))
            }
        }
        self.isReplica.store(true, ordering: .releasing)
    }

    /// Records an entry's position with no other change: for an entry refused before it wrote (its
    /// refusal is the same on every replica), so that the positions the store records stay
    /// contiguous. Bound to the entry with ``FleetApplication``.
    public func recordFleetPosition(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        self.write(useReserve: true, { _, _ in () }, completion: completion)
    }

    /// Whether an entry that failed with `error` failed the same way on every replica (a refusal
    /// made from the registry's contents and the request: recorded as applied), or for a reason of
    /// this node's own (its disk, its damage, its shutdown: applied again later).
    public static func failsEverywhere(_ error: any Error) -> Bool {
        guard let error = error as? RegistryError else { return false }
        switch error.code {
        case .internal, .storageFull, .shuttingDown, .tooManyConnections, .fleetUnavailable: return false
        default: return true
        }
    }
}

extension FleetMembership {
    /// A fleet id as the logs and status show it.
    public static func hex(_ id: Int64) -> String {
        let digits = String(UInt64(bitPattern: id), radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
