import ArgumentParser
import FoundationEssentials
import Glibc
import RegistryClient
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import TestSupport
import Testing

@testable import RegistryCtlInput
@testable import registry_manual
@testable import registryctl

// MARK: Helpers

/// Parses a command line and returns the subcommand as `T` (or fails the test).
private func parse<T: ParsableCommand>(_ arguments: [String], as type: T.Type = T.self) throws -> T {
    let command = try RegistryCtl.parseAsRoot(arguments)
    return try #require(command as? T, "parsed \(Swift.type(of: command)), expected \(T.self)")
}

/// The exit code ArgumentParser gives for a command line it refuses (nil when it parses).
private func refusal(_ arguments: [String]) -> Int32? {
    do {
        _ = try RegistryCtl.parseAsRoot(arguments)
        return nil
    } catch {
        return RegistryCtl.exitCode(for: error).rawValue
    }
}

private func write(_ text: String, to path: String) throws {
    let sink = try OutputSink(path: path)
    try sink.write(text)
    try sink.commit()
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// 32 landmarks' worth of names, for landmark templates.
private let landmarkNames = LandmarkVocabulary.names

// MARK: Argument parsing

@Suite("Argument parsing")
struct ArgumentParsingTests {
    @Test func statusTakesTheSharedOptions() throws {
        let plain = try parse(["status"], as: StatusCommand.self)
        #expect(plain.options.socket == nil)
        #expect(plain.options.json == false)
        let given = try parse(["status", "--socket", "/run/registryd/registryd.sock", "--json"], as: StatusCommand.self)
        #expect(given.options.socket == "/run/registryd/registryd.sock")
        #expect(given.options.socketPath == "/run/registryd/registryd.sock")
        #expect(given.options.json)
    }

    @Test func socketPathComesFromTheOptionThenTheEnvironmentThenTheDefault() {
        #expect(GlobalOptions.socketPath(option: "/a.sock", environment: "/b.sock") == "/a.sock")
        #expect(GlobalOptions.socketPath(option: nil, environment: "/b.sock") == "/b.sock")
        #expect(GlobalOptions.socketPath(option: nil, environment: "") == "./run/registryd.sock")
        #expect(GlobalOptions.socketPath(option: nil, environment: nil) == "./run/registryd.sock")
    }

    @Test func simpleCommandsParse() throws {
        _ = try parse(["galleries", "--json"], as: GalleriesCommand.self)
        _ = try parse(["algorithms"], as: AlgorithmsCommand.self)
        _ = try parse(["stats"], as: StatsCommand.self)
        _ = try parse(["verify"], as: VerifyCommand.self)
        let backup = try parse(["backup", "/var/backups/registry-1"], as: BackupCommand.self)
        #expect(backup.directory == "/var/backups/registry-1")
        let migration = try parse(["migration", "--gallery", "visitors"], as: MigrationCommand.self)
        #expect(migration.gallery.name == "visitors")
        #expect(try parse(["migration"], as: MigrationCommand.self).gallery.name == "default")
    }

    @Test func identifiersDefaultsAndOptions() throws {
        let plain = try parse(["identifiers"], as: IdentifiersCommand.self)
        #expect(plain.gallery.gallery == nil)
        #expect(plain.gallery.name == "default")
        #expect(plain.after == nil)
        #expect(plain.limit == 100)
        #expect(plain.all == false)
        let given = try parse(["identifiers", "-g", "staff", "--after", "bob", "--limit", "5", "--all"], as: IdentifiersCommand.self)
        #expect(given.gallery.name == "staff")
        #expect(given.after == "bob")
        #expect(given.limit == 5)
        #expect(given.all)
        #expect(refusal(["identifiers", "--limit", "0"]) == 64)
        #expect(refusal(["identifiers", "--limit", "10001"]) == 64)
        #expect(refusal(["identifiers", "--limit", "many"]) == 64)
    }

    @Test func showTakesAnIdentifier() throws {
        let show = try parse(["show", "alice", "--data", "--gallery", "staff"], as: ShowCommand.self)
        #expect(show.identifier == "alice")
        #expect(show.data)
        #expect(show.gallery.name == "staff")
        #expect(try parse(["show", "bob"], as: ShowCommand.self).data == false)
        #expect(refusal(["show"]) == 64)
    }

    @Test func registerTakesAnIdentifierAndFiles() throws {
        let register = try parse(["register", "alice", "arcface.json", "landmarks.json", "--force", "-g", "staff"], as: RegisterCommand.self)
        #expect(register.identifier == "alice")
        #expect(register.files == ["arcface.json", "landmarks.json"])
        #expect(register.force)
        #expect(register.gallery.name == "staff")
        let plain = try parse(["register", "bob", "face.json"], as: RegisterCommand.self)
        #expect(plain.force == false)
        #expect(plain.gallery.name == "default")
        #expect(refusal(["register"]) == 64)  // no identifier
        #expect(refusal(["register", "alice"]) == 64)  // no file
    }

    @Test func identifyOptions() throws {
        let plain = try parse(["identify", "face.json"], as: IdentifyCommand.self)
        #expect(plain.files == ["face.json"])
        #expect(plain.unsafe == false)
        #expect(plain.noAutoEnrol == false)
        #expect(plain.limit == nil)
        let given = try parse(["identify", "a.json", "b.json", "--unsafe", "--no-auto-enrol", "--limit", "3"], as: IdentifyCommand.self)
        #expect(given.files == ["a.json", "b.json"])
        #expect(given.unsafe)
        #expect(given.noAutoEnrol)
        #expect(given.limit == 3)
        #expect(refusal(["identify"]) == 64)
        #expect(refusal(["identify", "a.json", "--limit", "0"]) == 64)
    }

    @Test func authenticateOptions() throws {
        let command = try parse(["authenticate", "alice", "face.json", "--no-auto-enrol"], as: AuthenticateCommand.self)
        #expect(command.identifier == "alice")
        #expect(command.files == ["face.json"])
        #expect(command.noAutoEnrol)
        #expect(try parse(["authenticate", "alice", "face.json"], as: AuthenticateCommand.self).noAutoEnrol == false)
        #expect(refusal(["authenticate", "alice"]) == 64)
    }

    @Test func deleteSubcommands() throws {
        let identifier = try parse(["delete", "identifier", "alice", "--gallery", "staff"], as: DeleteIdentifierCommand.self)
        #expect(identifier.identifier == "alice")
        #expect(identifier.gallery.name == "staff")
        let template = try parse(["delete", "template", "42"], as: DeleteTemplateCommand.self)
        #expect(template.templateId == 42)
        #expect(template.gallery.name == "default")
        let gallery = try parse(["delete", "gallery", "visitors"], as: DeleteGalleryCommand.self)
        #expect(gallery.name == "visitors")
        #expect(refusal(["delete", "template", "forty-two"]) == 64)
        #expect(refusal(["delete", "template", "-1"]) == 64)
        #expect(refusal(["delete", "identifier"]) == 64)
        #expect(refusal(["delete", "person", "alice"]) == 64)
    }

    @Test func galleryDefineTakesRegistrySpecs() throws {
        let command = try parse(
            ["gallery", "define", "staff", "--registry", "arcface:0.6,0.65,0.7", "--registry", "16"], as: GalleryDefineCommand.self)
        #expect(command.name == "staff")
        #expect(
            command.registries == [
                RegistrySpec(algorithm: .name("arcface"), thresholds: Thresholds(authentication: 0.6, identification: 0.65, autoEnrolment: 0.7)),
                RegistrySpec(algorithm: .version(16)),
            ])
        // Several specs after one --registry.
        let listed = try parse(["gallery", "define", "staff", "--registry", "r300", "landmarks"], as: GalleryDefineCommand.self)
        #expect(listed.registries == [RegistrySpec(algorithm: .name("r300")), RegistrySpec(algorithm: .name("landmarks"))])
        #expect(refusal(["gallery", "define", "staff"]) == 64)  // no registry
        #expect(refusal(["gallery", "define", "staff", "--registry", "arcface:0.6,0.7"]) == 64)
        #expect(refusal(["gallery", "define", "staff", "--registry", "arcface:0,0.6,0.6"]) == 64)
        #expect(refusal(["gallery", "define", "staff", "--registry", ":0.6,0.6,0.6"]) == 64)
        #expect(refusal(["gallery", "define", "--registry", "arcface"]) == 64)  // no name
    }

    @Test func exportOptions() throws {
        let plain = try parse(["export", "--output", "/tmp/out.pb"], as: ExportCommand.self)
        #expect(plain.format == .protobuf)
        #expect(plain.output == "/tmp/out.pb")
        #expect(plain.gallery.name == "default")
        let given = try parse(["export", "-g", "staff", "--format", "verid", "-o", "-"], as: ExportCommand.self)
        #expect(given.format == .verid)
        #expect(given.output == "-")
        #expect(given.gallery.name == "staff")
        #expect(refusal(["export"]) == 64)  // no --output
        #expect(refusal(["export", "--output", "x", "--format", "xml"]) == 64)
    }

    @Test func importOptions() throws {
        let plain = try parse(["import", "staff.json"], as: ImportCommand.self)
        #expect(plain.file == "staff.json")
        #expect(plain.format == nil)
        let given = try parse(["import", "staff.pb", "--format", "protobuf", "--gallery", "staff"], as: ImportCommand.self)
        #expect(given.format == .protobuf)
        #expect(given.gallery.name == "staff")
        #expect(refusal(["import"]) == 64)
        #expect(refusal(["import", "x", "--format", "csv"]) == 64)
    }

    @Test func unknownFlagsAndCommandsAreRefused() {
        #expect(refusal(["status", "--bogus"]) == 64)
        #expect(refusal(["identify", "face.json", "--safe-mode"]) == 64)
        #expect(refusal(["frobnicate"]) == 64)
        #expect(refusal(["status"]) == nil)
    }
}

