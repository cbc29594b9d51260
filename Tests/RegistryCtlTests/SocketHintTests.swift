import Glibc
import RegistryClient
import TestSupport
import Testing

@testable import registryctl

/// What registryctl says when it cannot reach the daemon: from real sockets and a real connection
/// attempt, the reason in a word and what to do, never a path or a group that points the wrong way.
@Suite struct SocketHintTests {
    /// The error a connection to `path` gives, as registryctl reports it.
    static func report(_ path: String, implicit: Bool = false) async throws -> [String] {
        do {
            let client = try await RegistryConnection.connect(socketPath: path)
            await client.close()
            Issue.record("\(path) accepted a connection")
            return []
        } catch let error as RegistryClientError {
            return ErrorReport(SocketUnreachable(error, implicit: implicit)).text(.builtIn)
        }
    }

    /// A Unix socket file at `path` that nothing listens on (a killed daemon's).
    static func staleSocket(_ path: String) throws {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0, "bind \(path): errno \(errno)")
    }

    @Test func aMissingSocketSaysToStartTheDaemonAndWhichPathsWereTried() async throws {
        let directory = TemporaryDirectory("registryctl-socket")
        defer { directory.remove() }
        let explicit = try await Self.report(directory.path + "/missing.sock")
        #expect(explicit.first == "registryctl: UNREACHABLE: cannot reach registryd at \(directory.path)/missing.sock: No such file or directory")
        #expect(explicit.contains { $0.contains("no registryd has made this socket: start one") })
        #expect(!explicit.contains { $0.contains("./run/registryd.sock") }, "a socket named by --socket is the only one: \(explicit)")

        // Chosen by registryctl: both the development and the installed path, with what each is.
        let implicit = try await Self.report(directory.path + "/missing.sock", implicit: true)
        let tried = try #require(implicit.first { $0.contains("without --socket") })
        #expect(tried.contains("./run/registryd.sock (") && tried.contains("/run/registryd/registryd.sock ("), "\(tried)")
    }

    @Test func aSocketNobodyListensOnIsCalledStale() async throws {
        let directory = TemporaryDirectory("registryctl-socket")
        defer { directory.remove() }
        try Self.staleSocket(directory.path + "/stale.sock")
        let lines = try await Self.report(directory.path + "/stale.sock")
        #expect(lines.first?.hasSuffix("Connection refused") == true, "\(lines)")
        #expect(lines.contains { $0.contains("no registryd listens on it") }, "\(lines)")
        #expect(SocketUnreachable.state(of: directory.path + "/stale.sock") == "a socket")
        #expect(SocketUnreachable.state(of: directory.path + "/none.sock") == "missing")
    }

    /// The hint names the socket's own group, and never asks to join root.
    @Test func permissionHintsNameTheSocketsGroupButNeverRoot() throws {
        let directory = TemporaryDirectory("registryctl-socket")
        defer { directory.remove() }
        let path = directory.path + "/group.sock"
        try Self.staleSocket(path)
        #expect(chown(path, 0, 0) == 0)
        let root = SocketUnreachable.permissionHint(socketPath: path)
        #expect(!root.joined().contains("usermod"), "\(root)")
        #expect(root.first?.contains("belongs to group root") == true, "\(root)")

        let nogroup = try #require(getgrnam("nogroup"), "Debian's nogroup")
        #expect(chown(path, 0, nogroup.pointee.gr_gid) == 0)
        let hint = SocketUnreachable.permissionHint(socketPath: path)
        #expect(hint.first?.contains("usermod -aG nogroup USER") == true, "\(hint)")
        // As reported (the tests run as root, which no permission stops: built from the error).
        let report = ErrorReport(
            SocketUnreachable(.unreachable(socketPath: path, reason: String(cString: strerror(EACCES))), implicit: false)
        ).text(.builtIn)
        #expect(report.count == 3 && report.dropFirst().allSatisfy { $0.contains("nogroup") }, "\(report)")
    }
}
