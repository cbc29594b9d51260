import Logging
import NIOCore
import NIOPosix
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Synchronization

/// Turns one request frame into one response frame: decodes the request, runs the operation on the
/// engine, encodes the result or the error. Never throws: every failure becomes an error response.
///
/// Template values never reach the log: requests are logged by operation, gallery and outcome only.
public final class RequestDispatcher: Sendable {
    /// The daemon's version, reported by hello and stats.
    public static let serverVersion = "0.2.0"

    let engine: Engine
    let logger: Logger
    /// Who may do what; replaced on SIGHUP.
    let policy: Mutex<AccessPolicy>
    let startedAt: ContinuousClock.Instant
    let connections = Atomic<Int>(0)
    let requestsServed = Atomic<Int>(0)

    public init(engine: Engine, logger: Logger, policy: AccessPolicy) {
        self.engine = engine
        self.logger = logger
        self.policy = Mutex(policy)
        self.startedAt = .now
    }

    /// What to send back, and whether to close the connection after it.
    public struct Reply: Sendable {
        public var frame: ByteBuffer
        public var closeConnection: Bool
    }

    /// Replaces the access policy (SIGHUP).
    public func update(policy: AccessPolicy) {
        self.policy.withLock { $0 = policy }
    }

    /// A decoded request that passed the checks and still has to run (see ``begin(_:from:)``).
    public struct Pending: Sendable {
        let id: UInt64
        let operation: Registry_V1_Request.OneOf_Operation
    }

    /// The outcome of ``begin(_:from:)``: a reply already, or an operation to run with ``finish(_:from:)``.
    public enum Start: Sendable {
        case reply(Reply)
        case pending(Pending)
    }

    /// Answers one frame's bytes from `peer` (nil: its credentials could not be read, so it has no rights).
    public func respond(to frame: ByteBuffer, from peer: Peer?) async -> Reply {
        switch self.begin(frame, from: peer) {
        case .reply(let reply): return reply
        case .pending(let pending): return await self.finish(pending, from: peer)
        }
    }

    /// Decodes a frame and applies the checks every request passes (version, rights, template
    /// sizes); answers at once what needs no waiting: refusals, and authentications that write
    /// nothing (the common case, answered on the caller's thread without a task switch).
    public func begin(_ frame: ByteBuffer, from peer: Peer?) -> Start {
        let request: Registry_V1_Request
        do {
            request = try Registry_V1_Request(serializedBytes: frame.readableBytesSpan)
        } catch {
            return .reply(self.reply(id: 0, error: RegistryError(.malformedRequest, "the frame is not a valid registry.v1.Request")))
        }
        self.requestsServed.add(1, ordering: .relaxed)
        guard let operation = request.operation else {
            return .reply(self.reply(id: request.id, error: RegistryError(.malformedRequest, "the request carries no operation")))
        }
        if case .hello(let hello) = operation, hello.protocolMajor != ProtocolVersion.major {
            var reply = self.reply(
                id: request.id,
                error: RegistryError(
                    .unsupportedVersion,
                    "protocol version \(hello.protocolMajor) is not supported; this daemon speaks \(ProtocolVersion.major).\(ProtocolVersion.minor)"))
            reply.closeConnection = true
            return .reply(reply)
        }
        if let operationClass = OperationClass.of(operation) {
            let gallery = OperationClass.gallery(of: operation)
            let allowed = peer.map { peer in self.policy.withLock { $0.allows(peer, operationClass, gallery: gallery) } } ?? false
            guard allowed else {
                // Names the missing right only: nothing about who is enrolled.
                let who = peer.map { "uid \($0.uid)" } ?? "a peer without credentials"
                let scope = gallery.isEmpty ? "on every gallery" : "in gallery '\(gallery)'"
                self.logger.notice(
                    "permission denied",
                    metadata: [
                        "uid": "\(peer.map { String($0.uid) } ?? "?")", "pid": "\(peer.map { String($0.pid) } ?? "?")",
                        "operation": "\(Self.name(of: operation))", "right": "\(operationClass.rawValue)", "gallery": "\(gallery)",
                    ])
                let reply = self.reply(
                    id: request.id,
                    error: RegistryError(.permissionDenied, "\(who) lacks the '\(operationClass.rawValue)' right \(scope)"))
                self.audit(operation, outcome: .error(Registry_V1_Error(RegistryError(.permissionDenied, ""))), peer: peer)
                return .reply(reply)
            }
        }
        do {
            try Self.checkTemplates(of: operation)
            if case .authenticate(let authenticate) = operation {
                guard
                    let authentication = try engine.authenticateImmediately(
                        gallery: Self.gallery(authenticate.gallery), identifier: authenticate.identifier, face: Face(authenticate.face),
                        autoEnrol: authenticate.hasAutoEnrol ? authenticate.autoEnrol : true)
                else { return .pending(Pending(id: request.id, operation: operation)) }
                return .reply(self.answer(request.id, operation, .authenticate(Registry_V1_AuthenticateResult(authentication)), peer: peer))
            }
        } catch {
            return .reply(self.answer(request.id, operation, failure: error, peer: peer))
        }
        return .pending(Pending(id: request.id, operation: operation))
    }

