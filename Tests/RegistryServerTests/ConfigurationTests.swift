import Foundation
import RegistryEngine
import RegistryModel
import TestSupport
import Testing

@testable import RegistryServer

/// The configuration's checks: a value out of range is a clear error, never a trap (a trap here
/// would stop the daemon at start, or a running one on SIGHUP).
@Suite struct ConfigurationTests {
    func configuration(_ json: String) throws -> ServerConfiguration {
        try ServerConfiguration.decode(Data(json.utf8), from: "test.json")
    }

    /// Found by the `config` fuzz target: days × 86,400 overflowed Int64 inside `validated()`.
    @Test(arguments: ["3066666666666666666", "9223372036854775807", "106751991167301"])
    func anAuditAgeTooLargeToCountInSecondsIsRefused(days: String) throws {
        let configuration = try self.configuration(#"{ "audit": { "maximumAgeDays": \#(days) } }"#)
        let error = #expect(throws: ConfigurationError.self) { try configuration.validated() }
        #expect(error?.description.contains("audit.maximumAgeDays") == true)
    }

    @Test(arguments: [#"{ "maximumAgeDays": 0 }"#, #"{ "maximumAgeDays": -1 }"#, #"{ "maximumEntries": 0 }"#, #"{ "maximumEntries": -5 }"#])
    func auditRetentionBelowOneIsRefused(audit: String) throws {
        let configuration = try self.configuration(#"{ "audit": \#(audit) }"#)
        let error = #expect(throws: ConfigurationError.self) { try configuration.validated() }
        #expect(error?.description.contains("audit.maximum") == true)
    }

    @Test func auditRetentionInRangeIsKeptInSeconds() throws {
        let configuration = try self.configuration(#"{ "audit": { "maximumAgeDays": 36500, "maximumEntries": 1 } }"#)
        let (engine, _) = try configuration.validated()
        #expect(engine.auditRetention.maximumAgeSeconds == Int64(36_500) * 86_400)
        #expect(engine.auditRetention.maximumEntries == 1)
    }

    /// The power-loss harness lowers it so that small stores write the index snapshot at a clean stop.
    @Test func theSnapshotMinimumReachesTheEngineAndMustBeAtLeastOne() throws {
        #expect(try self.configuration("{}").validated().engine.snapshotMinimumTemplates == 100_000)
        #expect(try self.configuration(#"{ "limits": { "snapshotMinimumTemplates": 200 } }"#).validated().engine.snapshotMinimumTemplates == 200)
        #expect(
            self.refusal(#"{ "limits": { "snapshotMinimumTemplates": 0 } }"#)?.contains("limits.snapshotMinimumTemplates must be at least 1") == true)
    }

    // MARK: Keys and types

    /// The message of the configuration `json` refuses (decoding, then validation).
    func refusal(_ json: String) -> String? {
        do {
            _ = try self.configuration(json).validated()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("a misspelt key is refused wherever it is, named with its place and the key meant")
    func unknownKeysAreRefused() throws {
        let message = try #require(
            self.refusal(
                #"""
                {"socketPth": "x", "limits": {"maximumConections": 3}, "audit": {"maximumEntrys": 5},
                 "algorithms": [{"version": 5000, "name": "m", "dimension": 4, "scoreFunction": "cosine", "threshold": 0.5, "treshold": 1}],
                 "galleries": [{"name": "door", "livenesRequiredFor": [], "registries": [{"algorithm": "arcface", "identfication": 0.7}]}],
                 "access": {"door": {"identfy": ["uid:0"]}}}
                """#))
        #expect(
            message.split(separator: "\n") == [
                #"test.json: unknown key "socketPth" at the top level (did you mean "socketPath"?)"#,
                #"test.json: unknown key "maximumConections" in limits (did you mean "maximumConnections"?)"#,
                #"test.json: unknown key "maximumEntrys" in audit (did you mean "maximumEntries"?)"#,
                #"test.json: unknown key "treshold" in algorithms[0] (did you mean "threshold"?)"#,
                #"test.json: unknown key "livenesRequiredFor" in galleries[0] (did you mean "livenessRequiredFor"?)"#,
                #"test.json: unknown key "identfication" in galleries[0].registries[0] (did you mean "identification"?)"#,
                #"test.json: unknown key "identfy" in access["door"] (did you mean "identify"?)"#,
            ])
        // Nothing close: no suggestion.
        #expect(self.refusal(#"{"colour": "blue"}"#) == #"test.json: unknown key "colour" at the top level"#)
    }

    @Test("type errors are plain sentences naming the setting, never a decoder dump")
    func typeErrorsArePlain() throws {
        let cases: [(String, String)] = [
            (#"{"limits": {"maximumConnections": "many"}}"#, "test.json: limits.maximumConnections must be a whole number"),
            (#"{"limits": {"maximumConnections": 2.5}}"#, "test.json: limits.maximumConnections must be a whole number"),
            (
                #"{"algorithms": [{"version": -3, "name": "m", "dimension": 4, "scoreFunction": "cosine", "threshold": 0.5}]}"#,
                "test.json: algorithms[0].version must be a whole number within 0...4294967295"
            ),
            (
                #"{"galleries": [{"name": "door", "registries": [{"algorithm": "arcface", "identification": "high"}]}]}"#,
                "test.json: galleries[0].registries[0].identification must be a number"
            ),
            (#"{"galleries": [{"registries": []}]}"#, #"test.json: galleries[0] needs "name""#),
            (#"{"socketPath": 7}"#, "test.json: socketPath must be a string"),
            (#"{"galleries": {"name": "door"}}"#, "test.json: galleries must be a list"),
            (#"{"limits": {"maximumConnections": 3,}"#, "test.json is not valid JSON: line 1, column 37: expected a key in double quotes"),
            ("[1, 2]", "test.json: the configuration must be a JSON object"),
            // Foundation's decoder traps on this one (a fuzzer found it): refused before it gets there.
            (String(repeating: "[", count: 513), "test.json is not valid JSON: line 1, column 513: nested too deeply"),
            (String(repeating: "[", count: 513) + "\r", "test.json is not valid JSON: line 1, column 513: nested too deeply"),
        ]
        for (json, expected) in cases {
            let message = self.refusal(json)
            #expect(message == expected, "\(json)")
            for leak in ["DecodingError", "CodingKeys", "Swift.", "Optional("] { #expect(message?.contains(leak) == false) }
        }
    }

    @Test("a gallery listed twice is refused")
    func aGalleryListedTwice() {
        #expect(
            self.refusal(#"{"galleries": [{"name": "door", "registries": []}, {"name": "door", "registries": []}]}"#)
                == #"test.json: gallery "door" is listed twice"#)
    }

    @Test("a missing or unreadable file is named with the system's reason")
    func missingFiles() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let missing = directory.path + "/nope.json"
        #expect(throws: ConfigurationError("cannot read \(missing): No such file or directory")) { try ServerConfiguration.load(path: missing) }
        // A FIFO with no writer would block a reader forever: refused at once.
        let fifo = directory.path + "/fifo.json"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: ConfigurationError("cannot read \(fifo): not a regular file")) { try ServerConfiguration.load(path: fifo) }
    }

    @Test("the shipped configuration files pass the strict check, and --check-config describes them")
    func shippedConfigurations() throws {
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        for file in ["config/registryd.json", "systemd/registryd.json"] {
            let configuration = try ServerConfiguration.load(path: root + "/" + file)
            let report = try ConfigurationReport(configuration, file: file).text
            #expect(report.hasPrefix("\(file): usable\n"))
            #expect(report.contains("gallery      default: arcface 0.6/0.6/0.6"))
        }
    }
}
