import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

/// Whether this machine can run the access-control test: it creates real users, so it needs root
/// and the shadow tools (CI runs as root).
private let canCreateUsers = getuid() == 0 && access("/usr/sbin/useradd", X_OK) == 0 && access("/usr/bin/setpriv", X_OK) == 0

/// Per-gallery, per-operation-class access control with real, different users (SO_PEERCRED).
@Suite(.enabled(if: canCreateUsers, "needs root, useradd and setpriv to create and act as test users"))
struct AccessControlTests {
    /// Creates the group and users once (idempotent: they may exist from an earlier run).
    static func ensureUsers() {
        _ = system("getent group regtest-apps >/dev/null || groupadd --system regtest-apps")
        for (user, group) in [("regtest-app", "regtest-apps"), ("regtest-admin", ""), ("regtest-none", "")] {
            let groups = group.isEmpty ? "" : "-G \(group)"
            _ = system("id -u \(user) >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin \(groups) \(user)")
        }
    }

    /// Runs registryctl as `user` (with its groups) and returns its exit status and output.
    func registryctl(as user: String, _ arguments: [String], socket: String) -> (status: Int32, output: String) {
        guard let binary = siblingExecutable("registryctl") else { return (-1, "registryctl not found") }
        let command = (["setpriv", "--reuid=\(user)", "--regid=\(user)", "--init-groups", binary] + arguments + ["--socket", socket, "--json"])
            .map { "'\($0)'" }.joined(separator: " ")
        guard let pipe = popen(command + " 2>&1", "r") else { return (-1, "popen failed") }
        var output = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), pipe) != nil {
            output += buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        }
        let status = pclose(pipe)
        return ((status >> 8) & 0xFF, output)
    }

    @Test func eachOperationClassIsAllowedAndRefusedAsThePolicySays() async throws {
        Self.ensureUsers()
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let configuration = directory + "/registryd.json"
        let policy = """
            {"access": {
              "*": {"admin": ["uid:0", "user:regtest-admin"]},
              "default": {"identify": ["group:regtest-apps"], "enrol": ["group:regtest-apps"], "admin": ["uid:0", "user:regtest-admin"]}
            }}
            """
        guard let file = fopen(configuration, "w") else { throw HarnessError("cannot write the configuration") }
        fputs(policy, file)
        fclose(file)
        let daemon = try Daemon(arguments: ["--config", configuration, "--log-level", "notice"])
        chmod(daemon.directory, 0o755)
        chmod(daemon.directory + "/run", 0o755)
        chmod(daemon.socketPath, 0o666)  // the test users are not in the socket's group: the policy decides
        let socket = daemon.socketPath
        // A template file readable by everyone.
        let face = directory + "/face.json"
        guard let template = fopen(face, "w") else {
            Issue.record("this guard did not hold: let template = fopen(face, \"w\")")
            return
        }
        fputs("{\"version\": 24, \"data\": [\(axis(3).map { String($0) }.joined(separator: ", "))]}", template)
        fclose(template)
        chmod(directory, 0o755)
        chmod(face, 0o644)

        // The app's group: identify and enrol in default; no admin.
        var result = self.registryctl(as: "regtest-app", ["register", "alice", face], socket: socket)
        #expect(result.status == 0, "\(result.output)")
        result = self.registryctl(as: "regtest-app", ["identify", face], socket: socket)
        #expect(result.status == 0, "\(result.output)")
        result = self.registryctl(as: "regtest-app", ["delete", "identifier", "alice"], socket: socket)
        #expect(result.status == 3 && result.output.contains("PERMISSION_DENIED") && result.output.contains("admin"), "\(result.output)")
        result = self.registryctl(as: "regtest-app", ["identifiers"], socket: socket)
        #expect(result.output.contains("PERMISSION_DENIED"), "listing who is enrolled is admin: \(result.output)")
        // Another gallery: no rights there for apps.
        result = self.registryctl(as: "regtest-app", ["identify", face, "--gallery", "other"], socket: socket)
        #expect(result.output.contains("PERMISSION_DENIED"), "\(result.output)")

        // A user with no rights: refused, and the refusal says nothing about who is enrolled.
        result = self.registryctl(as: "regtest-none", ["identify", face], socket: socket)
        #expect(result.status == 3 && result.output.contains("PERMISSION_DENIED") && !result.output.contains("alice"), "\(result.output)")
        result = self.registryctl(as: "regtest-none", ["register", "mallory", face], socket: socket)
        #expect(result.output.contains("PERMISSION_DENIED"), "\(result.output)")
        // Hello, the gallery list and stats need no right.
        result = self.registryctl(as: "regtest-none", ["galleries"], socket: socket)
        #expect(result.status == 0, "\(result.output)")

        // The admin may delete.
        result = self.registryctl(as: "regtest-admin", ["delete", "identifier", "alice"], socket: socket)
        #expect(result.status == 0, "\(result.output)")

        // Every refusal is in the audit trail with the peer's uid and pid (read as root: admin).
        let client = try await daemon.client()
        let refused = try await AuditEndToEndTests.entries(client, AuditQuery(outcome: .refused), atLeast: 5)
        await client.close()
        #expect(refused.count == 5, "\(refused)")
        #expect(refused.allSatisfy { $0.errorCode == "PERMISSION_DENIED" && $0.pid > 0 })
        let app = getpwnam("regtest-app").map { $0.pointee.pw_uid }
        let none = getpwnam("regtest-none").map { $0.pointee.pw_uid }
        #expect(refused.filter { $0.uid == app }.map(\.operation) == ["delete_identifier", "list_identifiers", "identify"])
        #expect(refused.filter { $0.uid == none }.map(\.operation) == ["identify", "register"])
        // The refusals are in the daemon's log too.
        #expect(daemon.log.split(separator: "\n").filter { $0.contains("permission denied") }.count == 5)
    }

    @Test func aPolicyNamingAnUnknownGroupIsRefusedAtStartUp() throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        let configuration = directory + "/registryd.json"
        guard let file = fopen(configuration, "w") else {
            Issue.record("this guard did not hold: let file = fopen(configuration, \"w\")")
            return
        }
        fputs("{\"access\": {\"*\": {\"admin\": [\"group:no-such-group-here\"]}}}", file)
        fclose(file)
        #expect(throws: HarnessError.self) { _ = try Daemon(arguments: ["--config", configuration]) }
    }
}
