import Glibc
import NIOCore
import NIOPosix
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Synchronization

/// Why a client call did not get an answer from the daemon (as opposed to the daemon answering with
/// an error, which is thrown as a ``RegistryError``).
public enum RegistryClientError: Error, CustomStringConvertible {
    /// No daemon accepted a connection on the socket.
    case unreachable(socketPath: String, reason: String)
    /// The connection closed before the response arrived.
    case connectionClosed
    /// The daemon answered with a result of another operation (a daemon bug).
    case unexpectedResponse(String)

    public var description: String {
        switch self {
        case .unreachable(let path, let reason): "cannot reach registryd at \(path): \(reason)"
        case .connectionClosed: "the connection to registryd closed before the response arrived"
        case .unexpectedResponse(let what): "registryd sent an unexpected response: \(what)"
        }
    }
}

/// A connection to `registryd`: an async call per operation, any number of calls in flight at once
/// (they are pipelined on the one connection and answered in order).
///
/// ```swift
/// let client = try await RegistryConnection.connect(socketPath: "run/registryd.sock")
/// defer { Task { await client.close() } }
/// let result = try await client.identify(face: Face(FaceTemplate(algorithm: 24, vector: values)))
/// ```
///
/// Refusals and failures the daemon reports are thrown as ``RegistryError`` with the PROTOCOL.md §5 code
/// and details; transport failures as ``RegistryClientError``.
public final class RegistryConnection: Sendable {
    private let channel: any Channel
    private let nextId = Atomic<UInt64>(1)

    private init(channel: any Channel) {
        self.channel = channel
    }

