import Glibc
import Logging
import RegistryEngine
import RegistryModel
import Synchronization
import TestSupport
import Testing

@testable import RegistryServer

/// Log lines for journald, and the refusal summary.
@Suite struct LogOutputTests {
    /// A logger whose lines (journal format) are collected.
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var all: [String] { self.lines.withLock { $0 } }

        func logger(level: Logger.Level = .trace) -> Logger {
            var logger = Logger(label: "test") { label in
                JournalLogHandler(label: label) { line in self.lines.withLock { $0.append(line) } }
            }
            logger.logLevel = level
            return logger
        }
    }

    @Test("each level's syslog priority prefixes the line; no timestamp; metadata sorted; one line per entry")
    func journalLines() {
        let lines = Lines()
        let logger = lines.logger()
        logger.debug("a")
        logger.info("b")
        logger.notice("c")
        logger.warning("d")
        logger.error("e", metadata: ["zeta": "1", "alpha": "two words"])
        logger.critical("f\nsecond line", metadata: ["error": "x\ny"])
        #expect(
            lines.all == [
                "<7>a", "<6>b", "<5>c", "<4>d", "<3>e alpha=two words zeta=1", "<2>f; second line error=x; y",
            ])
    }

    @Test("JOURNAL_STREAM counts only when it names standard error's own file")
    func journalDetection() {
        var info = stat()
        #expect(fstat(2, &info) == 0)
        #expect(LogOutput.standardErrorIsTheJournal(environment: "\(info.st_dev):\(info.st_ino)"))
        #expect(!LogOutput.standardErrorIsTheJournal(environment: "\(info.st_dev):\(info.st_ino + 1)"))
        #expect(!LogOutput.standardErrorIsTheJournal(environment: nil))
        #expect(!LogOutput.standardErrorIsTheJournal(environment: "garbage"))
    }

    @Test("refusals: the first of each kind (uid, operation, code) at once, the rest counted and summed up at the flush")
    func refusalSummary() {
        let lines = Lines()
        let start = ContinuousClock.now
        let summary = RefusalSummary(logger: lines.logger(level: .notice), since: start)
        let kiosk = Peer(uid: 1001, gid: 1001, pid: 77, groups: [1001])
        let other = Peer(uid: 1002, gid: 1002, pid: 88, groups: [1002])
        for _ in 0..<5 { summary.record(peer: kiosk, operation: "register", code: .similarFaceRegistered, gallery: "default") }
        summary.record(peer: kiosk, operation: "authenticate", code: .identifierNotRegistered)
        // Another uid's refusal of the same kind is a kind of its own.
        summary.record(peer: other, operation: "register", code: .similarFaceRegistered)
        #expect(
            lines.all == [
                "<5>request refused code=SIMILAR_FACE_REGISTERED gallery=default operation=register pid=77 uid=1001",
                "<5>request refused code=IDENTIFIER_NOT_REGISTERED operation=authenticate pid=77 uid=1001",
                "<5>request refused code=SIMILAR_FACE_REGISTERED operation=register pid=88 uid=1002",
            ])
        let flushed = summary.flush(now: start + .milliseconds(60_004))
        #expect(flushed.map(\.kind) == ["uid 1001 register SIMILAR_FACE_REGISTERED"] && flushed.map(\.count) == [5])
        #expect(lines.all.last == "<5>requests refused in the last 1 min refusals=uid 1001 register SIMILAR_FACE_REGISTERED ×5")
        // A new period: the next refusal is logged at once again; nothing more to flush.
        #expect(summary.flush(now: start + .seconds(61)).isEmpty)
        summary.record(peer: kiosk, operation: "register", code: .similarFaceRegistered)
        #expect(lines.all.count == 5)
        // The last period, cut short by a shutdown, says how long it was.
        summary.record(peer: kiosk, operation: "register", code: .similarFaceRegistered)
        summary.flush(now: start + .seconds(61 + 37))
        #expect(lines.all.last == "<5>requests refused in the last 37 s refusals=uid 1001 register SIMILAR_FACE_REGISTERED ×2")
    }

    @Test("a summary names its refusals' gallery only when they all named it byte for byte")
    func refusalSummaryComparesGalleryNamesByBytes() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let engine = try Engine(path: directory.path)
        defer { engine.close() }
        let summary = RefusalSummary(logger: Lines().logger(level: .notice), engine: engine)
        let peer = Peer(uid: 1001, gid: 1001, pid: 77, groups: [1001])
        // The first of each kind is audited by the dispatcher; the two after it are summed up.
        // "\u{212A}iosk" (KELVIN SIGN) is "Kiosk" to Swift's ==, another name to the daemon.
        for gallery in ["Kiosk", "Kiosk", "\u{212A}iosk"] {
            summary.record(peer: peer, operation: "identify", code: .permissionDenied, gallery: gallery, audited: true)
        }
        for _ in 0..<3 { summary.record(peer: peer, operation: "register", code: .permissionDenied, gallery: "Kiosk", audited: true) }
        summary.flush()
        let entries = try await engine.auditEntries(AuditQuery(outcome: .refused))
        #expect(entries.map { "\($0.operation) '\($0.gallery)' ×\($0.count)" } == ["identify '' ×2", "register 'Kiosk' ×2"])
    }

    @Test("a refused request's gallery reaches the log cut short and escaped: no line is longer for a longer name, none is forged")
    func refusalLinesCarryNamesCutAndEscaped() {
        let lines = Lines()
        let summary = RefusalSummary(logger: lines.logger(level: .notice))
        let peer = Peer(uid: 1001, gid: 1001, pid: 77, groups: [1001])
        summary.record(
            peer: peer, operation: "identify", code: .permissionDenied, gallery: "a\nforged line" + String(repeating: "x", count: 70_000),
            right: .identify)
        #expect(lines.all.count == 1)
        let line = lines.all[0]
        #expect(!line.contains("\n") && line.contains("a\\u{a}forged line") && line.utf8.count < 300)
    }
}