// MARK: Template JSON

@Suite("Template JSON files")
struct TemplateJSONTests {
    @Test func verIDVectorForm() throws {
        let templates = try TemplateJSON.templates(from: bytes(#"{"version": 24, "data": [0.5, -0.25, 1e-3, 2]}"#), file: "a.json")
        #expect(templates == [FaceTemplate(algorithm: 24, vector: [0.5, -0.25, 0.001, 2])])
    }

    @Test func landmarkFormWithName() throws {
        let json = #"{"version": 1000, "landmarks": [{"name": "LEFT_EYE", "x": 1, "y": 2.5, "z": -3}, {"name": "NOSE_TIP", "x": 4, "y": 5, "z": 6}]}"#
        let templates = try TemplateJSON.templates(from: bytes(json), file: "l.json")
        #expect(
            templates == [
                FaceTemplate(
                    algorithm: 1000,
                    landmarks: [
                        Landmark(name: "LEFT_EYE", x: 1, y: 2.5, z: -3), Landmark(name: "NOSE_TIP", x: 4, y: 5, z: 6),
                    ])
            ])
    }

    @Test func landmarkFormWithTypeOptionalZAndNoVersion() throws {
        // The CoMa matcher's FaceLandmark{type,x,y,z}; z may be left out; without a version it is landmarks (1000).
        let json = #"{"landmarks": [{"type": "RIGHT_EYE", "x": 0.25, "y": 0.5}], "confidence": 0.9, "encoderType": "mediapipe"}"#
        let templates = try TemplateJSON.templates(from: bytes(json), file: "seed.json")
        #expect(templates == [FaceTemplate(algorithm: 1000, landmarks: [Landmark(name: "RIGHT_EYE", x: 0.25, y: 0.5, z: 0)])])
    }

    @Test func arrayOfTemplates() throws {
        let json = """
            [
              {"version": 24, "data": [1, 0]},
              {"version": 1000, "landmarks": [{"type": "CHIN", "x": 1, "y": 2, "z": 3}]},
              {"version": 16, "data": [0, 1]}
            ]
            """
        let templates = try TemplateJSON.templates(from: bytes(json), file: "face.json")
        #expect(templates.map(\.algorithm) == [24, 1000, 16])
        #expect(templates[2] == FaceTemplate(algorithm: 16, vector: [0, 1]))
        #expect(templates[1] == FaceTemplate(algorithm: 1000, landmarks: [Landmark(name: "CHIN", x: 1, y: 2, z: 3)]))
    }

    /// The message for a malformed file, which must name the file.
    private func problem(_ json: String, file: String = "bad.json") -> String? {
        do {
            _ = try TemplateJSON.templates(from: bytes(json), file: file)
            return nil
        } catch {
            #expect(error.file == file)
            #expect(error.description.hasPrefix(file + ": "))
            return error.message
        }
    }

    @Test func malformedFilesGetAClearMessageNamingTheFile() {
        #expect(problem("") == "is empty")
        #expect(problem("[]") == "holds no template (an empty array)")
        #expect(problem(#"{"version": 24}"#) == #"missing "data" (a vector template) or "landmarks""#)
        #expect(problem(#"{"data": [1, 2]}"#) == #"missing "version" (the algorithm, e.g. 24)"#)
        let badVersion = "at version: expected an algorithm version (an integer 0...4294967295)"
        #expect(problem(#"{"version": -1, "data": [1, 2]}"#) == badVersion)
        #expect(problem(#"{"version": 24.5, "data": [1, 2]}"#) == badVersion)
        #expect(problem(#"{"version": "24", "data": [1, 2]}"#) == badVersion)
        #expect(problem(#"{"version": 24, "data": [1, "two", 3]}"#) == "at data[1]: expected a number")
        #expect(problem(#"{"version": 24, "data": [1, 2e39]}"#) == "at data[1]: the number is outside the 32-bit float range")
        #expect(
            problem(#"{"version": 1000, "landmarks": [{"name": "CHIN", "x": 1, "y": -1e39}]}"#)
                == "at landmarks[0].y: the number is outside the 32-bit float range")
        #expect(problem("{\"version\": 24,\n \"data\": [0.5, 0.25x]}") == "not valid JSON: expected ',' or ']' in an array at line 2, column 20")
        #expect(problem(#"{"version": 24, "data": [1, 2]"#) == "not valid JSON: unexpected end of file at line 1, column 31")
        #expect(problem(#"{"version": 24, "data": [1e400]}"#) == "not valid JSON: number out of range at line 1, column 26")
        #expect(problem(#"{"version": 24, "data": 7}"#) == "at data: expected an array of numbers")
        #expect(
            problem(#"[{"version": 24, "data": [1]}, {"version": 1000, "landmarks": [{"x": 1, "y": 2}]}]"#)
                == #"at [1].landmarks[0]: missing "name" (or "type") of the landmark"#)
        #expect(problem(#"{"version": 1000, "landmarks": [{"name": "CHIN", "y": 2}]}"#) == #"at landmarks[0]: missing "x""#)
        #expect(problem(#"{"version": 1000, "landmarks": []}"#) == "at landmarks: the landmark list is empty")
        #expect(problem("42") == "expected a template object")
        #expect(problem("[42]") == "at [0]: expected a template object")
    }

    @Test func messagesNeverQuoteTemplateValues() throws {
        // An out-of-range float and a broken document: the values must not reach the message.
        let outOfRange = try #require(problem(#"{"version": 24, "data": [0.123456, 3.5e39]}"#))
        #expect(outOfRange == "at data[1]: the number is outside the 32-bit float range")
        #expect(!outOfRange.contains("3.5"))
        #expect(!outOfRange.contains("0.123456"))
        let broken = try #require(problem(#"{"version": 24, "data": [0.987654, 0.876543x]}"#))
        #expect(broken.hasPrefix("not valid JSON"))
        #expect(!broken.contains("0.876543"))
        #expect(!broken.contains("0.987654"))
    }

    @Test func syntaxCheckerFindsTheFirstProblem() {
        #expect(JSONSyntaxChecker.firstProblem(in: bytes(#" [{"a": [1, -2.5e-3, true, false, null, "x\"\u00e9"]}, {}] "#)) == nil)
        #expect(JSONSyntaxChecker.firstProblem(in: bytes(#"{"a" 1}"#)) == .init(offset: 5, what: "expected ':' after a key"))
        #expect(JSONSyntaxChecker.firstProblem(in: bytes(#"{"a": 01}"#)) == .init(offset: 7, what: "expected ',' or '}' in an object"))
        #expect(JSONSyntaxChecker.firstProblem(in: bytes(#"["\q"]"#)) == .init(offset: 3, what: "invalid escape in a string"))
        #expect(JSONSyntaxChecker.firstProblem(in: bytes("[\"a\tb\"]")) == .init(offset: 3, what: "control character in a string"))
        #expect(JSONSyntaxChecker.firstProblem(in: bytes("[1,]")) == .init(offset: 3, what: "unexpected character where a value should be"))
        #expect(JSONSyntaxChecker.firstProblem(in: bytes(String(repeating: "[", count: 600)))?.what == "nested too deeply")
        // What Python's json.dumps writes for values that are not finite: said so, where they are.
        for (json, offset) in [("[0.5, NaN]", 6), ("[Infinity]", 1), ("[1, -Infinity]", 4)] {
            let problem = JSONSyntaxChecker.firstProblem(in: bytes(json))
            #expect(problem?.offset == offset && problem?.what.contains("is not a JSON number (Python's json.dumps") == true, "\(json)")
        }
        #expect(JSONSyntaxChecker.firstProblem(in: bytes("[-1, Nope]"))?.what == "unexpected character where a value should be")
        #expect(JSONSyntaxChecker.position(of: 5, in: bytes("ab\ncdef")) == (2, 3))
    }

    @Test func aFaceFileNested513DeepIsRefusedNotACrash() {
        // Foundation's decoder traps on this document; the syntax check refuses it first.
        #expect(throws: InputFileError.self) { try TemplateJSON.faceFile(from: bytes(String(repeating: "[", count: 513)), file: "deep.json") }
    }

    @Test func filesFormOneFace() throws {
        let directory = TemporaryDirectory("registryctl-tests").path
        try write(#"{"version": 24, "data": [1, 0]}"#, to: directory + "/arcface.json")
        try write(
            #"[{"version": 1000, "landmarks": [{"name": "CHIN", "x": 1, "y": 2}]}, {"version": 16, "data": [0, 1]}]"#, to: directory + "/more.json")
        let face = try TemplateJSON.face(files: [directory + "/arcface.json", directory + "/more.json"])
        #expect(face.templates.map(\.algorithm) == [24, 1000, 16])

        // Two templates of one algorithm cannot form a face.
        try write(#"{"version": 24, "data": [0, 1]}"#, to: directory + "/again.json")
        #expect(throws: InputFileError.self) { try TemplateJSON.face(files: [directory + "/arcface.json", directory + "/again.json"]) }
        do {
            _ = try TemplateJSON.face(files: [directory + "/arcface.json", directory + "/again.json"])
        } catch {
            #expect(error.file == directory + "/again.json")
            #expect(error.message.contains("algorithm 24"))
        }
    }

    @Test func unreadableFileIsABadInputFile() {
        #expect(throws: InputFileError(file: "/nonexistent/face.json", message: "cannot open: No such file or directory")) {
            try TemplateJSON.templates(in: "/nonexistent/face.json")
        }
        #expect(ExitStatus(for: InputFileError(file: "x", message: "y")) == .badInput)
    }
}

// MARK: --registry specs

@Suite("Registry specs")
struct RegistrySpecTests {
    @Test func namesAndVersions() throws {
        #expect(try RegistrySpec(parsing: "arcface") == RegistrySpec(algorithm: .name("arcface")))
        #expect(try RegistrySpec(parsing: "24") == RegistrySpec(algorithm: .version(24)))
        #expect(try RegistrySpec(parsing: "my-model_2.1") == RegistrySpec(algorithm: .name("my-model_2.1")))
    }

    @Test func thresholds() throws {
        let spec = try RegistrySpec(parsing: "dlib:0.8,0.85,0.9")
        #expect(spec.algorithm == .name("dlib"))
        #expect(spec.thresholds == Thresholds(authentication: 0.8, identification: 0.85, autoEnrolment: 0.9))
        #expect(try RegistrySpec(parsing: "300:1,1,1").thresholds == Thresholds(authentication: 1, identification: 1, autoEnrolment: 1))
        #expect(spec.description == "dlib:0.8,0.85,0.9")
    }

    @Test(arguments: [
        "", ":0.6,0.6,0.6", "arcface:", "arcface:0.6", "arcface:0.6,0.6", "arcface:0.6,0.6,0.6,0.6", "arcface:0,0.6,0.6",
        "arcface:0.6,1.5,0.6", "arcface:0.6,0.6,-0.1", "arcface:a,b,c", "arcface:nan,0.6,0.6", "arc face", "arcface/2",
        "99999999999",
    ])
    func badSpecsAreRefused(_ text: String) {
        #expect(throws: ValidationError.self) { try RegistrySpec(parsing: text) }
    }

    @Test func namesResolveThroughTheDaemonsAlgorithms() throws {
        let algorithms = Algorithm.builtIn
        #expect(
            try RegistrySpec(parsing: "ArcFace:0.5,0.6,0.7").configuration(algorithms: algorithms)
                == RegistryConfiguration(algorithm: 24, thresholds: Thresholds(authentication: 0.5, identification: 0.6, autoEnrolment: 0.7)))
        #expect(try RegistrySpec(parsing: "landmarks").configuration(algorithms: algorithms) == RegistryConfiguration(algorithm: 1000))
        #expect(try RegistrySpec(parsing: "4242").configuration(algorithms: []) == RegistryConfiguration(algorithm: 4242))
        do {
            _ = try RegistrySpec(parsing: "facenet").configuration(algorithms: algorithms)
            Issue.record("an unknown name resolved")
        } catch let error as RegistryError {
            #expect(error.code == .unknownAlgorithm)
            #expect(ExitStatus(for: error) == .refused)
        }
    }
}

// MARK: Exit statuses

@Suite("Exit statuses")
struct ExitStatusTests {
    /// The numbers scripts test for: a status, once published, keeps its number.
    @Test func theNumbersStay() {
        #expect(ExitStatus.success.rawValue == 0)
        #expect(ExitStatus.noMatch.rawValue == 1)
        #expect(ExitStatus.notRegistered.rawValue == 2)
        #expect(ExitStatus.refused.rawValue == 3)
        #expect(ExitStatus.unreachable.rawValue == 4)
        #expect(ExitStatus.usage.rawValue == ExitCode.validationFailure.rawValue)
        #expect(ExitStatus.badInput.rawValue == 65)
    }

    /// The root command's help carries the table as the manual page generator reads it back: every
    /// status, in order, with its whole meaning, and nothing else.
    @Test func theHelpAndTheManualPageCarryTheTable() throws {
        let (table, rest) = try ExitStatusTable.extract(from: RegistryCtl.configuration.discussion)
        #expect(table.entries.map(\.status) == ExitStatus.allCases.map { String($0.rawValue) })
        #expect(table.entries.map(\.meaning) == ExitStatus.allCases.map(\.meaning))
        #expect(!rest.contains(ExitStatusTable.heading))
        for line in ExitStatus.documentation.split(separator: "\n") { #expect(line.count <= 72, "a help line is too long: \(line)") }
    }

    /// The README's list of statuses is the table's, in its order, with the same words.
    @Test func theReadmeListsTheTable() {
        let readme = readFileText(repositoryPath("README.md")).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let list = ExitStatus.allCases.map { "\($0.rawValue) \($0.summary)" }.joined(separator: ", ")
        #expect(readme.contains("Exit statuses: \(list) ("), "the README does not list: \(list)")
    }

    @Test(arguments: RegistryError.Code.allCases)
    func daemonErrors(_ code: RegistryError.Code) {
        let status = ExitStatus(for: RegistryError(code, "refused"))
        #expect(status == (code == .identifierNotRegistered ? .notRegistered : .refused))
    }

    @Test func transportErrors() {
        #expect(ExitStatus(for: RegistryClientError.unreachable(socketPath: "/x.sock", reason: "ENOENT")) == .unreachable)
        #expect(ExitStatus(for: RegistryClientError.connectionClosed) == .unreachable)
        #expect(ExitStatus(for: RegistryClientError.unexpectedResponse("?")) == .unreachable)
        struct SocketError: Error {}
        #expect(ExitStatus(for: SocketError()) == .unreachable)
    }

    @Test func localErrors() {
        #expect(ExitStatus(for: InputFileError(file: "a.json", message: "is empty")) == .badInput)
        #expect(ExitStatus(for: OutputFileError(file: "out.pb", message: "cannot write")) == .refused)
        #expect(ExitStatus(for: CommandFailure.templateNotFound(7, gallery: "default")) == .notRegistered)
    }

    @Test func errorReportsCarryCodeMessageAndDetails() throws {
        let finding = RegistrationFinding(algorithm: 24, kind: .similarFace(identifier: "bob", score: 0.75))
        let error = RegistryError(
            .similarFaceRegistered, "a similar face is registered as 'bob'",
            details: .registration(decisive: finding, all: [finding, RegistrationFinding(algorithm: 16, kind: .faceMismatch(bestScore: 0.5))]))
        let report = ErrorReport(error)
        #expect(
            report.text(.builtIn) == [
                "registryctl: SIMILAR_FACE_REGISTERED: a similar face is registered as 'bob'",
                "  similar face 'bob' (score 0.7500) in arcface (24) (decisive)",
                "  face mismatch (best score 0.5000) in dlib (16)",
            ])

        struct Document: Decodable {
            struct Body: Decodable {
                var code: String
                var message: String
                var exitStatus: Int32
                var decisive: FindingDocument?
                var findings: [FindingDocument]?
            }
            var error: Body
        }
        let document = try JSONDecoder().decode(Document.self, from: Data(JSONOutput.document(report).utf8))
        #expect(document.error.code == "SIMILAR_FACE_REGISTERED")
        #expect(document.error.exitStatus == 3)
        #expect(document.error.decisive?.identifier == "bob")
        #expect(document.error.decisive?.score == 0.75)
        #expect(document.error.decisive?.kind == "similar_face")
        #expect(document.error.findings?.map(\.kind) == ["similar_face", "face_mismatch"])
        #expect(document.error.findings?.last?.bestScore == 0.5)

        let unreachable = ErrorReport(RegistryClientError.unreachable(socketPath: "/x.sock", reason: "refused"))
        #expect(unreachable.error.code == "UNREACHABLE")
        #expect(unreachable.error.exitStatus == 4)
        let input = ErrorReport(InputFileError(file: "a.json", message: "is empty"))
        #expect(input.text(.builtIn) == ["registryctl: BAD_INPUT: a.json: is empty"])
        #expect(input.error.file == "a.json")
    }
}

// MARK: Export and import files

@Suite("Export and import files")
struct TemplateStreamTests {
    /// A few stored templates: vectors, landmarks, awkward identifiers and awkward floats.
    static let stored: [StoredTemplate] = [
        StoredTemplate(
            id: 1, identifier: "alice", algorithm: 24, registeredAt: 1_700_000_000_000_000, source: .registered, quality: nil,
            template: FaceTemplate(algorithm: 24, vector: [0.1, -0.2, 1e-5, 3.4028235e38, -0.0, 0.333333343])),
        StoredTemplate(
            id: 2, identifier: #"bob "the builder" \ Øyvind 🙂"#, algorithm: 16, registeredAt: 1_700_000_000_000_001, source: .imported,
            quality: 0.5, template: FaceTemplate(algorithm: 16, vector: [Float](repeating: 0.088388346, count: 128))),
        StoredTemplate(
            id: 3, identifier: "carol", algorithm: 1000, registeredAt: 1_700_000_000_000_002, source: .autoEnrolled, quality: 0.9,
            template: FaceTemplate(
                algorithm: 1000,
                landmarks: landmarkNames.prefix(20).enumerated().map { index, name in
                    Landmark(name: name, x: Float(index) * 0.5, y: -Float(index) / 3, z: Float(index) * 1e-3)
                })),
    ]

    /// What an import reads back: the protobuf stream keeps each template's time, source and
    /// quality; Ver-ID JSON has no place for them.
    static func expected(_ format: TemplateFileFormat) -> [ImportItem] {
        Self.stored.map {
            format == .protobuf
                ? ImportItem(identifier: $0.identifier, template: $0.template!, registeredAt: $0.registeredAt, source: $0.source, quality: $0.quality)
                : ImportItem(identifier: $0.identifier, template: $0.template!)
        }
    }

    private func export(_ format: TemplateFileFormat, to path: String, pages: [[StoredTemplate]]) throws {
        let sink = try OutputSink(path: path)
        var writer = TemplateStreamWriter(format: format, sink: sink)
        try writer.begin()
        try writer.beginGallery(GalleryConfiguration(name: "default", registries: [RegistryConfiguration(algorithm: 24)]))
        for page in pages { try writer.append(page) }
        try writer.end()
        try sink.commit()
    }

    @Test(arguments: TemplateFileFormat.allCases)
    func roundTrip(_ format: TemplateFileFormat) throws {
        let path = TemporaryDirectory("registryctl-tests").path + "/export.\(format.rawValue)"
        // Two pages, as export writes them.
        try export(format, to: path, pages: [Array(Self.stored.prefix(2)), Array(Self.stored.suffix(1))])
        let contents = try FileIO.read(path)
        #expect(TemplateFileFormat.guess(contents) == format)
        #expect(try TemplateStreamReader.items(from: contents, format: nil, file: path) == Self.expected(format))
        #expect(try TemplateStreamReader.items(from: contents, format: format, file: path) == Self.expected(format))
        // Not left behind: the temporary file the sink wrote first.
        var info = stat()
        #expect(stat(path + ".partial-\(getpid())", &info) != 0)
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    /// registryctl often runs as root in directories others may write: a symbolic link planted at
    /// the temporary name (`export` and `metrics` write `FILE.partial-PID` first) makes it fail
    /// with a clear error, and its target is neither created nor written.
    @Test(arguments: [0o600, 0o644] as [mode_t])
    func aLinkPlantedAtTheTemporaryNameIsNeverWrittenThrough(mode: mode_t) throws {
        let directory = TemporaryDirectory("registryctl-tests")
        defer { directory.remove() }
        let path = directory.path + "/out.prom"
        let victim = directory.path + "/victim"
        let existing = directory.path + "/existing"
        #expect(writeText("keep\n", to: existing))
        for target in [victim, existing] {
            #expect(symlink(target, path + ".partial-\(getpid())") == 0)
            var refusal: String?
            do {
                _ = try OutputSink(path: path, mode: mode)
            } catch {
                refusal = "\(error)"
            }
            #expect(refusal?.contains("symbolic link") == true && refusal?.contains(".partial-") == true, "\(refusal ?? "written")")
            unlink(path + ".partial-\(getpid())")
        }
        #expect(access(victim, F_OK) != 0 && access(path, F_OK) != 0)
        #expect(readFileText(existing) == "keep\n")
        // Without the link it writes, 0600 until complete, then with the mode asked for (the umask's
        // bits taken out, as open would).
        let sink = try OutputSink(path: path, mode: mode)
        var info = stat()
        #expect(stat(path + ".partial-\(getpid())", &info) == 0 && info.st_mode & 0o777 == 0o600)
        try sink.write("x 1\n")
        try sink.commit()
        let mask = umask(0o022)
        umask(mask)
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == mode & ~mask)
        #expect(readFileText(path) == "x 1\n")
    }

    @Test(arguments: TemplateFileFormat.allCases)
    func emptyExportRoundTrips(_ format: TemplateFileFormat) throws {
        let path = TemporaryDirectory("registryctl-tests").path + "/empty.\(format.rawValue)"
        try export(format, to: path, pages: [[]])
        #expect(try TemplateStreamReader.items(from: FileIO.read(path), format: format, file: path) == [])
    }

    /// A bare `StoredTemplate` frame, as export files were before dumps (still read).
    static func legacyRecord(_ stored: StoredTemplate) throws -> [UInt8] {
        let message: [UInt8] = try Registry_V1_StoredTemplate(stored).serializedBytes()
        let length = UInt32(message.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + message
    }

    @Test func legacyStreamsOfLengthPrefixedStoredTemplatesStillImport() throws {
        let record = try Self.legacyRecord(Self.stored[0])
        #expect(!DumpFile.isDump(record))
        #expect(try TemplateStreamReader.items(from: record, format: nil, file: "t.pb") == Array(Self.expected(.protobuf).prefix(1)))
        let length = Int(record[0]) << 24 | Int(record[1]) << 16 | Int(record[2]) << 8 | Int(record[3])
        #expect(length == record.count - 4)
        // Truncated streams and garbage are bad input files, naming the record.
        #expect(throws: InputFileError.self) { try TemplateStreamReader.protobufItems(from: Array(record.dropLast()), file: "t.pb") }
        #expect(throws: InputFileError.self) { try TemplateStreamReader.protobufItems(from: record + [0, 0], file: "t.pb") }
        do {
            _ = try TemplateStreamReader.protobufItems(from: record + [0, 0, 0, 9, 1, 2], file: "t.pb")
            Issue.record("a truncated record was read")
        } catch {
            #expect(error.message.hasPrefix("record 2 at byte \(record.count): truncated"))
        }
        // A record without data cannot be imported.
        var withoutData = Self.stored[0]
        withoutData.template = nil
        let empty = try Self.legacyRecord(withoutData)
        #expect(throws: InputFileError.self) { try TemplateStreamReader.protobufItems(from: empty, file: "t.pb") }
    }

    @Test func verIDExportIsTheDocumentedJSON() throws {
        struct Record: Decodable, Equatable {
            var identifier: String
            var version: UInt32
            var data: [Float]?
            var landmarks: [LandmarkDocument]?
        }
        let path = TemporaryDirectory("registryctl-tests").path + "/export.json"
        try export(.verid, to: path, pages: [Self.stored])
        let records = try JSONDecoder().decode([Record].self, from: Data(FileIO.read(path)))
        #expect(records.map(\.identifier) == Self.stored.map(\.identifier))
        #expect(records.map(\.version) == [24, 16, 1000])
        #expect(records[0].data == [0.1, -0.2, 1e-5, 3.4028235e38, -0.0, 0.333333343])
        #expect(records[0].landmarks == nil)
        #expect(records[2].data == nil)
        #expect(records[2].landmarks?.first == LandmarkDocument(name: landmarkNames[0], x: 0, y: 0, z: 0))
    }

    @Test func verIDImportNeedsIdentifiers() {
        #expect(throws: InputFileError(file: "v.json", message: #"at [1]: missing "identifier""#)) {
            try TemplateStreamReader.items(
                from: bytes(#"[{"identifier": "a", "version": 24, "data": [1]}, {"version": 24, "data": [1]}]"#), format: .verid, file: "v.json")
        }
    }

    @Test func importChunksHoldAThousandTemplatesOrThreeMebibytes() {
        let small = (0..<2500).map {
            ImportItem(identifier: "p\($0)", template: FaceTemplate(algorithm: 24, vector: [Float](repeating: 0.1, count: 128)))
        }
        let smallChunks = ImportCommand.chunks(small)
        #expect(smallChunks.map(\.count) == [1000, 1000, 500])
        #expect(smallChunks.flatMap { $0 } == small)
        // 4096 floats = 16 KiB per template: about 190 fit in 3 MiB.
        let large = (0..<500).map {
            ImportItem(identifier: "p\($0)", template: FaceTemplate(algorithm: 9, vector: [Float](repeating: 0.1, count: 4096)))
        }
        let largeChunks = ImportCommand.chunks(large)
        #expect(largeChunks.allSatisfy { $0.count * 4096 * 4 <= ImportCommand.chunkBytes })
        #expect(largeChunks.count == 3)
        #expect(largeChunks.flatMap { $0 } == large)
        #expect(ImportCommand.chunks([]).isEmpty)
    }

    @Test func exportPagesShrinkForLargeTemplates() {
        func gallery(_ algorithms: [Algorithm]) -> GalleryInfo {
            GalleryInfo(
                name: "g",
                registries: algorithms.map {
                    RegistryInfo(algorithm: $0, thresholds: Thresholds(defaultsFor: $0), templateCount: 0, identifierCount: 0)
                },
                identifierCount: 0)
        }
        #expect(ExportCommand.pageSize(for: nil) == 1000)
        #expect(ExportCommand.pageSize(for: gallery(Algorithm.builtIn)) == 1000)
        let huge = Algorithm(version: 9, name: "huge", kind: .vector(dimension: 4096), scoreFunction: .cosine, defaultThreshold: 0.5)
        let size = ExportCommand.pageSize(for: gallery([.arcface, huge]))
        #expect(size < 1000 && size * 4096 * 4 <= ExportCommand.pageBytes)
    }

    @Test func formatIsGuessedFromTheFirstByte() {
        #expect(TemplateFileFormat.guess(bytes("[]")) == .verid)
        #expect(TemplateFileFormat.guess(bytes(" \n\t[{}]")) == .verid)
        #expect(TemplateFileFormat.guess([0, 0, 0, 5]) == .protobuf)
        #expect(TemplateFileFormat.guess([]) == .protobuf)
    }
}

// MARK: Text output

@Suite("Text output")
struct TextOutputTests {
    @Test func iso8601FromMicroseconds() {
        #expect(Timestamp.iso8601(micros: 0) == "1970-01-01T00:00:00.000000Z")
        #expect(Timestamp.iso8601(micros: 1_700_000_000_123_456) == "2023-11-14T22:13:20.123456Z")
        #expect(Timestamp.iso8601(micros: 1_709_164_800_000_000) == "2024-02-29T00:00:00.000000Z")
        #expect(Timestamp.iso8601(micros: 951_782_400_000_001) == "2000-02-29T00:00:00.000001Z")
        #expect(Timestamp.iso8601(micros: -1) == "1969-12-31T23:59:59.999999Z")
        #expect(Timestamp.iso8601(micros: 253_402_300_799_999_999) == "9999-12-31T23:59:59.999999Z")
    }

    @Test func numbers() {
        #expect(Format.fixed(0.83125, digits: 4) == "0.8313" || Format.fixed(0.83125, digits: 4) == "0.8312")
        #expect(Format.score(1) == "1.0000")
        #expect(Format.score(0.05) == "0.0500")
        #expect(Format.fixed(-0.5, digits: 1) == "-0.5")
        #expect(Format.fixed(99.95, digits: 1) == "100.0" || Format.fixed(99.95, digits: 1) == "99.9")
        #expect(Format.bytes(999) == "999 bytes")
        #expect(Format.bytes(12_345_678) == "12.3 MB (12345678 bytes)")
        #expect(Format.duration(seconds: 3_723) == "01:02:03")
        #expect(Format.duration(seconds: 2 * 86_400 + 5) == "2d 00:00:05")
    }

    @Test func tablesAlignColumns() {
        var table = Table(header: ["ID", "ALGORITHM"])
        table.append(["17", "arcface (24)"])
        table.append(["1234", "dlib (16)"])
        #expect(table.lines(indent: "  ") == ["  ID    ALGORITHM", "  17    arcface (24)", "  1234  dlib (16)"])
    }

    @Test func progressLine() {
        #expect(ProgressBar.line(label: "exporting", done: 500, total: 1000, width: 10) == "exporting [#####-----]  50%  500/1000")
        #expect(ProgressBar.line(label: "exporting", done: 7, total: nil) == "exporting 7")
        // Not a terminal: nothing is drawn (the test's standard error is not asked).
        let silent = ProgressBar(label: "x", total: 1, enabled: false)
        silent.update(1)
        silent.finish()
    }

    @Test func identifyResultExitsOneWithoutMatches() {
        let none = IdentifyCommand.Result(gallery: "default", identification: Identification(algorithm: 24, matches: [], autoEnrolment: []))
        #expect(none.exitStatus == .noMatch)
        #expect(none.text(.builtIn) == "no match in gallery default")
        let found = IdentifyCommand.Result(
            gallery: "default",
            identification: Identification(
                algorithm: 24, matches: [IdentifyMatch(identifier: "alice", score: 0.9, templateId: 7)],
                autoEnrolment: [
                    AutoEnrolmentOutcome(algorithm: 300, result: .enrolled(templateId: 8)), AutoEnrolmentOutcome(algorithm: 16, result: .noTemplate),
                ]))
        #expect(found.exitStatus == .success)
        #expect(
            found.text(.builtIn).split(separator: "\n").map(String.init) == [
                "1 match in gallery default:",
                "  IDENTIFIER  SCORE   TEMPLATE  ALGORITHM",
                "  alice       0.9000  7         arcface (24)",
                "auto-enrolment:",
                "  r300 (300): enrolled as template 8",
                "  dlib (16): skipped: the face has no template for it",
            ])
    }

    @Test func authenticateResultExitsOneWhenNotAuthenticated() {
        let no = AuthenticateCommand.Result(
            gallery: "default", identifier: "alice",
            authentication: Authentication(authenticated: false, score: 0.2, templateId: 3, algorithm: 24, autoEnrolment: []))
        #expect(no.exitStatus == .noMatch)
        #expect(no.text(.builtIn).hasPrefix("authenticated  no\n"))
        let yes = AuthenticateCommand.Result(
            gallery: "default", identifier: "alice",
            authentication: Authentication(authenticated: true, score: 0.8, templateId: 3, algorithm: 24, autoEnrolment: []))
        #expect(yes.exitStatus == .success)
    }

    @Test func verifyResultExitsThreeWithProblems() {
        #expect(VerifyCommand.Result(templatesChecked: 10, problems: []).exitStatus == .success)
        #expect(VerifyCommand.Result(templatesChecked: 10, problems: ["template 3 has no row"]).exitStatus == .refused)
    }

    @Test func jsonKeepsNumbersAsNumbers() throws {
        let stored = StoredTemplate(id: 42, identifier: "alice", algorithm: 24, registeredAt: 1_000_000, source: .forced, quality: 0.5, template: nil)
        let json = JSONOutput.document(stored)
        #expect(json.contains(#""id" : 42"#))
        #expect(json.contains(#""quality" : 0.5"#))
        #expect(json.contains(#""registeredAt" : "1970-01-01T00:00:01.000000Z""#))
        #expect(json.contains(#""source" : "forced""#))
        #expect(!json.contains("template"))
    }
}

/// The `--json` error codes: every one registryctl reports of its own is listed in the README.
@Test func ownErrorCodesAreDocumented() throws {
    let readme = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appending(path: "README.md")
    let text = try String(contentsOf: readme, encoding: .utf8)
    for code in ErrorReport.ownCodes { #expect(text.contains("`\(code)`"), "\(code) is not in the README") }
    let produced: [String] = [
        ErrorReport(RegistryClientError.unreachable(socketPath: "s", reason: "r")).error.code,
        ErrorReport(RegistryClientError.connectionClosed).error.code,
        ErrorReport(RegistryClientError.unexpectedResponse("x")).error.code,
        ErrorReport(CommandFailure.templateNotFound(1, gallery: "g")).error.code,
    ]
    for code in produced { #expect(ErrorReport.ownCodes.contains(code)) }
}

/// A refused import item is named by its place in the file, not in the request that carried it.
@Test func importErrorsNameTheItemInTheFile() {
    #expect(
        ImportCommand.fileRelative("import item 3 ('bob'): wrong dimension", offset: 1000, file: "people.json")
            == "people.json: item 1003 ('bob'): wrong dimension")
    #expect(ImportCommand.fileRelative("gallery 'x' does not exist", offset: 1000, file: "f") == "gallery 'x' does not exist")
}

/// `registryctl stats`' figures from the typed fields the daemon sends (its metrics).
@Suite struct StatsFiguresTests {
    static let identify = Registry_V1_StatsResult.OperationStats.with {
        $0.operation = "identify"
        $0.match = 7
        $0.noMatch = 3
        $0.refused = 2
        $0.errors = ["GALLERY_NOT_FOUND": 2]
        $0.latency = .with {
            $0.meanSeconds = 0.002
            $0.p50Seconds = 0.001 + 0.001 * 2 / 6
            $0.p99Seconds = 0.002
        }
    }

    static let stats = Registry_V1_StatsResult.with {
        $0.serverVersion = "1.2.3"
        $0.commits = 4
        $0.committedOperations = 6
        $0.operations = [
            Self.identify,
            .with {
                $0.operation = "stats"
                $0.ok = 1
            },
        ]
        $0.writer = .with {
            $0.queueDepth = 3
            $0.commitLatency = .with {
                $0.meanSeconds = 0.004
                $0.p50Seconds = 0.0035
                $0.p99Seconds = 0.0099
            }
        }
    }

    @Test func operationFiguresKeepTheDaemonsOrderOutcomesAndErrors() {
        let result = StatsCommand.Result(Self.stats)
        #expect(result.operations.map(\.operation) == ["identify", "stats"])
        let identify = result.operations[0]
        #expect(identify.match == 7 && identify.noMatch == 3 && identify.refused == 2 && identify.ok == 0)
        #expect(identify.errors == ["GALLERY_NOT_FOUND": 2])
        #expect(identify.meanSeconds == 0.002 && identify.p99Seconds == 0.002)
        // No latency sent: none shown.
        #expect(result.operations[1].ok == 1 && result.operations[1].meanSeconds == nil && result.operations[1].p50Seconds == nil)
        #expect(result.writer == WriterFigures(Self.stats.writer))
        #expect(result.writer.queueDepth == 3 && result.writer.commitP50Seconds == 0.0035 && result.writer.commitP99Seconds == 0.0099)
        // A daemon that sent no writer figures: an empty queue and no commit latency.
        let none = WriterFigures(Registry_V1_StatsResult.WriterStats())
        #expect(none.queueDepth == 0 && none.commitP50Seconds == nil && none.commitP99Seconds == nil)
    }

    /// The text and JSON `registryctl stats` prints for these figures (latencies to the nanosecond).
    @Test func textAndJSONAreAsBefore() {
        let result = StatsCommand.Result(Self.stats)
        let lines = result.text(.builtIn).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("writer queue           3 waiting"))
        #expect(lines.contains("commit latency         p50 3.50 ms, p99 9.90 ms"))
        // The outcome columns as --json names them (once "answered", the sum of the first three).
        #expect(lines.contains("operation  ok  match  no-match  refused  mean     p50      p99"))
        #expect(lines.contains("identify   0   7      3         2        2.00 ms  1.33 ms  2.00 ms"))
        #expect(lines.contains("stats      1   0      0         0        -        -        -"))
        #expect(lines.contains("identify   GALLERY_NOT_FOUND  2"))
        let json = JSONOutput.document(result)
        #expect(
            json.contains(
                """
                  "operations" : [
                    {
                      "errors" : {
                        "GALLERY_NOT_FOUND" : 2
                      },
                      "match" : 7,
                      "meanSeconds" : 0.002,
                      "noMatch" : 3,
                      "ok" : 0,
                      "operation" : "identify",
                      "p50Seconds" : 0.001333333,
                      "p99Seconds" : 0.002,
                      "refused" : 2
                    },
                    {
                      "errors" : {

                      },
                      "match" : 0,
                      "noMatch" : 0,
                      "ok" : 1,
                      "operation" : "stats",
                      "refused" : 0
                    }
                  ],
                """), "\(json)")
        #expect(
            json.contains(
                """
                  "writer" : {
                    "commitP50Seconds" : 0.0035,
                    "commitP99Seconds" : 0.0099,
                    "queueDepth" : 3
                  }
                """), "\(json)")
    }

    static let fleet = Registry_V1_StatsResult.Fleet.with {
        $0.node = "door-1"
        $0.appliedPosition = 1234
        $0.headPosition = 1240
        $0.lagEntries = 6
        $0.lagSeconds = 0.02
        $0.databaseReachable = true
        $0.fleetID = "5f0c2a9e1b7d4c36"
    }

    /// A daemon in fleet mode: `stats` shows where the node is in the fleet's log, in text and JSON.
    @Test func aFleetNodeShowsItsPlaceInTheLog() {
        var stats = Self.stats
        stats.fleet = Self.fleet
        let result = StatsCommand.Result(stats)
        let lines = result.text(.builtIn).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("fleet                  node door-1, applied 1234, head 1240 (6 behind, 0.02 s), database reachable"), "\(lines)")
        #expect(lines.contains("fleet id               5f0c2a9e1b7d4c36"), "\(lines)")
        let json = JSONOutput.document(result)
        #expect(
            json.contains(
                """
                  "fleet" : {
                    "appliedPosition" : 1234,
                    "databaseReachable" : true,
                    "fleetId" : "5f0c2a9e1b7d4c36",
                    "headPosition" : 1240,
                    "lagEntries" : 6,
                    "lagSeconds" : 0.02,
                    "node" : "door-1"
                  },
                """), "\(json)")
        // An unreachable database is what an operator looks for: in capitals.
        stats.fleet.databaseReachable = false
        #expect(StatsCommand.Result(stats).text(.builtIn).contains("(6 behind, 0.02 s), database UNREACHABLE"))
    }