    /// Connects to the daemon's Unix socket.
    /// - Throws: ``RegistryClientError/unreachable(socketPath:reason:)``.
    /// - Parameter maximumFrameLength: the largest response accepted (responses such as export pages
    ///   can be much larger than the daemon's request limit).
    public static func connect(
        socketPath: String,
        maximumFrameLength: Int = 256 << 20,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> RegistryConnection {
        let bootstrap = ClientBootstrap(group: group).channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maximumFrameLength: maximumFrameLength)))
                try channel.pipeline.syncOperations.addHandler(MessageToByteHandler(FrameEncoder()))
                try channel.pipeline.syncOperations.addHandler(ResponseHandler())
            }
        }
        do {
            let channel = try await bootstrap.connect(unixDomainSocketPath: socketPath).get()
            return RegistryConnection(channel: channel)
        } catch let error as IOError {
            throw RegistryClientError.unreachable(socketPath: socketPath, reason: String(cString: strerror(error.errnoCode)))
        } catch {
            throw RegistryClientError.unreachable(socketPath: socketPath, reason: "\(error)")
        }
    }

    /// Whether the connection is still open (false once the daemon or ``close()`` closed it).
    public var isActive: Bool { self.channel.isActive }

    /// Closes the connection. Calls still in flight fail with ``RegistryClientError/connectionClosed``.
    public func close() async {
        try? await self.channel.close()
    }

    /// Sends one request and returns the daemon's result.
    /// - Throws: ``RegistryError`` when the daemon answers with an error, ``RegistryClientError`` when
    ///   it does not answer.
    public func send(_ operation: Registry_V1_Request.OneOf_Operation) async throws -> Registry_V1_Response.OneOf_Result {
        var request = Registry_V1_Request()
        request.id = self.nextId.wrappingAdd(1, ordering: .relaxed).oldValue
        request.operation = operation
        let promise = self.channel.eventLoop.makePromise(of: Registry_V1_Response.self)
        // A write that fails (a closed connection) must fail the call too, or it would wait forever.
        let written = self.channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { _ in promise.fail(RegistryClientError.connectionClosed) }
        self.channel.writeAndFlush(PendingRequest(request: request, promise: promise), promise: written)
        let response = try await promise.futureResult.get()
        switch response.result {
        case .error(let error): throw RegistryError(error)
        case .some(let result): return result
        case nil: throw RegistryClientError.unexpectedResponse("a response without a result")
        }
    }

    // MARK: Operations

    /// Exchanges protocol versions; optional, but the first call when made.
    public func hello(clientName: String) async throws -> Registry_V1_HelloResult {
        let result = try await self.send(
            .hello(
                .with {
                    $0.protocolMajor = ProtocolVersion.major
                    $0.protocolMinor = ProtocolVersion.minor
                    $0.clientName = clientName
                }))
        guard case .hello(let hello) = result else { throw Self.unexpected(result) }
        return hello
    }

    /// Registers a face under an identifier (see ``Engine/register(gallery:identifier:face:force:)``).
    public func register(gallery: String = "", identifier: String, face: Face, force: Bool = false) async throws -> Registration {
        let result = try await self.send(
            .register(
                .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                    $0.face = Registry_V1_Face(face)
                    $0.force = force
                }))
        guard case .register(let registration) = result else { throw Self.unexpected(result) }
        return Registration(registration)
    }

    /// Identifies a face (see ``Engine/identify(gallery:face:safe:autoEnrol:limit:)``).
    public func identify(gallery: String = "", face: Face, safe: Bool = true, autoEnrol: Bool = true, limit: Int? = nil) async throws
        -> Identification
    {
        let result = try await self.send(
            .identify(
                .with {
                    $0.gallery = gallery
                    $0.face = Registry_V1_Face(face)
                    $0.safe = safe
                    $0.autoEnrol = autoEnrol
                    $0.limit = UInt32(clamping: limit ?? 0)
                }))
        guard case .identify(let identification) = result else { throw Self.unexpected(result) }
        return Identification(identification)
    }

    /// Authenticates a face as an identifier (see ``Engine/authenticate(gallery:identifier:face:autoEnrol:)``).
    public func authenticate(gallery: String = "", identifier: String, face: Face, autoEnrol: Bool = true) async throws -> Authentication {
        let result = try await self.send(
            .authenticate(
                .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                    $0.face = Registry_V1_Face(face)
                    $0.autoEnrol = autoEnrol
                }))
        guard case .authenticate(let authentication) = result else { throw Self.unexpected(result) }
        return Authentication(authentication)
    }

    public func galleries() async throws -> [GalleryInfo] {
        let result = try await self.send(.listGalleries(.init()))
        guard case .listGalleries(let list) = result else { throw Self.unexpected(result) }
        return list.galleries.map(GalleryInfo.init)
    }

    public func algorithms() async throws -> [Algorithm] {
        let result = try await self.send(.listAlgorithms(.init()))
        guard case .listAlgorithms(let list) = result else { throw Self.unexpected(result) }
        return list.algorithms.map(Algorithm.init)
    }

    public func identifiers(gallery: String = "", after: String? = nil, limit: Int = 100) async throws -> IdentifierPage {
        let result = try await self.send(
            .listIdentifiers(
                .with {
                    $0.gallery = gallery
                    $0.after = after ?? ""
                    $0.limit = UInt32(clamping: limit)
                }))
        guard case .listIdentifiers(let page) = result else { throw Self.unexpected(result) }
        return IdentifierPage(identifiers: page.identifiers, next: page.hasNext ? page.next : nil)
    }

    public func templates(gallery: String = "", identifier: String, includeData: Bool = false) async throws -> [StoredTemplate] {
        let result = try await self.send(
            .getTemplates(
                .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                    $0.includeData = includeData
                }))
        guard case .getTemplates(let list) = result else { throw Self.unexpected(result) }
        return list.templates.map(StoredTemplate.init)
    }

    public func deleteTemplate(gallery: String = "", id: UInt64) async throws -> Bool {
        let result = try await self.send(
            .deleteTemplate(
                .with {
                    $0.gallery = gallery
                    $0.templateID = id
                }))
        guard case .deleteTemplate(let deleted) = result else { throw Self.unexpected(result) }
        return deleted.deleted
    }

    public func deleteIdentifier(gallery: String = "", identifier: String) async throws -> Int {
        let result = try await self.send(
            .deleteIdentifier(
                .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                }))
        guard case .deleteIdentifier(let deleted) = result else { throw Self.unexpected(result) }
        return Int(deleted.templatesDeleted)
    }

    public func deleteGallery(_ gallery: String) async throws -> Int {
        let result = try await self.send(.deleteGallery(.with { $0.gallery = gallery }))
        guard case .deleteGallery(let deleted) = result else { throw Self.unexpected(result) }
        return Int(deleted.templatesDeleted)
    }

    @discardableResult
    public func defineGallery(_ configuration: GalleryConfiguration) async throws -> GalleryInfo {
        let result = try await self.send(.defineGallery(Registry_V1_DefineGalleryRequest(configuration)))
        guard case .defineGallery(let gallery) = result else { throw Self.unexpected(result) }
        return GalleryInfo(gallery)
    }

    public func migrationStatus(gallery: String = "") async throws -> [MigrationStatus] {
        let result = try await self.send(.migrationStatus(.with { $0.gallery = gallery }))
        guard case .migrationStatus(let status) = result else { throw Self.unexpected(result) }
        return status.registries.map(MigrationStatus.init)
    }

    public func stats() async throws -> Registry_V1_StatsResult {
        let result = try await self.send(.stats(.init()))
        guard case .stats(let stats) = result else { throw Self.unexpected(result) }
        return stats
    }

    /// One page of a gallery's templates with data, in registration order.
    public func export(gallery: String = "", after: UInt64 = 0, limit: Int = 1000) async throws -> (templates: [StoredTemplate], next: UInt64?) {
        let result = try await self.send(
            .export(
                .with {
                    $0.gallery = gallery
                    $0.afterTemplateID = after
                    $0.limit = UInt32(clamping: limit)
                }))
        guard case .export(let page) = result else { throw Self.unexpected(result) }
        return (page.templates.map(StoredTemplate.init), page.nextAfterTemplateID == 0 ? nil : page.nextAfterTemplateID)
    }

    /// One page of a gallery's liveness profiles, in identifier order, after `after` (exclusive).
    public func exportLivenessProfiles(gallery: String = "", after: String? = nil, limit: Int = 1000) async throws -> (
        profiles: [ProfileEntry], next: String?
    ) {
        let result = try await self.send(
            .export(
                .with {
                    $0.gallery = gallery
                    $0.livenessProfiles = true
                    $0.afterIdentifier = after ?? ""
                    $0.limit = UInt32(clamping: limit)
                }))
        guard case .export(let page) = result else { throw Self.unexpected(result) }
        var profiles: [ProfileEntry] = []
        for entry in page.livenessProfiles {
            guard let profile = ProfileEntry(entry) else { throw Self.unexpected(result) }
            profiles.append(profile)
        }
        return (profiles, page.hasNextAfterIdentifier ? page.nextAfterIdentifier : nil)
    }

    public func importTemplates(gallery: String = "", _ items: [ImportItem]) async throws -> [UInt64] {
        try await self.importTemplates(gallery: gallery, items, skipExisting: false).templateIds
    }

    /// Imports items keeping their time, source and quality (see ``Engine/importTemplates(gallery:_:skipExisting:)``).
    /// `profiles` are set after the items, in the same transaction.
    public func importTemplates(
        gallery: String = "", _ items: [ImportItem], skipExisting: Bool, profiles: [ProfileEntry] = []
    ) async throws -> ImportOutcome {
        let result = try await self.send(
            .import(
                .with {
                    $0.gallery = gallery
                    $0.items = items.map(Registry_V1_ImportRequest.Item.init)
                    $0.skipExisting = skipExisting
                    $0.livenessProfiles = profiles.map(Registry_V1_LivenessProfileEntry.init)
                }))
        guard case .import(let imported) = result else { throw Self.unexpected(result) }
        return ImportOutcome(
            templateIds: imported.templateIds, skipped: Int(imported.skipped), profilesStored: Int(imported.livenessProfilesStored),
            profilesSkipped: Int(imported.livenessProfilesSkipped))
    }

    /// Has the daemon write a hot copy of the store into a new directory it names (by the copy's
    /// UTC start time) inside its backup root, or inside `directory` when the daemon's configuration
    /// allows that one (`backup.allowedDirectories`; any other is refused with `PERMISSION_DENIED`).
    /// - Parameter directory: an absolute path as the daemon sees it; empty for the backup root.
    /// - Returns: the new directory the daemon wrote, and the copy's size in bytes.
    public func backup(into directory: String = "") async throws -> (directory: String, bytes: Int) {
        let result = try await self.send(.backup(.with { $0.directory = directory }))
        guard case .backup(let backup) = result else { throw Self.unexpected(result) }
        return (backup.directory, Int(backup.bytes))
    }

    public func verify() async throws -> (checked: Int, problems: [String]) {
        let result = try await self.send(.verify(.init()))
        guard case .verify(let verify) = result else { throw Self.unexpected(result) }
        return (Int(verify.templatesChecked), verify.problems)
    }

    /// Enrols (or re-enrols) an identifier's liveness profile from depth frames per enrolment pose.
    @discardableResult
    public func enrolLivenessProfile(
        gallery: String = "", identifier: String, frames: [EnrolmentPose: [DepthFrame]], k: Float? = nil
    ) async throws -> LivenessProfile {
        let result = try await self.send(
            .enrolLivenessProfile(
                .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                    $0.poses = EnrolmentPose.allCases.compactMap { pose in
                        frames[pose].map { frames in
                            .with {
                                $0.pose = pose.rawValue
                                $0.frames = frames.map(Registry_V1_DepthFrame.init)
                            }
                        }
                    }
                    if let k { $0.k = k }
                }))
        guard case .enrolLivenessProfile(let enrolled) = result, let profile = LivenessProfile(enrolled.profile) else {
            throw Self.unexpected(result)
        }
        return profile
    }

    /// An identifier's liveness profile, or nil when it has none.
    public func livenessProfile(gallery: String = "", identifier: String) async throws -> LivenessProfile? {
        let result = try await self.send(
            .getLivenessProfile(
                .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                }))
        guard case .getLivenessProfile(let found) = result else { throw Self.unexpected(result) }
        return found.hasProfile ? LivenessProfile(found.profile) : nil
    }

    /// Erases an identifier's liveness profile; returns whether it had one.
    public func deleteLivenessProfile(gallery: String = "", identifier: String) async throws -> Bool {
        let result = try await self.send(
            .deleteLivenessProfile(
                .with {
                    $0.gallery = gallery
                    $0.identifier = identifier
                }))
        guard case .deleteLivenessProfile(let deleted) = result else { throw Self.unexpected(result) }
        return deleted.deleted
    }

    /// The newest audit entries matching `query`, oldest first.
    public func audit(_ query: AuditQuery) async throws -> [AuditEntry] {
        let result = try await self.send(
            .audit(
                .with {
                    $0.identifier = query.identifier ?? ""
                    $0.sinceMicros = query.since ?? 0
                    $0.untilMicros = query.until ?? 0
                    $0.outcome = query.outcome?.rawValue ?? ""
                    $0.limit = UInt32(clamping: query.limit)
                }))
        guard case .audit(let audit) = result else { throw Self.unexpected(result) }
        return audit.entries.map(AuditEntry.init)
    }

    /// Encrypts (or re-encrypts) every template at rest with the key in `keyFile`, a path the daemon reads.
    public func setEncryptionKey(keyFile: String) async throws -> Int {
        let result = try await self.send(.setEncryptionKey(.with { $0.keyFile = keyFile }))
        guard case .setEncryptionKey(let done) = result else { throw Self.unexpected(result) }
        return Int(done.templates)
    }

    private static func unexpected(_ result: Registry_V1_Response.OneOf_Result) -> RegistryClientError {
        // Only the case's name: the payload may hold templates.
        .unexpectedResponse("a \(String(describing: result).prefix { $0 != "(" }) result")
    }
}

