import Glibc
import Logging
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol
import TestSupport

@testable import RegistryServer

/// The one in-process server fixture: a real store in a fresh directory, its metrics, and the
/// dispatcher over them with the default access policy (root, the daemon's user, registryd-admin).
struct ServerFixture {
    let directory: String
    let metrics = ServerMetrics()
    let engine: Engine
    let dispatcher: RequestDispatcher
    /// A peer with every right under the default policy.
    let root = Peer(uid: 0, gid: 0, pid: 1, groups: [0])

    /// - Parameter handReadsRequests: false reads every request with SwiftProtobuf.
    init(_ name: String, handReadsRequests: Bool = true) throws {
        self.directory = TemporaryDirectory(name).path
        self.engine = try Engine(path: self.directory + "/data", metrics: self.metrics.factory)
        self.dispatcher = RequestDispatcher(
            engine: self.engine, logger: Logger(label: "test"), policy: try AccessPolicy(nil), metrics: self.metrics,
            readsRequestsByHand: handReadsRequests)
    }

    /// Closes the store and removes its directory.
    func close() {
        self.engine.close()
        _ = system("rm -rf '\(self.directory)'")
    }
}