    /// A standalone daemon sends no fleet: neither the text nor the JSON has one.
    @Test func aStandaloneDaemonShowsNoFleet() {
        let result = StatsCommand.Result(Self.stats)
        #expect(result.fleet == nil)
        #expect(!result.text(.builtIn).contains("fleet"))
        #expect(!JSONOutput.document(result).contains(#""fleet""#))
    }

    /// `status` shows the same fleet line among its figures, and only in fleet mode.
    @Test func statusShowsTheFleetLine() throws {
        func status(_ fleet: Registry_V1_StatsResult.Fleet?) -> StatusCommand.Result {
            var stats = Registry_V1_StatsResult()
            if let fleet { stats.fleet = fleet }
            return StatusCommand.Result(
                socket: "/run/registryd/registryd.sock", protocol: .init(major: 1, minor: 2), serverVersion: "1.2.3",
                uptimeSeconds: 61, openConnections: 2, requestsServed: 9, storeBytes: 4096, commits: 4, committedOperations: 6,
                scanKernels: "avx2", galleries: [.init(name: "default", identifiers: 3)], fleet: FleetFigures(stats))
        }
        let inFleet = status(Self.fleet)
        let lines = inFleet.text(.builtIn).split(separator: "\n").map(String.init)
        #expect(lines.contains("fleet         node door-1, applied 1234, head 1240 (6 behind, 0.02 s), database reachable"), "\(lines)")
        let fleetRow = try #require(lines.firstIndex { $0.hasPrefix("fleet") })
        #expect(fleetRow < (try #require(lines.firstIndex(of: "galleries"))), "the fleet line comes before the galleries")
        #expect(JSONOutput.document(inFleet).contains(#""fleet" : {"#))
        let standalone = status(nil)
        #expect(!standalone.text(.builtIn).contains("fleet"))
        #expect(!JSONOutput.document(standalone).contains(#""fleet""#))
    }

    @Test func metricsCommandParses() throws {
        #expect(try parse(["metrics"], as: MetricsCommand.self).output == nil)
        #expect(
            try parse(["metrics", "-o", "/var/lib/node_exporter/registryd.prom"], as: MetricsCommand.self).output
                == "/var/lib/node_exporter/registryd.prom")
    }
}

/// Writes `text` to a new file (0600).
private func writeText(_ text: String, to path: String) -> Bool {
    let file = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard file >= 0 else { return false }
    defer { close(file) }
    return text.utf8CString.withUnsafeBytes { write(file, $0.baseAddress, $0.count - 1) } == text.utf8.count
}
