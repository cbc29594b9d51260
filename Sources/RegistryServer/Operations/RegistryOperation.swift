import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol

/// One kind of request: everything the dispatcher needs to check, run, audit and answer it.
///
/// The dispatcher stays generic (decoding, the version check, access, the template check, audit,
/// replies); what differs per request kind lives in that kind's file in this folder, as a
/// conformance of its generated request message. Adding a request kind: the message in
/// `proto/registry.proto`, its file here, the client method and the registryctl command; the switch
/// in ``Registry_V1_Request/OneOf_Operation/operation`` has no `default:`, so the compiler names
/// whatever else is missing.
protocol RegistryOperation: Sendable {
    /// What a successful run returns; ``response(_:)`` wraps it for the wire.
    associatedtype Result: Sendable

    /// The name in logs and in the audit trail (`register`, `list_identifiers`, …).
    static var name: String { get }
    /// The right a peer needs; nil: any connected peer may use it.
    static var right: OperationClass? { get }
    /// Whether the audit trail records it: every kind that needs a right. Those any peer may use
    /// (hello, list_galleries, list_algorithms, stats) touch no one's data, and `registryctl`'s
    /// algorithm names and the metrics timer's `stats` every 15 s would crowd a count-bounded trail.
    static var isAudited: Bool { get }
    /// Whether its outcomes are `match` and `no-match` (identify, authenticate), for the metrics.
    static var decidesMatches: Bool { get }
    /// Whether it changes the registry's contents: in fleet mode it is then an entry of the fleet's
    /// log, applied on every node (docs/fleet.md). The node's own housekeeping (audit trail, backup,
    /// verify, encryption at rest) is not.
    static var isReplicated: Bool { get }
    /// Whether it removes biometric data (a deletion): in fleet mode its entry is of the erasure
    /// kind, after which a snapshot is due, so that compaction takes the removed data out of the
    /// fleet's log soon (docs/fleet.md, "Compaction").
    static var erases: Bool { get }
    /// Whether, in fleet mode, its entry may start while the entries ahead of it are still being
    /// applied. An operation reads some of the registry before its write is queued (register: the
    /// gallery, the identifier's liveness profile); every replica must read there what the entries
    /// ahead of it left, whichever of them it has committed yet. Registrations, most of the log,
    /// read only what no registration changes, so they follow each other without waiting; every
    /// other write starts once the entries ahead of it have ended, and ends before the next starts.
    static var isPipelinedInTheFleet: Bool { get }
    /// The wire form of a result.
    static func response(_ result: Result) -> Registry_V1_Response.OneOf_Result
    /// The whole reply frame for `result`, written without building the response message, or nil
    /// (the default): encode ``response(_:)``. Only for replies that are most of the traffic.
    static func framedReply(id: UInt64, _ result: Result) -> ByteBuffer?
    /// Its counters and latency histogram in `metrics` (by default looked up by name).
    static func metrics(in metrics: ServerMetrics) -> OperationMetrics

    /// Where it works: in one gallery (as named in the request; empty means the default gallery), or
    /// on the whole store (which needs the right on every gallery).
    var scope: OperationScope { get }
    /// The identifiers the audit trail records for it when it succeeds, unless ``audit(_:)`` says
    /// otherwise (identify records the identifiers it found).
    var auditedIdentifiers: [String] { get }
    /// The templates it carries, checked before it runs.
    var templates: [Registry_V1_Template] { get }

    /// Carries the operation out: the one way the dispatcher runs a request. `completion` gets the
    /// outcome once, on whatever thread finishes it (a value, not a closure: answering at once then
    /// allocates nothing): at once, before this returns, when
    /// nothing has to wait (an authentication that writes nothing; a refusal); from the engine's
    /// writer after the commit (a registration); from a task for work written as async code
    /// (``AsyncRegistryOperation``). Called on an event loop: must not block.
    func start<Done: Completion<Result>>(in context: OperationContext, completion: Done)
    /// The audit trail's view of a successful result.
    func audit(_ result: Result) -> AuditedResult
}

/// Where an operation works, for the access policy and the audit trail.
enum OperationScope: Sendable, Equatable {
    /// One gallery, as the request names it ("" : the default gallery).
    case gallery(String)
    /// Every gallery: the store, the daemon. Needs the right in every gallery.
    case store
    /// The galleries the peer holds the right in, and only those (the audit trail, whose entries are
    /// shown for those galleries alone). Needs the right in at least one.
    case permittedGalleries

    /// The gallery name the access policy and the audit trail use; "" for the whole store.
    var galleryName: String {
        switch self {
        case .gallery(let name): name.isEmpty ? GalleryConfiguration.defaultName : name
        case .store, .permittedGalleries: ""
        }
    }
}

