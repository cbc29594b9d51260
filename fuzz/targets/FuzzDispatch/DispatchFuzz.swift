import Dispatch
import Glibc
import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol
import RegistryServer
import SwiftProtobuf
import Synchronization

/// One frame body (a `registry.v1.Request`, or anything) through the dispatcher as the daemon runs it:
/// `begin`, then `finish` for what is still pending, from a peer with every right, against an engine on
/// a temporary directory opened once per process. Checked: exactly one reply, which decodes as a
/// `registry.v1.Response` with a result and the request's id (0 for an undecodable frame, the id read
/// before the broken bound for a frame RequestBounds refuses), and asks to
/// close the connection only for an unsupported hello.
///
/// Kept fast and small:
/// - the store is not durable (no fsync per commit: with one, every write would wait for the disk and
///   the writes would dominate the run; durability is the crash loop's subject, not the dispatcher's);
/// - the audit trail keeps 1000 entries (every request adds one);
/// - the engine is replaced by a fresh one every ``resetInterval`` inputs, or sooner once the store
///   passes ``resetBytes``, so scans and the map stay small. Verify, key rotation and identify read the
///   whole store: with 50,000 inputs and 16 MiB the target ran 476 inputs a second, with these 997
///   (A/B, 60 s each, twice). A crash that needs state built by earlier inputs may not reproduce from
///   its input alone: rerun it after the corpus, or with the inputs before it;
/// - paths in requests are replaced: a backup goes to one scratch directory (removed after), a key
///   file is a fixed valid key in the scratch directory. A fuzzer must not write to or read from
///   arbitrary paths (a FIFO or a terminal would block it).
final class DispatchFuzz: @unchecked Sendable {
    static let resetInterval = 2_000
    static let resetBytes = 2 << 20

    /// Only the fuzzing thread touches the harness (libFuzzer runs one input at a time).
    nonisolated(unsafe) static var shared: DispatchFuzz?

    let root: String
    let peer: Peer
    let logger = Logger(label: "registryd-fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
    var engine: Engine
    var dispatcher: RequestDispatcher
    var generation = 0
    var runs = 0

    init() {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/registryd-fuzz-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { fatalError("cannot create a temporary directory in \(base)") }
        self.root = String(cString: made)
        let keyFile = self.root + "/store.key"
        let key = String(repeating: "3f", count: 32)
        guard let file = fopen(keyFile, "w") else { fatalError("cannot write \(keyFile)") }
        fputs(key, file)
        fclose(file)
        self.peer = Peer(uid: getuid(), gid: getgid(), pid: getpid(), groups: [getgid()])
        (self.engine, self.dispatcher) = Self.open(self.root + "/store-0", logger: self.logger)
    }

    static func open(_ path: String, logger: Logger) -> (Engine, RequestDispatcher) {
        guard mkdir(path, 0o700) == 0 else { fatalError("cannot create \(path)") }
        var configuration = EngineConfiguration(initialMapSize: 1 << 20, maximumMapSize: 256 << 20, durable: false)
        configuration.auditRetention = AuditRetention(maximumEntries: 1000, maximumAgeSeconds: nil)
        do {
            let engine = try Engine(path: path, configuration: configuration)
            let policy = try AccessPolicy(nil)
            return (engine, RequestDispatcher(engine: engine, logger: logger, policy: policy))
        } catch {
            fatalError("cannot open the engine: \(error)")
        }
    }

    func resetIfDue() {
        self.runs += 1
        guard self.runs % Self.resetInterval == 0 || (self.runs % 100 == 0 && self.engine.storeBytesInUse > Self.resetBytes) else { return }
        self.engine.close()
        Self.remove(self.root + "/store-\(self.generation)")
        self.generation += 1
        (self.engine, self.dispatcher) = Self.open(self.root + "/store-\(self.generation)", logger: self.logger)
    }

    static func remove(_ directory: String) {
        for file in ["data.mdb", "data.mdb.created", "lock.mdb", "exclusive.lock"] { unlink(directory + "/" + file) }
        rmdir(directory)
    }

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        if Self.shared == nil {
            Self.shared = DispatchFuzz()
            atexit { DispatchFuzz.shared?.cleanUp() }
        }
        Self.shared!.run(input)
    }

    func cleanUp() {
        self.engine.close()
        Self.remove(self.root + "/store-\(self.generation)")
        Self.remove(self.root + "/backup")
        unlink(self.root + "/store.key")
        rmdir(self.root)
    }

    func run(_ input: UnsafeBufferPointer<UInt8>) {
        self.resetIfDue()
        var frame = ByteBuffer(bytes: input)
        // The dispatcher refuses a frame that breaks a bound before decoding it, with the id read so far;
        // the harness decodes only what the dispatcher would. (Decoding the rest here cost minutes: a
        // 4 MiB frame giving get_liveness_profile 104,849 times, each with unknown fields, which
        // SwiftProtobuf merges into one message, copying its unknown bytes each time.)
        let bounds = RequestBounds.check(frame)
        var request: Registry_V1_Request?
        if case .success = bounds { request = try? Registry_V1_Request(serializedBytes: Array(input)) }
        if var decoded = request, self.confinePaths(&decoded) {
            guard let bytes: [UInt8] = try? decoded.serializedBytes() else { preconditionFailure("a decoded request cannot be encoded") }
            frame = ByteBuffer(bytes: bytes)
            request = decoded
        }
        let reply = Self.wait { [dispatcher = self.dispatcher] completion in
            dispatcher.start(frame, from: self.peer, on: nil, replyTo: ReplyClosure { reply, _ in completion(reply) }, sequence: 0)
        }
        Self.remove(self.root + "/backup")
        guard let response = try? Registry_V1_Response(serializedBytes: Array(reply.frame.readableBytesView)) else {
            preconditionFailure("the reply is not a registry.v1.Response")
        }
        precondition(response.result != nil, "the reply carries no result")
        let id: UInt64
        switch bounds {
        case .success: id = request?.id ?? 0
        case .failure(let violation): id = violation.envelope.id
        }
        precondition(response.id == id, "the reply does not carry the request's id")
        var unsupportedHello = false
        if case .hello(let hello) = request?.operation { unsupportedHello = hello.protocolMajor != ProtocolVersion.major }
        precondition(reply.closeConnection == unsupportedHello, "only an unsupported hello closes the connection")
    }

    /// Points a request's file paths into the scratch directory; true when it changed one.
    func confinePaths(_ request: inout Registry_V1_Request) -> Bool {
        switch request.operation {
        case .backup(var backup) where !backup.directory.isEmpty:
            backup.directory = self.root + "/backup"
            request.operation = .backup(backup)
        case .setEncryptionKey(var key) where !key.keyFile.isEmpty:
            key.keyFile = self.root + "/store.key"
            request.operation = .setEncryptionKey(key)
        default:
            return false
        }
        return true
    }

    /// Runs an async operation to completion from the fuzzing thread.
    /// The reply `start` gives, waited for on this thread (at once when it completes inside the call).
    static func wait(_ start: (@escaping @Sendable (RequestDispatcher.Reply) -> Void) -> Void) -> RequestDispatcher.Reply {
        let slot = ReplySlot()
        start { reply in
            slot.reply.withLock { $0 = reply }
            slot.done.signal()
        }
        slot.done.wait()
        return slot.reply.withLock { $0 }!
    }
}

final class ReplySlot: Sendable {
    let reply = Mutex<RequestDispatcher.Reply?>(nil)
    let done = DispatchSemaphore(value: 0)
}
