import RegistryModel

/// A template written by an operation whose commit has not happened yet.
struct PendingTemplate: Sendable {
    let id: UInt64
    let galleryId: UInt32
    let registryId: UInt32
    let identifier: String
    let row: [Float]
    let mask: UInt32
}

/// A change to the in-memory index, applied only after the commit that made it durable succeeded.
enum IndexChange: Sendable {
    case add(PendingTemplate)
    case remove(id: UInt64, galleryId: UInt32, registryId: UInt32)
    /// A gallery created or reconfigured: its record (registries in priority order, policy).
    case defineGallery(name: String, record: GalleryRecord, algorithms: [Algorithm])
    case deleteGallery(name: String)
    /// An identifier's liveness profile enrolled (or, nil, erased).
    case setProfile(galleryId: UInt32, identifier: String, profile: LivenessProfile?)
    /// The store's payloads are now sealed with this key.
    case setCipher(PayloadCipher)
    /// The store's contents were replaced by a fleet state image: the index is built from the
    /// store again (``Engine/reloadIndex()``).
    case reload

    /// Whether the commit that made it left pages free in the store (what ``StorageReserve`` counts).
    var freesPages: Bool {
        switch self {
        case .remove, .deleteGallery, .reload: true
        case .setProfile(_, _, let profile): profile == nil
        case .add, .defineGallery, .setCipher: false
        }
    }
}

/// The index changes of a group-commit batch so far, in order. Operations later in the batch check
/// against the committed index *plus* these, so the similar-face checks stay atomic with the writes
/// even though many registrations share one commit.
final class BatchChanges {
    private(set) var changes: [IndexChange] = []
    /// Template ids removed by earlier operations of the batch.
    private(set) var removed: Set<UInt64> = []
    /// Templates added by earlier operations of the batch (and not removed since).
    private(set) var added: [PendingTemplate] = []

    var isEmpty: Bool { self.changes.isEmpty }

    func append(_ newChanges: [IndexChange]) {
        for change in newChanges {
            self.changes.append(change)
            switch change {
            case .add(let template):
                self.added.append(template)
            case .remove(let id, _, _):
                self.removed.insert(id)
                self.added.removeAll { $0.id == id }
            case .defineGallery, .deleteGallery, .setProfile, .setCipher, .reload:
                break
            }
        }
    }

    /// Calls `body` with each added template of one registry, in order. In place: a registration
    /// late in a batch of many passes over the others' templates, and a filtered copy of them cost
    /// an array and two retains a template for each registration (`tools/request-costs`).
    func forEachAdded(toRegistry registryId: UInt32, _ body: (PendingTemplate) -> Void) {
        for index in self.added.indices where self.added[index].registryId == registryId {
            body(self.added[index])
        }
    }

    /// Whether an earlier operation of the batch added a template of `identifier` to the registry.
    func hasAdded(toRegistry registryId: UInt32, identifier: String) -> Bool {
        self.added.contains { $0.registryId == registryId && $0.identifier.sameIdentifier(as: identifier) }
    }
}

/// A registration's similar-face and mismatch checks, announced with its write.
struct Precheck: Sendable {
    let gallery: String
    let galleryId: UInt32
    let identifier: String
    let templates: PreparedFace
}

/// What one operation of a batch sees and records: the batch so far (read-only), its own changes,
/// and the template-id counter.
final class OperationContext {
    let batch: BatchChanges
    /// The operation's announced checks against the committed index, by registry id, computed
    /// for the whole batch in one pass (see ``Matching/check(_:in:identifier:query:batch:precomputed:)``).
    var precomputed: [UInt32: Scan.CheckBest] = [:]
    /// The operation's time (microseconds since 1970) when it applies a fleet log entry: the
    /// entry's commit time, the same on every replica; nil: the clock's.
    var time: Int64?
    private(set) var changes: [IndexChange] = []
    private(set) var nextTemplateId: UInt64

    init(batch: BatchChanges, nextTemplateId: UInt64) {
        self.batch = batch
        self.nextTemplateId = nextTemplateId
    }

    /// A new template id: greater than every id stored so far, so registration order is id order.
    func takeTemplateId() -> UInt64 {
        defer { self.nextTemplateId += 1 }
        return self.nextTemplateId
    }

    func record(_ change: IndexChange) {
        self.changes.append(change)
    }
}
