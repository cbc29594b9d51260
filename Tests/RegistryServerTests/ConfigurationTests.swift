import Foundation
import RegistryEngine
import Synchronization
import TestSupport
import Testing

@testable import RegistryModel
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

    /// `backup`: the root and the allowed directories reach the engine; every problem is reported
    /// at once, each naming its place.
    @Test func backupDirectoriesAreCheckedAndPassedOn() throws {
        let unset = try self.configuration(#"{ "dataDirectory": "/var/lib/registryd" }"#).validated().engine
        #expect(unset.backupDirectory == nil && unset.allowedBackupDirectories.isEmpty)
        let set = try self.configuration(
            #"{ "backup": { "directory": "/srv/backups", "allowedDirectories": ["/mnt/offsite/", "/mnt/offsite", "/srv/b"] } }"#
        ).validated().engine
        #expect(set.backupDirectory == "/srv/backups" && set.allowedBackupDirectories == ["/mnt/offsite/", "/srv/b"])
        let bad = #"""
            { "dataDirectory": "/var/lib/registryd/", "backup": { "directory": "/var/lib/registryd/backups",
              "allowedDirectories": ["relative", "", "/var/lib/registryd", "/ok"] } }
            """#
        let problems = self.refusal(bad)?.split(separator: "\n").map(String.init)
        #expect(
            problems == [
                "backup.directory: /var/lib/registryd/backups is the data directory or inside it; backups must be kept apart from the store",
                "backup.allowedDirectories[0]: relative must be an absolute path (requests name it so)",
                "backup.allowedDirectories[1] must not be empty",
                "backup.allowedDirectories[2]: /var/lib/registryd is the data directory or inside it; backups must be kept apart from the store",
            ])
        #expect(self.refusal(#"{"backup": {"directroy": "/x"}}"#) == #"test.json: unknown key "directroy" in backup (did you mean "directory"?)"#)
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

    /// An edge box sets it to 0 to keep only codes in memory, whatever a registry's size.
    @Test func theResidentRowLimitReachesTheEngineAndMustNotBeNegative() throws {
        #expect(try self.configuration("{}").validated().engine.residentRowBytes == 64 << 20)
        #expect(try self.configuration(#"{ "limits": { "residentRowBytes": 0 } }"#).validated().engine.residentRowBytes == 0)
        #expect(self.refusal(#"{ "limits": { "residentRowBytes": -1 } }"#)?.contains("limits.residentRowBytes must not be negative") == true)
    }

    /// A gallery listed twice is one problem among the others of the file, not the end of the check:
    /// `--check-config` and a start report all seven here (the duplicate used to hide the other six).
    @Test func aGalleryListedTwiceIsReportedWithEveryOtherProblem() throws {
        let json = #"""
            {"limits": {"maximumConnections": 8, "idleTimeoutSeconds": 0, "drainDeadlineSeconds": 0},
             "audit": {"maximumEntries": 0},
             "galleries": [
               {"name": "staff", "registries": [{"algorithm": "arcface", "authentication": 1.5}]},
               {"name": "door", "registries": [{"algorithm": "arcfaec"}], "livenessK": 50},
               {"name": "staff", "registries": [{"algorithm": "arcface"}]}]}
            """#
        let problems = try #require(self.refusal(json)).split(separator: "\n").map(String.init)
        #expect(
            problems == [
                "limits.idleTimeoutSeconds must be at least 1",
                "limits.drainDeadlineSeconds must be at least 1",
                "galleries[0].registries[0].authentication: arcface authentication threshold 1.5 is outside (0, 1]",
                "galleries[1].registries[0].algorithm: gallery door: unknown algorithm 'arcfaec'",
                "galleries[1].livenessK: gallery 'door' liveness k must be within (0, 10.0]",
                "galleries[2].name: gallery 'staff' is listed twice (first as galleries[0])",
                "audit.maximumEntries must be at least 1",
            ])
        // What a start checks (the access policy, the open-file limit: 8 connections fit any) says the same.
        let checked = #expect(throws: ConfigurationError.self) { try self.configuration(json).checkedForStart() }
        #expect(checked?.description.split(separator: "\n").map(String.init) == problems)
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

    /// The keys the configuration's types decode, found by decoding with every key present, are the
    /// keys the unknown-key check knows, object by object: a setting added to a type is not refused
    /// as unknown, and the check knows no key that the decoder would ignore.
    @Test func theCheckKnowsExactlyTheKeysTheTypesDecode() throws {
        let spy = KeySpy()
        _ = try ServerConfiguration(from: KeySpy.Decoder(spy: spy, place: ""))
        let decoded = spy.keys.withLock { $0 }
        #expect(decoded == ConfigurationCheck.knownKeys)
        // Both directions, named, for the message when they differ.
        for (place, keys) in decoded {
            let known = ConfigurationCheck.knownKeys[place] ?? []
            #expect(keys.subtracting(known).isEmpty, "decoded but unknown to the check in \(place.isEmpty ? "the top level" : place)")
        }
        for (place, known) in ConfigurationCheck.knownKeys {
            let keys = decoded[place] ?? []
            #expect(known.subtracting(keys).isEmpty, "known to the check but not decoded in \(place.isEmpty ? "the top level" : place)")
        }
        #expect(ConfigurationCheck.operationClasses == Set(OperationClass.allCases.map(\.rawValue)))
        // And a document that sets every known key is accepted by the check.
        #expect(try ConfigurationCheck.unknownKeys(in: Data(Self.everyKey.utf8), file: "test.json").isEmpty)
        let everyKey = try self.configuration(Self.everyKey)
        #expect(everyKey.limits.eventLoops == 1 && everyKey.galleries.first?.registries.first?.minimumAutoEnrolmentQuality == 0.5)
    }

    /// A configuration that sets every key of ``ConfigurationCheck/knownKeys``.
    static var everyKey: String {
        func object(_ place: String, _ value: (String) -> String) -> String {
            "{" + ConfigurationCheck.knownKeys[place, default: []].sorted().map { #""\#($0)": \#(value($0))"# }.joined(separator: ", ") + "}"
        }
        let registry = object("galleries[].registries[]") { $0 == "algorithm" ? #""arcface""# : "0.5" }
        let gallery = object("galleries[]") { key in
            switch key {
            case "name": #""door""#
            case "registries": "[\(registry)]"
            case "livenessRequiredFor": #"["authenticate"]"#
            case "livenessStrict": "true"
            default: "2"
            }
        }
        let algorithm = object("algorithms[]") { key in
            switch key {
            case "name": #""m""#
            case "scoreFunction": #""cosine""#
            case "version": "5000"
            default: "4"
            }
        }
        return object("") { key in
            switch key {
            case "limits": object("limits") { _ in "1" }
            case "audit": object("audit") { _ in "1" }
            case "backup": object("backup") { $0 == "directory" ? #""/srv/registryd-backups""# : #"["/srv/offsite"]"# }
            case "algorithms": "[\(algorithm)]"
            case "galleries": "[\(gallery)]"
            case "access": #"{"*": {"identify": ["uid:0"]}}"#
            case "fleet":
                object("fleet") { key in
                    switch key {
                    case "url": #""postgresql://registry@db/registry""#
                    case "compactionSeconds", "retentionSeconds": "60"
                    default: #""x""#
                    }
                }
            default: #""x""#
            }
        }
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

    @Test("every value of the wrong type is reported in one run, nothing made up about the rest")
    func everyTypeErrorAtOnce() throws {
        let json = #"""
            {"logLevel": 3, "limits": {"maximumConnections": "many", "idleTimeoutSeconds": true},
             "galleries": [{"name": 7, "registries": [{"algorithm": "arcface", "identification": "high"}]}],
             "socketPath": "/run/x.sock"}
            """#
        #expect(
            self.refusal(json)?.split(separator: "\n") == [
                "test.json: logLevel must be a string",
                "test.json: limits.maximumConnections must be a whole number",
                "test.json: limits.idleTimeoutSeconds must be a whole number",
                "test.json: galleries[0].name must be a string",
                "test.json: galleries[0].registries[0].identification must be a number",
            ])
        // A missing required key ends the search (what follows would be guessed from a made-up value).
        #expect(
            self.refusal(#"{"logLevel": 3, "galleries": [{"registries": []}]}"#)?.split(separator: "\n").first
                == "test.json: logLevel must be a string")
    }

    /// At most ``ConfigurationCheck/reportedTypeProblems`` wrong values are listed; one more is said
    /// to follow, not silently left out.
    @Test(arguments: [ConfigurationCheck.reportedTypeProblems, ConfigurationCheck.reportedTypeProblems + 1])
    func theListOfWrongValuesIsBoundedAndSaysSo(_ wrong: Int) throws {
        let galleries = (0..<wrong).map { _ in #"{"name": 7, "registries": [{"algorithm": "arcface"}]}"# }.joined(separator: ", ")
        let lines = try #require(self.refusal(#"{"galleries": [\#(galleries)]}"#)).split(separator: "\n")
        let cap = ConfigurationCheck.reportedTypeProblems
        #expect(lines.prefix(cap) == (0..<cap).map { "test.json: galleries[\($0)].name must be a string" }[...])
        #expect(
            Array(lines.dropFirst(cap))
                == (wrong > cap ? ["test.json: more values of the wrong type follow; fix these \(cap) and check again"] : []))
    }

    /// A key file a start would refuse is refused by the configuration's check (--check-config runs
    /// it; a start runs it before it binds or creates anything).
    @Test(arguments: [
        ("31 bytes", [UInt8](repeating: 7, count: 31)), ("64 characters, not hexadecimal", Array(String(repeating: "z", count: 64).utf8)),
        ("63 hexadecimal digits", Array(String(repeating: "a", count: 63).utf8)), ("33 bytes", [UInt8](repeating: 7, count: 33)),
    ])
    func malformedKeyFilesAreRefused(_ what: String, _ bytes: [UInt8]) throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/store.key"
        #expect(writeBytes(bytes, to: path), "\(what)")
        let message = try #require(self.refusal(#"{"keyFile": "\#(path)"}"#), "\(what) passed")
        #expect(message.hasPrefix("keyFile: the key file \(path) holds \(bytes.count) bytes that are not a key"), "\(what): \(message)")
        // Good keys pass: 32 bytes, and 64 hexadecimal digits with a newline.
        #expect(writeBytes([UInt8](repeating: 9, count: 32), to: path, replacing: true))
        #expect(self.refusal(#"{"keyFile": "\#(path)"}"#) == nil)
        #expect(writeBytes(Array((String(repeating: "0f", count: 32) + "\n").utf8), to: path, replacing: true))
        #expect(self.refusal(#"{"keyFile": "\#(path)"}"#) == nil)
    }

    @Test("a gallery listed twice is refused, and each listing checked")
    func aGalleryListedTwice() {
        #expect(
            self.refusal(#"{"galleries": [{"name": "door", "registries": []}, {"name": "door", "registries": []}]}"#)?.split(separator: "\n") == [
                "galleries[0].registries: gallery 'door' needs at least one registry",
                "galleries[1].name: gallery 'door' is listed twice (first as galleries[0])",
                "galleries[1].registries: gallery 'door' needs at least one registry",
            ])
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

/// A decoder that answers every key as present (with 0, "", false, lists of one element) and
/// records, per place in the document, the keys asked for: the keys a `Decodable` type reads.
final class KeySpy: Sendable {
    let keys = Mutex<[String: Set<String>]>([:])

    func record(_ key: String, at place: String) {
        _ = self.keys.withLock { $0[place, default: []].insert(key) }
    }

    struct Decoder: Swift.Decoder {
        let spy: KeySpy
        let place: String
        var codingPath: [any CodingKey] = []
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            KeyedDecodingContainer(Keyed<Key>(spy: self.spy, place: self.place))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            Unkeyed(spy: self.spy, place: self.place + "[]")
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(spy: self.spy, place: self.place) }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let spy: KeySpy
        let place: String
        var codingPath: [any CodingKey] = []
        /// None listed: a dictionary keyed by the operator's names (`access`) decodes empty.
        var allKeys: [Key] { [] }

        func contains(_ key: Key) -> Bool {
            self.spy.record(key.stringValue, at: self.place)
            return true
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            self.spy.record(key.stringValue, at: self.place)
            return false
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            self.spy.record(key.stringValue, at: self.place)
            return try T(from: Decoder(spy: self.spy, place: self.place.isEmpty ? key.stringValue : "\(self.place).\(key.stringValue)"))
        }

        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try self.decode(Primitive<Bool>.self, forKey: key).value }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try self.decode(Primitive<String>.self, forKey: key).value }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try self.decode(Primitive<Double>.self, forKey: key).value }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try self.decode(Primitive<Float>.self, forKey: key).value }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try self.decode(Primitive<Int>.self, forKey: key).value }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try self.decode(Primitive<Int8>.self, forKey: key).value }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try self.decode(Primitive<Int16>.self, forKey: key).value }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try self.decode(Primitive<Int32>.self, forKey: key).value }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try self.decode(Primitive<Int64>.self, forKey: key).value }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try self.decode(Primitive<UInt>.self, forKey: key).value }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try self.decode(Primitive<UInt8>.self, forKey: key).value }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try self.decode(Primitive<UInt16>.self, forKey: key).value }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try self.decode(Primitive<UInt32>.self, forKey: key).value }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try self.decode(Primitive<UInt64>.self, forKey: key).value }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try Decoder(spy: self.spy, place: "\(self.place).\(key.stringValue)").container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try Decoder(spy: self.spy, place: "\(self.place).\(key.stringValue)").unkeyedContainer()
        }

        func superDecoder() throws -> any Swift.Decoder { Decoder(spy: self.spy, place: self.place) }
        func superDecoder(forKey key: Key) throws -> any Swift.Decoder { Decoder(spy: self.spy, place: self.place) }
    }

    /// One element.
    struct Unkeyed: UnkeyedDecodingContainer {
        let spy: KeySpy
        let place: String
        var codingPath: [any CodingKey] = []
        var count: Int? { 1 }
        var currentIndex = 0
        var isAtEnd: Bool { self.currentIndex >= 1 }

        mutating func decodeNil() throws -> Bool { false }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            self.currentIndex += 1
            return try T(from: Decoder(spy: self.spy, place: self.place))
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { try self.decode(Primitive<Bool>.self).value }
        mutating func decode(_ type: String.Type) throws -> String { try self.decode(Primitive<String>.self).value }
        mutating func decode(_ type: Double.Type) throws -> Double { try self.decode(Primitive<Double>.self).value }
        mutating func decode(_ type: Float.Type) throws -> Float { try self.decode(Primitive<Float>.self).value }
        mutating func decode(_ type: Int.Type) throws -> Int { try self.decode(Primitive<Int>.self).value }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try self.decode(Primitive<Int8>.self).value }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try self.decode(Primitive<Int16>.self).value }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try self.decode(Primitive<Int32>.self).value }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try self.decode(Primitive<Int64>.self).value }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try self.decode(Primitive<UInt>.self).value }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try self.decode(Primitive<UInt8>.self).value }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try self.decode(Primitive<UInt16>.self).value }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try self.decode(Primitive<UInt32>.self).value }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try self.decode(Primitive<UInt64>.self).value }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            self.currentIndex += 1
            return try Decoder(spy: self.spy, place: self.place).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            self.currentIndex += 1
            return try Decoder(spy: self.spy, place: self.place).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Swift.Decoder { Decoder(spy: self.spy, place: self.place) }
    }

    /// A value of a primitive type, through the single-value container.
    struct Primitive<Value: Decodable>: Decodable {
        let value: Value
        init(from decoder: any Swift.Decoder) throws { self.value = try decoder.singleValueContainer().decode(Value.self) }
    }

    struct Single: SingleValueDecodingContainer {
        let spy: KeySpy
        let place: String
        var codingPath: [any CodingKey] = []

        func decodeNil() -> Bool { false }
        func decode(_ type: Bool.Type) throws -> Bool { false }
        func decode(_ type: String.Type) throws -> String { "" }
        func decode(_ type: Double.Type) throws -> Double { 0 }
        func decode(_ type: Float.Type) throws -> Float { 0 }
        func decode(_ type: Int.Type) throws -> Int { 0 }
        func decode(_ type: Int8.Type) throws -> Int8 { 0 }
        func decode(_ type: Int16.Type) throws -> Int16 { 0 }
        func decode(_ type: Int32.Type) throws -> Int32 { 0 }
        func decode(_ type: Int64.Type) throws -> Int64 { 0 }
        func decode(_ type: UInt.Type) throws -> UInt { 0 }
        func decode(_ type: UInt8.Type) throws -> UInt8 { 0 }
        func decode(_ type: UInt16.Type) throws -> UInt16 { 0 }
        func decode(_ type: UInt32.Type) throws -> UInt32 { 0 }
        func decode(_ type: UInt64.Type) throws -> UInt64 { 0 }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: Decoder(spy: self.spy, place: self.place)) }
    }
}

/// The CPUs the daemon sizes its threads to: its affinity and its cgroup's quota, not every online CPU.
@Suite struct UsableCPUsTests {
    @Test func aQuotaIsRoundedUpToWholeCPUsAndNoQuotaIsNone() {
        #expect(UsableCPUs.cpus(quota: 150_000, period: 100_000) == 2)
        #expect(UsableCPUs.cpus(quota: 100_000, period: 100_000) == 1)
        #expect(UsableCPUs.cpus(quota: 1, period: 100_000) == 1)
        #expect(UsableCPUs.cpus(quota: -1, period: 100_000) == nil, "cgroup v1's 'no quota'")
        #expect(UsableCPUs.cpus(quota: nil, period: 100_000) == nil, "cgroup v2's 'max'")
    }

    @Test func theAffinityMaskIsCountedFromTheKernelsReport() {
        #expect(UsableCPUs.allowed(status: "Name:\tregistryd\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n") == 2)
        #expect(UsableCPUs.allowed(status: "Cpus_allowed:\tffffffff,00000001\n") == 33)
        #expect(UsableCPUs.allowed(status: "Name:\tx\n") == nil)
    }

    @Test func theCountIsWithinTheOnlineCPUs() {
        #expect(UsableCPUs.count >= 1 && UsableCPUs.count <= sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #expect(ServerConfiguration.Limits().resolvedEventLoops == max(1, UsableCPUs.count - 1))
    }
}

/// Writes `bytes` to a file (0600); `replacing` an existing one.
private func writeBytes(_ bytes: [UInt8], to path: String, replacing: Bool = false) -> Bool {
    let file = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (replacing ? O_TRUNC : O_EXCL), 0o600)
    guard file >= 0 else { return false }
    defer { close(file) }
    return bytes.withUnsafeBytes { write(file, $0.baseAddress, $0.count) } == bytes.count
}
