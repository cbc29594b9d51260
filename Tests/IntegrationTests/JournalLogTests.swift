import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// The daemon's log as journald gets it under systemd (JOURNAL_STREAM names its standard error).
@Suite struct JournalLogTests {
    @Test func journalLinesCarryPrioritiesNoTimestampsNoTemplates() async throws {
        let directory = TemporaryDirectory("registryd-journal")
        defer { directory.remove() }
        let log = directory.path + "/journal.log"
        let socket = directory.path + "/registryd.sock"
        // The log file exists before the daemon starts, so that its device and inode can be named.
        close(open(log, O_CREAT | O_WRONLY, 0o644))
        var info = stat()
        #expect(stat(log, &info) == 0)
        let binary = try registrydBinary()
        let pid = try spawn(
            [binary, "--socket", socket, "--data", directory.path + "/data", "--log-level", "debug", "--maximum-connections", "1"],
            environment: ["JOURNAL_STREAM=\(info.st_dev):\(info.st_ino)"], log: log)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        var client: RegistryConnection?
        for _ in 0..<200 where client == nil {
            client = try? await RegistryConnection.connect(socketPath: socket)
            if client == nil { try await Task.sleep(for: .milliseconds(25)) }
        }
        let connected = try #require(client)
        _ = try await connected.hello(clientName: "door-kiosk/2.1\nforged line")
        // A template of the wrong length, twice: refused, and its values must not reach the log.
        let values = [Float](repeating: 0.4242, count: 100)
        for _ in 0..<2 {
            _ = try? await connected.register(identifier: "alice", face: Face(FaceTemplate(algorithm: 24, vector: values)))
        }
        // A second connection while the first is open: over the limit of 1.
        let second = try? await RegistryConnection.connect(socketPath: socket)
        _ = try? await second?.hello(clientName: "second")
        await second?.close()
        await connected.close()
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}

        let text = readFileText(log)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(line.first == "<" && line.dropFirst().first?.isNumber == true && line.dropFirst(2).first == ">", "\(line)")
            #expect(!line.contains("+0000"), "a timestamp of its own: \(line)")
        }
        // The client's free text on one line: the line break it carried shown escaped.
        #expect(
            lines.contains { $0.hasPrefix("<7>hello") && $0.contains("client=door-kiosk/2.1\\u{a}forged line") && $0.contains("pid=\(getpid())") })
        #expect(lines.contains("<5>request refused code=INVALID_TEMPLATE gallery=default operation=register pid=\(getpid()) uid=\(getuid())"))
        // Refused connections go through the refusal summary (once a minute, at notice), not a warning each.
        #expect(lines.contains("<5>request refused code=TOO_MANY_CONNECTIONS operation=connect pid=\(getpid()) uid=\(getuid())"), "\(lines)")
        #expect(!text.contains("0.4242"))
    }
}