    /// Answers a pending request with an error without running it (the daemon is draining).
    public func refuse(_ pending: Pending, with error: RegistryError, from peer: Peer?) -> Reply {
        self.answer(pending.id, pending.operation, failure: error, peer: peer)
    }

    /// Runs blocking work (LMDB page reads, backups, files) on NIO's blocking-work thread pool, never
    /// on the cooperative pool the requests' tasks share: with two cores, two blocked cooperative
    /// threads would stop every other request, and shutdown with them.
    private func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(body)
    }

    /// Runs a pending operation and answers it.
    public func finish(_ pending: Pending, from peer: Peer?) async -> Reply {
        do {
            return self.answer(pending.id, pending.operation, try await self.perform(pending.operation), peer: peer)
        } catch {
            return self.answer(pending.id, pending.operation, failure: error, peer: peer)
        }
    }

    /// The reply carrying an operation's result, audited.
    private func answer(
        _ id: UInt64, _ operation: Registry_V1_Request.OneOf_Operation, _ result: Registry_V1_Response.OneOf_Result, peer: Peer?
    ) -> Reply {
        var response = Registry_V1_Response()
        response.id = id
        response.result = result
        self.audit(operation, outcome: result, peer: peer)
        return Reply(frame: Self.encode(response), closeConnection: false)
    }

    /// The reply carrying an operation's failure, logged by code (never with templates) and audited.
    private func answer(_ id: UInt64, _ operation: Registry_V1_Request.OneOf_Operation, failure: any Error, peer: Peer?) -> Reply {
        let error: RegistryError
        if let refusal = failure as? RegistryError {
            self.logger.debug("request refused", metadata: ["operation": "\(Self.name(of: operation))", "code": "\(refusal.code.rawValue)"])
            error = refusal
        } else {
            self.logger.warning("request failed", metadata: ["operation": "\(Self.name(of: operation))", "error": "\(failure)"])
            error = RegistryError(.internal, "\(failure)")
        }
        return self.answer(id, operation, .error(Registry_V1_Error(error)), peer: peer)
    }

    /// Adds the request to the audit trail: who, what, which identifiers, the outcome. Never templates.
    private func audit(_ operation: Registry_V1_Request.OneOf_Operation, outcome result: Registry_V1_Response.OneOf_Result, peer: Peer?) {
        if case .hello = operation { return }
        var identifiers: [String] = []
        switch operation {
        case .register(let request): identifiers = [request.identifier]
        case .authenticate(let request): identifiers = [request.identifier]
        case .deleteIdentifier(let request): identifiers = [request.identifier]
        case .getTemplates(let request): identifiers = [request.identifier]
        case .enrolLivenessProfile(let request): identifiers = [request.identifier]
        case .getLivenessProfile(let request): identifiers = [request.identifier]
        case .deleteLivenessProfile(let request): identifiers = [request.identifier]
        case .audit(let request) where !request.identifier.isEmpty: identifiers = [request.identifier]
        default: break
        }
        var outcome = "ok"
        var score: Float?
        var errorCode: String?
        switch result {
        case .error(let error):
            outcome = "refused"
            errorCode = RegistryError.Code(error.code).rawValue
        case .identify(let identification):
            identifiers = identification.matches.map(\.identifier)
            outcome = identification.matches.isEmpty ? "no-match" : "match"
            score = identification.matches.first?.score
        case .authenticate(let authentication):
            outcome = authentication.authenticated ? "match" : "no-match"
            score = authentication.score
        default:
            break
        }
        self.engine.recordAudit(AuditEntry(
            time: AuditEntry.now(), uid: peer?.uid ?? .max, pid: peer?.pid ?? -1, operation: Self.name(of: operation),
            gallery: OperationClass.gallery(of: operation), identifiers: identifiers, outcome: outcome, score: score,
            errorCode: errorCode))
    }

    /// A response carrying only an error.
    public func reply(id: UInt64, error: RegistryError) -> Reply {
        var response = Registry_V1_Response()
        response.id = id
        response.result = .error(Registry_V1_Error(error))
        return Reply(frame: Self.encode(response), closeConnection: false)
    }

    static func encode(_ response: Registry_V1_Response) -> ByteBuffer {
        // Encoding a message built from valid values cannot fail; fall back to an empty frame if it ever does.
        (try? ByteBuffer(message: response)) ?? ByteBuffer()
    }

    private func perform(_ operation: Registry_V1_Request.OneOf_Operation) async throws -> Registry_V1_Response.OneOf_Result {
        let engine = self.engine
        switch operation {
        case .hello:
            return .hello(.with {
                $0.protocolMajor = ProtocolVersion.major
                $0.protocolMinor = ProtocolVersion.minor
                $0.serverVersion = Self.serverVersion
            })
        case .register(let request):
            let registration = try await engine.register(
                gallery: Self.gallery(request.gallery), identifier: request.identifier, face: Face(request.face), force: request.force)
            return .register(Registry_V1_RegisterResult(registration))
        case .identify(let request):
            let identification = try await engine.identify(
                gallery: Self.gallery(request.gallery), face: Face(request.face),
                safe: request.hasSafe ? request.safe : true, autoEnrol: request.hasAutoEnrol ? request.autoEnrol : true,
                limit: request.limit == 0 ? nil : Int(request.limit))
            return .identify(Registry_V1_IdentifyResult(identification))
        case .authenticate(let request):
            let authentication = try await engine.authenticate(
                gallery: Self.gallery(request.gallery), identifier: request.identifier, face: Face(request.face),
                autoEnrol: request.hasAutoEnrol ? request.autoEnrol : true)
            return .authenticate(Registry_V1_AuthenticateResult(authentication))
        case .listGalleries:
            return .listGalleries(.with { $0.galleries = engine.galleries().map(Registry_V1_Gallery.init) })
        case .listAlgorithms:
            return .listAlgorithms(.with { $0.algorithms = engine.catalog.all.map(Registry_V1_Algorithm.init) })
        case .listIdentifiers(let request):
            let page = try await self.blocking {
                try engine.identifiers(
                    gallery: Self.gallery(request.gallery), after: request.after.isEmpty ? nil : request.after,
                    limit: request.limit == 0 ? 100 : Int(request.limit))
            }
            return .listIdentifiers(.with {
                $0.identifiers = page.identifiers
                if let next = page.next { $0.next = next }
            })
        case .getTemplates(let request):
            let templates = try await self.blocking {
                try engine.templates(
                    gallery: Self.gallery(request.gallery), identifier: request.identifier, includeData: request.includeData)
            }
            return .getTemplates(.with { $0.templates = templates.map(Registry_V1_StoredTemplate.init) })
        case .deleteTemplate(let request):
            let deleted = try await engine.deleteTemplate(gallery: Self.gallery(request.gallery), id: request.templateID)
            return .deleteTemplate(.with { $0.deleted = deleted })
        case .deleteIdentifier(let request):
            let count = try await engine.deleteIdentifier(gallery: Self.gallery(request.gallery), identifier: request.identifier)
            return .deleteIdentifier(.with { $0.templatesDeleted = UInt64(count) })
        case .deleteGallery(let request):
            let count = try await engine.deleteGallery(request.gallery)
            return .deleteGallery(.with { $0.templatesDeleted = UInt64(count) })
        case .defineGallery(let request):
            let configuration = GalleryConfiguration(
                name: request.gallery,
                registries: request.registries.map {
                    RegistryConfiguration(
                        algorithm: $0.algorithm, thresholds: $0.hasThresholds ? Thresholds($0.thresholds) : nil,
                        minimumQuality: $0.hasMinimumQuality ? $0.minimumQuality : nil,
                        minimumAutoEnrolmentQuality: $0.hasMinimumAutoEnrolmentQuality ? $0.minimumAutoEnrolmentQuality : nil)
                },
                liveness: LivenessPolicy(request.liveness), livenessK: request.hasLivenessK ? request.livenessK : 2.0)
            return .defineGallery(Registry_V1_Gallery(try await engine.defineGallery(configuration)))
        case .migrationStatus(let request):
            let status = try engine.migrationStatus(gallery: Self.gallery(request.gallery))
            return .migrationStatus(.with { $0.registries = status.map(Registry_V1_MigrationStatusResult.Entry.init) })
        case .stats:
            let (commits, operations) = engine.commitStatistics
            let uptime = ContinuousClock.now - self.startedAt
            return .stats(.with {
                $0.serverVersion = Self.serverVersion
                $0.uptimeSeconds = UInt64(max(0, uptime.components.seconds))
                $0.openConnections = UInt64(self.connections.load(ordering: .relaxed))
                $0.requestsServed = UInt64(self.requestsServed.load(ordering: .relaxed))
                $0.storeBytes = UInt64(engine.storeBytesInUse)
                $0.commits = UInt64(commits)
                $0.committedOperations = UInt64(operations)
                $0.galleries = engine.galleries().map(Registry_V1_Gallery.init)
            })
        case .export(let request):
            let page = try await self.blocking {
                try engine.exportTemplates(
                    gallery: Self.gallery(request.gallery), after: request.afterTemplateID,
                    limit: request.limit == 0 ? 1000 : Int(request.limit))
            }
            return .export(.with {
                $0.templates = page.templates.map(Registry_V1_StoredTemplate.init)
                $0.nextAfterTemplateID = page.next ?? 0
            })
        case .import(let request):
            let ids = try await engine.importTemplates(
                gallery: Self.gallery(request.gallery),
                request.items.map { ImportItem(identifier: $0.identifier, template: FaceTemplate($0.template)) })
            return .import(.with { $0.templateIds = ids })
        case .backup(let request):
            guard !request.directory.isEmpty else { throw RegistryError.malformedRequest("backup needs a directory") }
            let bytes = try await self.blocking { try engine.backup(to: request.directory) }
            self.logger.info("backup written", metadata: ["directory": "\(request.directory)", "bytes": "\(bytes)"])
            return .backup(.with { $0.bytes = UInt64(bytes) })
        case .verify:
            let (checked, problems) = try await engine.verify()
            return .verify(.with {
                $0.templatesChecked = UInt64(checked)
                $0.problems = problems
            })
        case .enrolLivenessProfile(let request):
            var frames: [EnrolmentPose: [DepthFrame]] = [:]
            for pose in request.poses {
                guard let key = EnrolmentPose(rawValue: pose.pose) else {
                    throw RegistryError.malformedRequest(
                        "unknown pose '\(pose.pose.prefix(32))'; poses are \(EnrolmentPose.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                frames[key, default: []] += pose.frames.map(DepthFrame.init)
            }
            let profile = try await engine.enrolLivenessProfile(
                gallery: Self.gallery(request.gallery), identifier: request.identifier, frames: frames,
                k: request.hasK ? request.k : nil)
            return .enrolLivenessProfile(.with { $0.profile = Registry_V1_LivenessProfile(profile) })
        case .getLivenessProfile(let request):
            let profile = try engine.livenessProfile(gallery: Self.gallery(request.gallery), identifier: request.identifier)
            return .getLivenessProfile(.with { if let profile { $0.profile = Registry_V1_LivenessProfile(profile) } })
        case .deleteLivenessProfile(let request):
            let deleted = try await engine.deleteLivenessProfile(gallery: Self.gallery(request.gallery), identifier: request.identifier)
            return .deleteLivenessProfile(.with { $0.deleted = deleted })
        case .audit(let request):
            let query = AuditQuery(
                identifier: request.identifier.isEmpty ? nil : request.identifier,
                since: request.sinceMicros == 0 ? nil : request.sinceMicros, until: request.untilMicros == 0 ? nil : request.untilMicros,
                outcome: request.outcome.isEmpty ? nil : request.outcome, limit: request.limit == 0 ? 100 : Int(request.limit))
            // Entries waiting for their lazy flush first, so the answer includes every operation
            // finished before the query; then the scan, which may read many pages.
            try await engine.flushAudit()
            let entries = try await self.blocking { try engine.auditEntriesFlushed(query) }
            return .audit(.with { $0.entries = entries.map(Registry_V1_AuditEntry.init) })
        case .setEncryptionKey(let request):
            let key = try await self.blocking { try ServerConfiguration.readKey(path: request.keyFile) }
            let count = try await engine.setEncryptionKey(key)
            self.logger.notice("templates encrypted with a new key", metadata: ["templates": "\(count)"])
            return .setEncryptionKey(.with { $0.templates = UInt64(count) })
        }
    }

    /// A template is a vector or landmarks, never both: refuse instead of silently dropping one.
    static func checkTemplates(of operation: Registry_V1_Request.OneOf_Operation) throws(RegistryError) {
        let templates: [Registry_V1_Template]
        switch operation {
        case .register(let request): templates = request.face.templates
        case .identify(let request): templates = request.face.templates
        case .authenticate(let request): templates = request.face.templates
        case .import(let request): templates = request.items.map(\.template)
        default: return
        }
        if let mixed = templates.first(where: { !$0.vector.isEmpty && !$0.landmarks.isEmpty }) {
            throw .malformedRequest("the template for algorithm \(mixed.algorithm) carries both a vector and landmarks")
        }
    }

    /// An empty gallery field means the default gallery.
    static func gallery(_ name: String) -> String {
        name.isEmpty ? GalleryConfiguration.defaultName : name
    }

    static func name(of operation: Registry_V1_Request.OneOf_Operation) -> String {
        switch operation {
        case .hello: "hello"
        case .register: "register"
        case .identify: "identify"
        case .authenticate: "authenticate"
        case .listGalleries: "list_galleries"
        case .listAlgorithms: "list_algorithms"
        case .listIdentifiers: "list_identifiers"
        case .getTemplates: "get_templates"
        case .deleteTemplate: "delete_template"
        case .deleteIdentifier: "delete_identifier"
        case .deleteGallery: "delete_gallery"
        case .defineGallery: "define_gallery"
        case .migrationStatus: "migration_status"
        case .stats: "stats"
        case .export: "export"
        case .import: "import"
        case .backup: "backup"
        case .verify: "verify"
        case .enrolLivenessProfile: "enrol_liveness_profile"
        case .getLivenessProfile: "get_liveness_profile"
        case .deleteLivenessProfile: "delete_liveness_profile"
        case .audit: "audit"
        case .setEncryptionKey: "set_encryption_key"
        }
    }
}