/// What the audit trail records of a successful result.
struct AuditedResult: Sendable {
    var identifiers: [String]
    /// `ok`, `match` or `no-match`.
    var outcome: AuditOutcome
    /// The deciding score, when there is one.
    var score: Float?
}

extension RegistryOperation {
    static var isAudited: Bool { Self.right != nil }
    static var decidesMatches: Bool { false }
    static var isReplicated: Bool { false }
    static var erases: Bool { false }
    static var isPipelinedInTheFleet: Bool { false }
    static func framedReply(id: UInt64, _ result: Result) -> ByteBuffer? { nil }
    static func metrics(in metrics: ServerMetrics) -> OperationMetrics {
        metrics.operation(Self.name, decidesMatches: Self.decidesMatches)
    }
    var auditedIdentifiers: [String] { [] }
    var templates: [Registry_V1_Template] { [] }
    func audit(_ result: Result) -> AuditedResult { AuditedResult(identifiers: self.auditedIdentifiers, outcome: .ok) }
}

/// An operation written as async code (identify, administration): ``start(in:completion:)`` runs
/// ``perform(in:)`` as a task, off the event loop. It may await the engine, never block.
protocol AsyncRegistryOperation: RegistryOperation {
    func perform(in context: OperationContext) async throws -> Result
}

extension AsyncRegistryOperation {
    func start<Done: Completion<Result>>(in context: OperationContext, completion: Done) {
        Task {
            do {
                completion.complete(.success(try await self.perform(in: context)))
            } catch {
                completion.complete(.failure(error))
            }
        }
    }
}

/// What operations run with: the engine, the log, the daemon's counters and metrics, and who asked.
/// Nothing here blocks: the engine runs its reads of the store on its own threads behind async calls.
struct OperationContext: Sendable {
    let engine: Engine
    let logger: Logger
    let counters: ServerCounters
    let metrics: ServerMetrics
    /// Fleet mode: the node (nil: standalone).
    var fleet: FleetNode? = nil
    /// The peer that sent the request (nil: its credentials could not be read).
    var peer: Peer? = nil
    /// The access policy in force (for an operation that shows only what the peer may see).
    var policy: AccessPolicy? = nil

    /// Whether the peer holds `right` in `gallery` ("": every gallery).
    func peerHolds(_ right: OperationClass, gallery: String) -> Bool {
        guard let peer, let policy else { return false }
        return policy.allows(peer, right, gallery: gallery)
    }
}

/// Something done with a request's operation, generic over its kind: handed to
/// ``Registry_V1_Request/OneOf_Operation/accept(_:)``, it runs as code specialised for that kind,
/// where the existential ``Registry_V1_Request/OneOf_Operation/operation`` is opened at run time
/// (generic metadata looked up, every call unspecialised) on every request.
protocol OperationVisitor {
    associatedtype Output
    func visit<Operation: RegistryOperation>(_ operation: Operation) -> Output
}

extension Registry_V1_Request.OneOf_Operation {
    /// The operation this request carries, boxed.
    var operation: any RegistryOperation { self.accept(Boxing()) }

    private struct Boxing: OperationVisitor {
        func visit<Operation: RegistryOperation>(_ operation: Operation) -> any RegistryOperation { operation }
    }

    /// Calls `visitor` with the operation this request carries: the one table of request kinds.
    func accept<Visitor: OperationVisitor>(_ visitor: Visitor) -> Visitor.Output {
        switch self {
        case .hello(let request): visitor.visit(request)
        case .register(let request): visitor.visit(Register(request))
        case .identify(let request): visitor.visit(request)
        case .authenticate(let request): visitor.visit(Authenticate(request))
        case .listGalleries(let request): visitor.visit(request)
        case .listAlgorithms(let request): visitor.visit(request)
        case .listIdentifiers(let request): visitor.visit(request)
        case .getTemplates(let request): visitor.visit(request)
        case .deleteTemplate(let request): visitor.visit(request)
        case .deleteIdentifier(let request): visitor.visit(request)
        case .deleteGallery(let request): visitor.visit(request)
        case .defineGallery(let request): visitor.visit(request)
        case .migrationStatus(let request): visitor.visit(request)
        case .stats(let request): visitor.visit(request)
        case .export(let request): visitor.visit(request)
        case .import(let request): visitor.visit(request)
        case .backup(let request): visitor.visit(request)
        case .verify(let request): visitor.visit(request)
        case .enrolLivenessProfile(let request): visitor.visit(request)
        case .getLivenessProfile(let request): visitor.visit(request)
        case .deleteLivenessProfile(let request): visitor.visit(request)
        case .audit(let request): visitor.visit(request)
        case .setEncryptionKey(let request): visitor.visit(request)
        }
    }
}
