import Glibc
import Logging
import Synchronization
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

    @Test("refusals: the first of each kind at once, the rest counted and summed up at the flush")
    func refusalSummary() {
        let lines = Lines()
        let start = ContinuousClock.now
        let summary = RefusalSummary(logger: lines.logger(level: .notice), since: start)
        for _ in 0..<5 { summary.record(operation: "register", code: "SIMILAR_FACE_REGISTERED") }
        summary.record(operation: "authenticate", code: "IDENTIFIER_NOT_REGISTERED")
        #expect(
            lines.all == [
                "<5>request refused code=SIMILAR_FACE_REGISTERED operation=register",
                "<5>request refused code=IDENTIFIER_NOT_REGISTERED operation=authenticate",
            ])
        let flushed = summary.flush(now: start + .milliseconds(60_004))
        #expect(flushed.map(\.kind) == ["register SIMILAR_FACE_REGISTERED"] && flushed.map(\.count) == [5])
        #expect(lines.all.last == "<5>requests refused in the last 1 min refusals=register SIMILAR_FACE_REGISTERED ×5")
        // A new period: the next refusal is logged at once again; nothing more to flush.
        #expect(summary.flush(now: start + .seconds(61)).isEmpty)
        summary.record(operation: "register", code: "SIMILAR_FACE_REGISTERED")
        #expect(lines.all.count == 4)
        // The last period, cut short by a shutdown, says how long it was.
        summary.record(operation: "register", code: "SIMILAR_FACE_REGISTERED")
        summary.flush(now: start + .seconds(61 + 37))
        #expect(lines.all.last == "<5>requests refused in the last 37 s refusals=register SIMILAR_FACE_REGISTERED ×2")
    }
}