/// A request on its way out, with the promise its response completes.
struct PendingRequest {
    let request: Registry_V1_Request
    let promise: EventLoopPromise<Registry_V1_Response>
}

/// Encodes outgoing requests and matches incoming responses to them, on the channel's event loop.
/// Responses come in request order, so the pending promises form a queue; the id is checked too.
final class ResponseHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = PendingRequest
    typealias OutboundOut = ByteBuffer

    private var pending: CircularBuffer<(id: UInt64, promise: EventLoopPromise<Registry_V1_Response>)> = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = Self.unwrapOutboundIn(data)
        do {
            let frame = try ByteBuffer(message: request.request, allocator: context.channel.allocator)
            self.pending.append((request.request.id, request.promise))
            context.write(Self.wrapOutboundOut(frame), promise: promise)
        } catch {
            request.promise.fail(error)
            promise?.fail(error)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        guard let response = try? Registry_V1_Response(serializedBytes: frame.readableBytesSpan) else {
            self.failAll(RegistryClientError.unexpectedResponse("an undecodable frame"))
            context.close(promise: nil)
            return
        }
        // Id 0 answers something the daemon could not attribute to a request (a connection-level
        // error such as FRAME_TOO_LARGE): it fails the oldest call.
        guard let first = self.pending.first, response.id == first.id || response.id == 0 else {
            self.failAll(RegistryClientError.unexpectedResponse("a response to request \(response.id) out of order"))
            context.close(promise: nil)
            return
        }
        self.pending.removeFirst()
        first.promise.succeed(response)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.failAll(RegistryClientError.connectionClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.failAll(error)
        context.close(promise: nil)
    }

    private func failAll(_ error: any Error) {
        while let next = self.pending.popFirst() { next.promise.fail(error) }
    }
}

@available(*, unavailable)
extension ResponseHandler: Sendable {}
