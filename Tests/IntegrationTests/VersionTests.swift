import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import TestSupport
import Testing

/// `--version` on every binary, and the same version in what the daemon reports.
@Suite struct VersionTests {
    @Test(arguments: ["registryd", "registryctl", "registry-bench", "registry-load", "registry-crash-loop", "registry-landmark-eval"])
    func everyBinaryAnswersVersion(name: String) throws {
        let binary = try #require(siblingExecutable(name), "\(name) not built beside the tests")
        let directory = TemporaryDirectory("registry-version")
        defer { directory.remove() }
        let (status, output) = try run([binary, "--version"], log: directory.path + "/version.out")
        #expect(status == 0, "\(name) --version exited with \(status)")
        #expect(output == RegistryVersion.current + "\n")
    }

    @Test func theDaemonReportsTheSameVersion() async throws {
        let daemon = try Daemon()
        let client = try await daemon.client()
        #expect(try await client.hello(clientName: "version-test").serverVersion == RegistryVersion.current)
        #expect(try await client.stats().serverVersion == RegistryVersion.current)
        await client.close()
    }
}
