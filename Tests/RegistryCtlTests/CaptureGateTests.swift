import ArgumentParser
import FoundationEssentials
import Glibc
import RegistryModel
import SyntheticFaces
import TestSupport
import Testing

@testable import RegistryCtlInput
@testable import registryctl

// Capture gates in registryctl (README, capture gates): face files with capture metadata and depth frames, the
// extended --registry spec and --liveness, the profile commands, the walkthrough's example files, and
// how QUALITY_TOO_LOW and LIVENESS_FAILED are reported.

// MARK: Helpers

private func parseCommand<T: ParsableCommand>(_ arguments: [String], as type: T.Type = T.self) throws -> T {
    let command = try RegistryCtl.parseAsRoot(arguments)
    return try #require(command as? T, "parsed \(Swift.type(of: command)), expected \(T.self)")
}

private func refusalCode(_ arguments: [String]) -> Int32? {
    do {
        _ = try RegistryCtl.parseAsRoot(arguments)
        return nil
    } catch {
        return RegistryCtl.exitCode(for: error).rawValue
    }
}

private func writeFile(_ text: String, to path: String) throws {
    let sink = try OutputSink(path: path)
    try sink.write(text)
    try sink.commit()
}

private func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The repository's examples/ directory (this file is Tests/RegistryCtlTests/CaptureGateTests.swift).
private let examplesDirectory: String = {
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/") + "/examples"
}()

private func example(_ name: String) -> String { examplesDirectory + "/" + name }

/// A depth grid as JSON: 100 samples, `null` where `nulls` says.
private func depthsJSON(count: Int = 100, value: Double = 0.45, nulls: Set<Int> = []) -> String {
    "[" + (0..<count).map { nulls.contains($0) ? "null" : "\(value + Double($0 % 10) * 0.001)" }.joined(separator: ", ") + "]"
}

/// The message of the InputFileError a face file gives (it must name the file and exit 65).
private func faceFileProblem(_ json: String, file: String = "face.json") -> String? {
    do {
        _ = try TemplateJSON.faceFile(from: utf8(json), file: file)
        return nil
    } catch {
        #expect(error.file == file)
        #expect(ExitStatus(for: error) == .badInput)
        return error.message
    }
}

private func enrolmentProblem(_ json: String, file: String = "poses.json") -> String? {
    do {
        _ = try TemplateJSON.enrolmentFrames(from: utf8(json), file: file)
        return nil
    } catch {
        #expect(error.file == file)
        #expect(ExitStatus(for: error) == .badInput)
        return error.message
    }
}

/// An error document as `--json` prints it, decoded.
private struct ErrorDocument: Decodable {
    struct Body: Decodable {
        var code: String
        var message: String
        var exitStatus: Int32
        var quality: QualityTooLowDocument?
        var liveness: LivenessVerdictDocument?
    }
    var error: Body
}

// MARK: Face files

@Suite("Face files")
struct FaceFileTests {
    static let template = #"{"version": 24, "data": [0.6, 0.8]}"#

    @Test func aFaceObjectCarriesTemplatesCaptureAndDepthFrames() throws {
        let json = """
            {"templates": [\(Self.template), {"version": 1000, "landmarks": [{"name": "CHIN", "x": 1, "y": 2}]}],
             "capture": {"detectorConfidence": 0.98, "faceBox": {"x": 10, "y": 20.5, "width": 300, "height": 400},
                         "imageWidth": 1280, "imageHeight": 960, "yaw": 3, "pitch": -2.5, "roll": 1,
                         "facePixelSize": 300, "sharpness": 420, "brightnessMean": 128, "brightnessStdDev": 42,
                         "vendor": "ignored"},
             "depthFrames": [
               {"depths": \(depthsJSON(nulls: [0, 99])), "timestampMillis": 1718000000000,
                "faceBox": {"x": 1, "y": 2, "width": 3, "height": 4}},
               {"depths": \(depthsJSON()), "timestampMillis": 1718000000600}]}
            """
        let face = try TemplateJSON.faceFile(from: utf8(json), file: "face.json")
        #expect(face.templates.map(\.algorithm) == [24, 1000])
        #expect(
            face.capture
                == CaptureMetadata(
                    detectorConfidence: 0.98, faceBox: FaceBox(x: 10, y: 20.5, width: 300, height: 400), imageWidth: 1280,
                    imageHeight: 960, yaw: 3, pitch: -2.5, roll: 1, facePixelSize: 300, sharpness: 420, brightnessMean: 128,
                    brightnessStdDev: 42))
        #expect(face.depthFrames.count == 2)
        let first = face.depthFrames[0]
        #expect(first.depths.count == 100)
        #expect(first.depths[0].isNaN)  // null: not measured
        #expect(first.depths[99].isNaN)
        #expect(first.depths[1] == Float(0.451))
        #expect(first.timestampMillis == 1_718_000_000_000)
        #expect(first.faceBox == FaceBox(x: 1, y: 2, width: 3, height: 4))
        #expect(face.depthFrames[1].faceBox == nil)
        #expect(face.depthFrames[1].timestampMillis == 1_718_000_000_600)
        let allFinite = face.depthFrames[1].depths.allSatisfy { $0.isFinite }
        #expect(allFinite)
    }

    @Test func everyCaptureKeyIsOptional() throws {
        let face = try TemplateJSON.faceFile(from: utf8(#"{"templates": [\#(Self.template)], "capture": {"yaw": 10}}"#), file: "f.json")
        #expect(face.capture == CaptureMetadata(yaw: 10))
        let empty = try TemplateJSON.faceFile(from: utf8(#"{"templates": [\#(Self.template)], "capture": {}}"#), file: "f.json")
        #expect(empty.capture == CaptureMetadata())
        #expect(empty.depthFrames.isEmpty)
        // The plain forms are unchanged.
        #expect(
            try TemplateJSON.faceFile(from: utf8(Self.template), file: "t.json")
                == FaceFile(templates: [FaceTemplate(algorithm: 24, vector: [0.6, 0.8])]))
        #expect(try TemplateJSON.faceFile(from: utf8("[\(Self.template)]"), file: "t.json").templates.count == 1)
    }

    @Test func aDepthFrameNeedsExactlyOneHundredSamples() {
        let short =
            #"{"templates": [\#(Self.template)], "depthFrames": [{"depths": \#(depthsJSON()), "timestampMillis": 0}, {"depths": \#(depthsJSON(count: 99)), "timestampMillis": 600}]}"#
        #expect(faceFileProblem(short) == "at depthFrames[1].depths: 99 depth samples, expected 100 (a 10 × 10 grid, row-major)")
        let long = #"{"depthFrames": [{"depths": \#(depthsJSON(count: 101)), "timestampMillis": 0}]}"#
        #expect(faceFileProblem(long) == "at depthFrames[0].depths: 101 depth samples, expected 100 (a 10 × 10 grid, row-major)")
        #expect(
            faceFileProblem(#"{"depthFrames": [{"depths": [], "timestampMillis": 0}]}"#)
                == "at depthFrames[0].depths: 0 depth samples, expected 100 (a 10 × 10 grid, row-major)")
        #expect(
            faceFileProblem(#"{"depthFrames": [{"depths": [0.5], "timestampMillis": 0}]}"#)
                == "at depthFrames[0].depths: 1 depth sample, expected 100 (a 10 × 10 grid, row-major)")
    }

    @Test func malformedFaceObjectsGetAClearMessage() {
        #expect(faceFileProblem(#"{"depthFrames": [{"timestampMillis": 0}]}"#) == #"at depthFrames[0]: missing "depths""#)
        #expect(faceFileProblem(#"{"depthFrames": [{"depths": \#(depthsJSON())}]}"#) == #"at depthFrames[0]: missing "timestampMillis""#)
        #expect(
            faceFileProblem(#"{"depthFrames": [{"depths": \#(depthsJSON()), "timestampMillis": 1.5}]}"#)
                == "at depthFrames[0].timestampMillis: expected an integer (milliseconds)")
        #expect(
            faceFileProblem(#"{"depthFrames": [{"depths": [1, "x"], "timestampMillis": 0}]}"#)
                == "at depthFrames[0].depths[1]: expected a number (metres) or null (not measured)")
        #expect(
            faceFileProblem(#"{"depthFrames": [{"depths": 7, "timestampMillis": 0}]}"#)
                == "at depthFrames[0].depths: expected an array of 100 numbers (a 10 × 10 grid, row-major)")
        #expect(faceFileProblem(#"{"depthFrames": [7]}"#) == "at depthFrames[0]: expected a depth frame object")
        #expect(faceFileProblem(#"{"depthFrames": {}}"#) == "at depthFrames: expected an array of depth frame objects")
        #expect(faceFileProblem(#"{"capture": []}"#) == "at capture: expected a capture metadata object")
        #expect(faceFileProblem(#"{"capture": {"yaw": "left"}}"#) == "at capture.yaw: expected a number")
        #expect(
            faceFileProblem(#"{"capture": {"imageWidth": 12.5}}"#) == "at capture.imageWidth: expected an integer number of pixels (0...4294967295)")
        #expect(
            faceFileProblem(#"{"capture": {"imageHeight": -1}}"#) == "at capture.imageHeight: expected an integer number of pixels (0...4294967295)")
        #expect(faceFileProblem(#"{"capture": {"faceBox": {"x": 1, "y": 2, "width": 3}}}"#) == #"at capture.faceBox: missing "height""#)
        #expect(faceFileProblem(#"{"capture": {"faceBox": 5}}"#) == #"at capture.faceBox: expected a face box object {"x", "y", "width", "height"}"#)
        #expect(faceFileProblem(#"{"capture": {"sharpness": 1e39}}"#) == "at capture.sharpness: the number is outside the 32-bit float range")
        #expect(
            faceFileProblem(#"{"templates": [\#(Self.template)], "version": 24, "data": [1]}"#)
                == #"a face object lists its templates in "templates"; "data" and "landmarks" belong in each template"#)
        #expect(faceFileProblem(#"{"templates": 5}"#) == "at templates: expected an array of template objects")
        #expect(faceFileProblem(#"{"templates": [{"version": 24}]}"#) == #"at templates[0]: missing "data" (a vector template) or "landmarks""#)
        #expect(faceFileProblem(#"{"templates": []}"#) == "holds no template, capture or depth frame (an empty face)")
        #expect(faceFileProblem("[]") == "holds no template (an empty array)")
    }

    @Test func messagesNeverQuoteDepthValues() throws {
        let json = #"{"depthFrames": [{"depths": [0.43219, 0.41234, 9e39], "timestampMillis": 0}]}"#
        let message = try #require(faceFileProblem(json))
        #expect(!message.contains("0.43219"))
        #expect(!message.contains("0.41234"))
        #expect(!message.contains("9e39"))
        let outOfRange = #"{"depthFrames": [{"depths": [\#((0..<99).map { _ in "0.45678" }.joined(separator: ", ")), 9e39], "timestampMillis": 0}]}"#
        let range = try #require(faceFileProblem(outOfRange))
        #expect(range == "at depthFrames[0].depths[99]: the number is outside the 32-bit float range")
        #expect(!range.contains("0.45678"))
    }

    @Test func filesAreMergedIntoOneFace() throws {
        let directory = TemporaryDirectory("registryctl-gates").path
        try writeFile(Self.template, to: directory + "/template.json")
        try writeFile(
            #"{"capture": {"detectorConfidence": 0.9}, "depthFrames": [{"depths": \#(depthsJSON()), "timestampMillis": 0}]}"#,
            to: directory + "/capture.json")
        try writeFile(#"{"depthFrames": [{"depths": \#(depthsJSON(value: 0.5)), "timestampMillis": 600}]}"#, to: directory + "/more-frames.json")
        let face = try TemplateJSON.face(files: [directory + "/template.json", directory + "/capture.json", directory + "/more-frames.json"])
        #expect(face.templates == [FaceTemplate(algorithm: 24, vector: [0.6, 0.8])])
        #expect(face.capture == CaptureMetadata(detectorConfidence: 0.9))
        #expect(face.depthFrames.map(\.timestampMillis) == [0, 600])  // in file order
        #expect(face.depthFrames[1].depths[0] == Float(0.5))

        // A second capture is refused, naming both files.
        try writeFile(#"{"capture": {"yaw": 1}}"#, to: directory + "/another-capture.json")
        do {
            _ = try TemplateJSON.face(files: [directory + "/template.json", directory + "/capture.json", directory + "/another-capture.json"])
            Issue.record("two captures formed a face")
        } catch {
            #expect(error.file == directory + "/another-capture.json")
            #expect(error.message == #"a second "capture" (the first is in \#(directory)/capture.json): a face carries the metadata of one capture"#)
            #expect(ExitStatus(for: error) == .badInput)
        }

        // Depth frames alone are not a face.
        do {
            _ = try TemplateJSON.face(files: [directory + "/capture.json", directory + "/more-frames.json"])
            Issue.record("a face without templates")
        } catch {
            #expect(error.file == directory + "/more-frames.json")
            #expect(error.message == "holds no template, and neither do the other files: a face needs at least one")
        }

        // A wrong sample count in any file stops the command with exit 65, naming the file and frame.
        try writeFile(
            #"{"depthFrames": [{"depths": \#(depthsJSON()), "timestampMillis": 0}, {"depths": [1, 2, 3], "timestampMillis": 600}]}"#,
            to: directory + "/bad.json")
        do {
            _ = try TemplateJSON.face(files: [directory + "/template.json", directory + "/bad.json"])
            Issue.record("a 3-sample frame was accepted")
        } catch {
            #expect(error.description == directory + "/bad.json: at depthFrames[1].depths: 3 depth samples, expected 100 (a 10 × 10 grid, row-major)")
            #expect(ExitStatus(for: error) == .badInput)
        }
    }

    @Test func enrolmentFilesMapPosesToFrames() throws {
        let frame = #"{"depths": \#(depthsJSON(nulls: [5])), "timestampMillis": 0}"#
        let frames = try TemplateJSON.enrolmentFrames(
            from: utf8(#"{"center": [\#(frame), \#(frame)], "closer": [\#(frame)], "further": []}"#), file: "poses.json")
        #expect(frames[.center]?.count == 2)
        #expect(frames[.closer]?.count == 1)
        #expect(frames[.further]?.isEmpty == true)
        #expect(frames[.left] == nil)
        #expect(frames[.center]?[0].depths[5].isNaN == true)
        #expect(
            enrolmentProblem(#"{"sideways": [\#(frame)]}"#)
                == "at sideways: unknown pose; the poses are center, left, right, up, down, closer, further")
        #expect(
            enrolmentProblem(#"{"left": [\#(frame), {"depths": [1], "timestampMillis": 0}]}"#)
                == "at left[1].depths: 1 depth sample, expected 100 (a 10 × 10 grid, row-major)")
        #expect(enrolmentProblem(#"{"up": 4}"#) == "at up: expected an array of depth frame objects")
        #expect(enrolmentProblem(#"[]"#) == #"expected an object of poses: {"center": [frames], "left": [...], ...}"#)
        #expect(enrolmentProblem("{}") == "holds no pose (expected center, left, right, up, down, closer, further)")
        #expect(enrolmentProblem("") == "is empty")
    }
}

// MARK: gallery define: quality gates and liveness policy

@Suite("Gallery gates")
struct GalleryGateTests {
    @Test func registrySpecsTakeQualityGates() throws {
        let full = try RegistrySpec(parsing: "arcface:0.6,0.6,0.6@0.6/0.7")
        #expect(
            full
                == RegistrySpec(
                    algorithm: .name("arcface"), thresholds: Thresholds(authentication: 0.6, identification: 0.6, autoEnrolment: 0.6),
                    minimumQuality: 0.6, minimumAutoEnrolmentQuality: 0.7))
        #expect(full.description == "arcface:0.6,0.6,0.6@0.6/0.7")
        let short = try RegistrySpec(parsing: "arcface@0.5")
        #expect(short == RegistrySpec(algorithm: .name("arcface"), minimumQuality: 0.5))
        #expect(short.description == "arcface@0.5")
        let autoOnly = try RegistrySpec(parsing: "24@/0.7")
        #expect(autoOnly == RegistrySpec(algorithm: .version(24), minimumAutoEnrolmentQuality: 0.7))
        #expect(autoOnly.description == "24@/0.7")
        #expect(try RegistrySpec(parsing: "dlib@0/1") == RegistrySpec(algorithm: .name("dlib"), minimumQuality: 0, minimumAutoEnrolmentQuality: 1))
        #expect(try RegistrySpec(parsing: "arcface").minimumQuality == nil)
        // The gates reach the configuration sent to the daemon.
        #expect(
            try full.configuration(algorithms: Algorithm.builtIn)
                == RegistryConfiguration(
                    algorithm: 24, thresholds: Thresholds(authentication: 0.6, identification: 0.6, autoEnrolment: 0.6), minimumQuality: 0.6,
                    minimumAutoEnrolmentQuality: 0.7))
        #expect(try autoOnly.configuration(algorithms: []) == RegistryConfiguration(algorithm: 24, minimumAutoEnrolmentQuality: 0.7))
    }

    @Test(arguments: [
        "arcface@", "arcface@/", "arcface@1.5", "arcface@-0.1", "arcface@x", "arcface@0.5/", "arcface@0.5/2",
        "arcface@0.5/0.6/0.7", "arcface@0.5@0.6", "@0.5", "arcface:0.6,0.6@0.5", "arcface:0.6,0.6,0.6@nan",
    ])
    func badQualityGatesAreRefused(_ text: String) {
        #expect(throws: ValidationError.self) { try RegistrySpec(parsing: text) }
    }

    @Test func livenessPolicies() throws {
        #expect(try LivenessPolicySpec.parse("authenticate") == LivenessPolicy(authenticate: true))
        #expect(try LivenessPolicySpec.parse("authenticate,identify,register") == LivenessPolicy(authenticate: true, identify: true, register: true))
        #expect(try LivenessPolicySpec.parse("register, identify") == LivenessPolicy(identify: true, register: true))
        #expect(try LivenessPolicySpec.parse("Identify") == LivenessPolicy(identify: true))
        #expect(try LivenessPolicySpec.parse("none") == .none)
        for bad in ["", "login", "none,register", "authenticate,", "auth"] {
            #expect(throws: ValidationError.self, "\(bad)") { try LivenessPolicySpec.parse(bad) }
        }
    }

    @Test func galleryDefineTakesTheGates() throws {
        let command = try parseCommand(
            [
                "gallery", "define", "door", "--registry", "arcface@0.6", "dlib:0.7,0.7,0.7@0.5/0.6", "--liveness", "authenticate,register",
                "--liveness-k", "2.5",
            ],
            as: GalleryDefineCommand.self)
        #expect(
            command.registries == [
                RegistrySpec(algorithm: .name("arcface"), minimumQuality: 0.6),
                RegistrySpec(
                    algorithm: .name("dlib"), thresholds: Thresholds(authentication: 0.7, identification: 0.7, autoEnrolment: 0.7),
                    minimumQuality: 0.5, minimumAutoEnrolmentQuality: 0.6),
            ])
        #expect(command.liveness == LivenessPolicy(authenticate: true, register: true))
        #expect(command.livenessK == 2.5)
        let plain = try parseCommand(["gallery", "define", "staff", "--registry", "arcface"], as: GalleryDefineCommand.self)
        #expect(plain.liveness == nil)  // sent as none
        #expect(plain.livenessK == 2.0)
        #expect(
            try parseCommand(["gallery", "define", "d", "--registry", "24", "--liveness", "none"], as: GalleryDefineCommand.self).liveness
                == LivenessPolicy.none)
        #expect(refusalCode(["gallery", "define", "door", "--registry", "arcface", "--liveness", "login"]) == 64)
        #expect(refusalCode(["gallery", "define", "door", "--registry", "arcface", "--liveness-k", "0"]) == 64)
        #expect(refusalCode(["gallery", "define", "door", "--registry", "arcface", "--liveness-k", "-1"]) == 64)
        #expect(refusalCode(["gallery", "define", "door", "--registry", "arcface", "--liveness-k", "many"]) == 64)
        #expect(refusalCode(["gallery", "define", "door", "--registry", "arcface@1.2"]) == 64)
    }

    @Test func galleriesShowTheGates() throws {
        let gallery = GalleryInfo(
            name: "door",
            registries: [
                RegistryInfo(
                    algorithm: .arcface, thresholds: Thresholds(defaultsFor: .arcface), templateCount: 1, identifierCount: 1,
                    minimumQuality: 0.6, minimumAutoEnrolmentQuality: 0.7),
                RegistryInfo(algorithm: .dlib, thresholds: Thresholds(defaultsFor: .dlib), templateCount: 0, identifierCount: 0),
            ],
            identifierCount: 1, liveness: LivenessPolicy(authenticate: true, identify: true), livenessK: 2.5)
        let lines = gallery.lines
        #expect(lines[0] == "gallery door: 1 identifier; liveness required for authenticate, identify; liveness profile k 2.5")
        #expect(lines[1].hasPrefix("  #  ALGORITHM     AUTH  IDENT  AUTO  MIN QUALITY  MIN AUTO QUALITY  TEMPLATES  IDENTIFIERS"))
        #expect(lines[2].contains("0.6          0.7               1"))
        #expect(lines[3].contains("-            -                 0"))
        var none = gallery
        none.liveness = .none
        #expect(none.lines[0].contains("; liveness not required; "))

        let json = JSONOutput.document(gallery)
        #expect(json.contains(#""liveness" : {"#))
        #expect(json.contains(#""authenticate" : true"#))
        #expect(json.contains(#""register" : false"#))
        #expect(json.contains(#""livenessK" : 2.5"#))
        #expect(json.contains(#""minimumQuality" : 0.6"#))
        #expect(json.contains(#""minimumAutoEnrolmentQuality" : 0.7"#))
        let decoded = try JSONDecoder().decode(GalleryDocument.self, from: Data(json.utf8))
        #expect(decoded.registries.map(\.minimumQuality) == [0.6, nil])
    }
}

// MARK: profile commands

@Suite("Profile commands")
struct ProfileCommandTests {
    @Test func profileSubcommandsParse() throws {
        let show = try parseCommand(["profile", "show", "alice", "--gallery", "door", "--json"], as: ProfileShowCommand.self)
        #expect(show.identifier == "alice")
        #expect(show.gallery.name == "door")
        #expect(show.options.json)
        #expect(try parseCommand(["profile", "show", "bob"], as: ProfileShowCommand.self).gallery.name == "default")
        let reset = try parseCommand(["profile", "reset", "alice", "-g", "door"], as: ProfileResetCommand.self)
        #expect(reset.identifier == "alice")
        #expect(reset.gallery.name == "door")
        let enrol = try parseCommand(["profile", "enrol", "alice", "poses.json", "--k", "2.5", "--gallery", "door"], as: ProfileEnrolCommand.self)
        #expect(enrol.identifier == "alice")
        #expect(enrol.file == "poses.json")
        #expect(enrol.k == 2.5)
        #expect(enrol.gallery.name == "door")
        #expect(try parseCommand(["profile", "enrol", "alice", "poses.json"], as: ProfileEnrolCommand.self).k == nil)
        #expect(refusalCode(["profile", "show"]) == 64)
        #expect(refusalCode(["profile", "reset"]) == 64)
        #expect(refusalCode(["profile", "enrol", "alice"]) == 64)
        #expect(refusalCode(["profile", "enrol", "alice", "poses.json", "--k", "0"]) == 64)
        #expect(refusalCode(["profile", "enrol", "alice", "poses.json", "--k", "inf"]) == 64)
        #expect(refusalCode(["profile", "delete", "alice"]) == 64)
    }

    @Test func aMissingProfileExitsTwo() {
        let failure = CommandFailure.profileNotFound("alice", gallery: "door")
        #expect(ExitStatus(for: failure) == .notRegistered)
        #expect(ErrorReport(failure).text(.builtIn) == ["registryctl: PROFILE_NOT_FOUND: 'alice' has no liveness profile in gallery 'door'"])
    }

    @Test func profileOutput() throws {
        let profile = LivenessProfile(
            mean: 0.25...0.5, stdDev: 0.05...0.056, range: 0.169...0.171, edgeStdDev: 0.026...0.039, centerStdDev: 0.0108...0.0181,
            gradientMean: 0.021...0.023, gradientStdDev: 0.0188...0.0211, realisticDepth: 0.2...0.62, k: 2, frameCount: 35)
        let result = ProfileShowCommand.result(gallery: "door", identifier: "alice", profile: profile)
        let lines = result.text(.builtIn).split(separator: "\n").map(String.init)
        #expect(lines[0] == "liveness profile of 'alice' in gallery door: k 2.0, 35 enrolment frames")
        #expect(lines[1] == "  STATISTIC       LOWER (m)  UPPER (m)")
        #expect(lines[2] == "  realisticDepth  0.20000    0.62000")
        #expect(lines[3] == "  mean            0.25000    0.50000")
        #expect(lines.count == 10)
        let json = JSONOutput.document(result)
        #expect(json.contains(#""frames" : 35"#))
        #expect(json.contains(#""k" : 2"#))
        #expect(json.contains(#""realisticDepth" : {"#))
        #expect(json.contains(#""centerStdDev" : {"#))
        #expect(
            ProfileEnrolCommand.result(gallery: "door", identifier: "alice", profile: profile).text(.builtIn)
                .hasPrefix("enrolled the liveness profile of 'alice' in gallery door: k 2.0, 35 enrolment frames\n"))
        #expect(
            ProfileResetCommand.Result(gallery: "door", identifier: "alice", deleted: true).text(.builtIn)
                == "deleted the liveness profile of 'alice' in gallery door")
    }
}

// MARK: The walkthrough's example files

@Suite("Example files")
struct ExampleFileTests {
    @Test func captureExamplesScoreAsTheWalkthroughSays() throws {
        let alice = try TemplateJSON.templates(in: example("alice.json"))
        let good = try TemplateJSON.faceFile(in: example("alice-capture.json"))
        #expect(good.templates == alice)
        #expect(good.depthFrames.isEmpty)
        let goodCapture = try #require(good.capture)
        let excellent = try #require(CaptureQuality.assess(goodCapture))
        #expect(excellent.rating == .excellent)
        #expect(excellent.score >= 0.8)
        #expect(excellent.components.count == 6)

        let bad = try TemplateJSON.faceFile(in: example("alice-poor-capture.json"))
        #expect(bad.templates == alice)
        let badCapture = try #require(bad.capture)
        let poor = try #require(CaptureQuality.assess(badCapture))
        #expect(poor.rating == .poor)
        #expect(poor.score < 0.4)
        #expect(poor.weakest == .size)
        // The walkthrough's registry (arcface@0.6) stores the first and refuses the second.
        #expect(excellent.score >= 0.6 && poor.score < 0.6)
    }

    @Test func depthExamplesAreLiveAndNotLive() throws {
        let aliceAgain = try TemplateJSON.templates(in: example("alice-again.json"))
        let live = try TemplateJSON.faceFile(in: example("alice-live.json"))
        #expect(live.templates == aliceAgain)
        #expect(live.capture == nil)
        #expect(live.depthFrames.count == 4)
        #expect(zip(live.depthFrames, live.depthFrames.dropFirst()).allSatisfy { $1.timestampMillis - $0.timestampMillis == 600 })
        let liveVerdict = DepthLiveness.evaluate(live.depthFrames)
        #expect(liveVerdict.live, "\(liveVerdict.reason ?? "")")
        #expect(liveVerdict.failed.isEmpty)
        #expect(liveVerdict.thresholds == .fixed)
        #expect(liveVerdict.validSamples == 100)
        #expect(liveVerdict.takenFrames == 4)

        let photo = try TemplateJSON.faceFile(in: example("alice-photo.json"))
        #expect(photo.templates == aliceAgain)
        #expect(photo.depthFrames.count == 4)
        let photoVerdict = DepthLiveness.evaluate(photo.depthFrames)
        #expect(!photoVerdict.live)
        #expect(photoVerdict.failed.contains(.centerVariation))
        #expect(photoVerdict.failed.contains(.edgeVariation))
        #expect(photoVerdict.failed.contains(.depthDistribution))  // a plane
    }

    @Test func posesEnrolAndPersonaliseTheVerdicts() throws {
        let poses = try TemplateJSON.enrolmentFrames(in: example("alice-poses.json"))
        #expect(Set(poses.keys) == Set(EnrolmentPose.allCases))
        #expect(poses.values.allSatisfy { $0.count == 5 })
        let profile = try LivenessProfile.enrol(poses)
        #expect(profile.frameCount == 35)
        #expect(profile.k == 2)

        // As the daemon authenticates alice with her profile: the live face passes her personalised
        // thresholds, the photo fails them and the fixed fallback too.
        let live = DepthLiveness.evaluate(try TemplateJSON.faceFile(in: example("alice-live.json")).depthFrames, profile: profile)
        #expect(live.live, "\(live.reason ?? "")")
        #expect(live.thresholds == .personalised)
        let photo = DepthLiveness.evaluate(try TemplateJSON.faceFile(in: example("alice-photo.json")).depthFrames, profile: profile)
        #expect(!photo.live)
        #expect(photo.thresholds == .fixedFallback)
        #expect(photo.failed.contains(.centerVariation))
    }

    @Test func examplesFormFacesForTheCommands() throws {
        let face = try TemplateJSON.face(files: [example("alice-live.json")])
        #expect(face.templates.count == 1)
        #expect(face.depthFrames.count == 4)
        let captured = try TemplateJSON.face(files: [example("alice-capture.json")])
        #expect(captured.capture != nil)
        // Plain template files still work and add no capture.
        #expect(try TemplateJSON.face(files: [example("bob.json")]).capture == nil)
    }
}

// MARK: Reports: results and errors

@Suite("Gate reports")
struct GateReportTests {
    static let assessment = QualityAssessment(
        score: 0.2709, rating: .poor,
        components: [.confidence: 0.55, .size: 0, .angle: 0.1556, .resolution: 0.4531, .sharpness: 0.0536, .lighting: 0.1],
        weakest: .size)

    /// A not-live verdict: two failed checks, one of them a temporal check that measured nothing.
    static let verdict = LivenessVerdict(
        live: false, validSamples: 100, statistics: nil, takenFrames: 1, thresholds: .fixedFallback,
        checks: [
            LivenessCheckResult(
                check: .realisticDepth, value: 0.45, values: [:], condition: "mean 0.45 m in 0.2...3.0 m", threshold: "0.2...3.0 m",
                passed: true),
            LivenessCheckResult(
                check: .centerVariation, value: 0.0013, values: [:], condition: "centerStdDev 0.0013 m < 0.005 m", threshold: "≥ 0.005 m",
                passed: false),
            LivenessCheckResult(
                check: .temporalConsistency, value: .infinity, values: [:], condition: "1 frame ≥ 500 ms apart, 2 required",
                threshold: "largestMeanChange ≤ 0.1 m over ≥ 2 frames ≥ 500 ms apart", passed: false),
        ],
        failed: [.centerVariation, .temporalConsistency],
        reason: "mandatory check failed: centerVariation; only 0 of 5 optional checks passed")

    @Test func qualityTooLowWithAnAssessment() throws {
        let error = RegistryError(
            .qualityTooLow, "capture quality 0.2709 (poor) is below the arcface registry's minimum 0.6; weakest component: size",
            details: .qualityTooLow(algorithm: 24, minimum: 0.6, assessment: Self.assessment, missing: []))
        #expect(ExitStatus(for: error) == .refused)
        let report = ErrorReport(error)
        #expect(report.needsAlgorithmNames)
        #expect(
            report.text(.builtIn) == [
                "registryctl: QUALITY_TOO_LOW: capture quality 0.2709 (poor) is below the arcface registry's minimum 0.6; weakest component: size",
                "  minimum: 0.6 (the arcface (24) registry)",
                "  assessment: 0.2709 (poor), weakest component: size",
                "    COMPONENT   VALUE   WEIGHT",
                "    confidence  0.5500  0.30",
                "    size        0.0000  0.25",
                "    angle       0.1556  0.20",
                "    resolution  0.4531  0.15",
                "    sharpness   0.0536  0.05",
                "    lighting    0.1000  0.05",
            ])
        let document = try JSONDecoder().decode(ErrorDocument.self, from: Data(JSONOutput.document(report).utf8))
        #expect(document.error.code == "QUALITY_TOO_LOW")
        #expect(document.error.exitStatus == 3)
        let quality = try #require(document.error.quality)
        #expect(quality.algorithm == 24)
        #expect(quality.minimum == 0.6)
        #expect(quality.missing == [])
        #expect(quality.assessment?.score == 0.2709)
        #expect(quality.assessment?.rating == "poor")
        #expect(quality.assessment?.weakest == "size")
        #expect(quality.assessment?.components["confidence"] == 0.55)
        #expect(quality.assessment?.components.count == 6)
        #expect(document.error.liveness == nil)
    }

    @Test func qualityTooLowWithoutMetadata() throws {
        let missing = ErrorReport(
            RegistryError(
                .qualityTooLow,
                "the arcface registry requires capture quality 0.6 and the face carries incomplete capture metadata (missing yaw, pitch)",
                details: .qualityTooLow(algorithm: 24, minimum: 0.6, assessment: nil, missing: ["yaw", "pitch"])))
        #expect(
            Array(missing.text(.builtIn).dropFirst()) == [
                "  minimum: 0.6 (the arcface (24) registry)",
                "  missing capture inputs: yaw, pitch",
            ])
        let document = try JSONDecoder().decode(ErrorDocument.self, from: Data(JSONOutput.document(missing).utf8))
        #expect(document.error.quality?.missing == ["yaw", "pitch"])
        #expect(document.error.quality?.assessment == nil)

        let none = ErrorReport(
            RegistryError(
                .qualityTooLow, "the arcface registry requires capture quality 0.6 and the face carries no capture metadata",
                details: .qualityTooLow(algorithm: 24, minimum: 0.6, assessment: nil, missing: [])))
        #expect(none.text(.builtIn).last == "  the face carries no capture metadata")
    }

    @Test func livenessFailed() throws {
        let error = RegistryError(
            .livenessFailed,
            "the face did not pass the liveness check: mandatory check failed: centerVariation; only 0 of 5 optional checks passed (failed: centerVariation, temporalConsistency)",
            details: .livenessFailed(Self.verdict))
        #expect(ExitStatus(for: error) == .refused)
        let report = ErrorReport(error)
        #expect(
            Array(report.text(.builtIn).dropFirst()) == [
                "  thresholds: fixed fallback (the personalised thresholds were not met); valid samples: 100",
                "  failed centerVariation (mandatory): centerStdDev 0.0013 m < 0.005 m",
                "  failed temporalConsistency (optional): 1 frame ≥ 500 ms apart, 2 required",
                "  reason: mandatory check failed: centerVariation; only 0 of 5 optional checks passed",
            ])
        let json = JSONOutput.document(report)
        #expect(!json.contains("INTERNAL"))  // the infinite value did not break the encoding
        let document = try JSONDecoder().decode(ErrorDocument.self, from: Data(json.utf8))
        #expect(document.error.code == "LIVENESS_FAILED")
        #expect(document.error.exitStatus == 3)
        let liveness = try #require(document.error.liveness)
        #expect(liveness.live == false)
        #expect(liveness.thresholds == "fixed_fallback")
        #expect(liveness.validSamples == 100)
        #expect(liveness.failed == ["centerVariation", "temporalConsistency"])
        #expect(liveness.reason == "mandatory check failed: centerVariation; only 0 of 5 optional checks passed")
        #expect(liveness.checks.map(\.check) == ["realisticDepth", "centerVariation", "temporalConsistency"])
        #expect(liveness.checks[1].check == Self.verdict.checks[1].check.rawValue && liveness.checks[1].value == Self.verdict.checks[1].value)
        #expect(liveness.checks[1].passed == Self.verdict.checks[1].passed)
        #expect(liveness.checks[1].condition == "centerStdDev 0.0013 m < 0.005 m")
        #expect(liveness.checks[1].threshold == "≥ 0.005 m")
        #expect(liveness.checks[1].mandatory)
        #expect(liveness.checks[2].value == nil)
        #expect(document.error.quality == nil)
    }

    @Test func livenessFailedForTooFewSamples() {
        let verdict = LivenessVerdict(
            live: false, validSamples: 12, statistics: nil, takenFrames: 4, thresholds: .fixed, checks: [], failed: [],
            reason: "insufficient samples: 12 of 100 valid, 30 required")
        let lines = ErrorReport(RegistryError(.livenessFailed, "the face did not pass the liveness check", details: .livenessFailed(verdict)))
            .text(.builtIn)
        #expect(
            Array(lines.dropFirst()) == [
                "  thresholds: fixed; valid samples: 12", "  reason: insufficient samples: 12 of 100 valid, 30 required",
            ])
    }

    @Test func registerPrintsQualityAndLiveness() throws {
        let stored = StoredTemplate(id: 7, identifier: "alice", algorithm: 24, registeredAt: 0, source: .registered, quality: 0.98, template: nil)
        let liveFrames = try TemplateJSON.faceFile(in: example("alice-live.json")).depthFrames
        let verdict = DepthLiveness.evaluate(liveFrames)
        let assessment = QualityAssessment(score: 0.9811, rating: .excellent, components: [.confidence: 0.98, .angle: 0.9333], weakest: .angle)
        let result = RegisterCommand.Result(
            gallery: "door", identifier: "alice",
            registration: Registration(stored: [stored], findings: [], quality: assessment, liveness: verdict))
        let lines = result.text(.builtIn).split(separator: "\n").map(String.init)
        #expect(lines[0] == "registered 'alice' in gallery door: 1 template")
        #expect(lines[2] == "capture quality: 0.9811 (excellent), weakest component: angle")
        #expect(lines[3] == "liveness:")
        #expect(lines[4] == "  live           yes")
        #expect(lines[5] == "  thresholds     fixed")
        #expect(lines[6] == "  valid samples  100 of 100")
        #expect(lines[7].hasPrefix("  CHECK                KIND       RESULT  CONDITION"))
        #expect(lines[8].hasPrefix("  realisticDepth       mandatory  passed  mean "))
        #expect(lines.count == 8 + 9)
        let json = JSONOutput.document(result)
        #expect(json.contains(#""rating" : "excellent""#))
        #expect(json.contains(#""weakest" : "angle""#))
        #expect(json.contains(#""live" : true"#))
        #expect(json.contains(#""thresholds" : "fixed""#))

        // Without metadata or frames, nothing is added.
        let plain = RegisterCommand.Result(gallery: "door", identifier: "alice", registration: Registration(stored: [stored], findings: []))
        #expect(plain.text(.builtIn).split(separator: "\n").count == 2)
        #expect(!JSONOutput.document(plain).contains("liveness"))
    }

    @Test func authenticateAndIdentifyPrintTheVerdict() throws {
        let authenticated = AuthenticateCommand.Result(
            gallery: "door", identifier: "alice",
            authentication: Authentication(authenticated: true, score: 0.94, templateId: 3, algorithm: 24, autoEnrolment: [], liveness: Self.verdict))
        let lines = authenticated.text(.builtIn).split(separator: "\n").map(String.init)
        #expect(lines[5] == "liveness:")
        #expect(lines[6] == "  live           no")
        #expect(lines[7] == "  thresholds     fixed fallback (the personalised thresholds were not met)")
        #expect(lines[8] == "  valid samples  100 of 100")
        #expect(lines[9] == "  reason         mandatory check failed: centerVariation; only 0 of 5 optional checks passed")
        #expect(lines[10] == "  CHECK                KIND       RESULT  CONDITION                           THRESHOLD")
        #expect(lines[11] == "  realisticDepth       mandatory  passed  mean 0.45 m in 0.2...3.0 m          0.2...3.0 m")
        #expect(lines[12] == "  centerVariation      mandatory  FAILED  centerStdDev 0.0013 m < 0.005 m     ≥ 0.005 m")
        #expect(lines[13].hasPrefix("  temporalConsistency  optional   FAILED  1 frame ≥ 500 ms apart, 2 required  largestMeanChange"))
        let json = JSONOutput.document(authenticated)
        #expect(json.contains(#""thresholds" : "fixed_fallback""#))
        #expect(!json.contains("INTERNAL"))

        let identified = IdentifyCommand.Result(
            gallery: "door",
            identification: Identification(algorithm: 24, matches: [], autoEnrolment: [], liveness: Self.verdict))
        let identifyLines = identified.text(.builtIn).split(separator: "\n").map(String.init)
        #expect(identifyLines[0] == "no match in gallery door")
        #expect(identifyLines[1] == "liveness:")
        #expect(JSONOutput.document(identified).contains(#""live" : false"#))
    }

    @Test func showPrintsBothQualities() {
        let result = ShowCommand.Result(
            gallery: "default", identifier: "alice",
            templates: [
                StoredTemplate(id: 1, identifier: "alice", algorithm: 24, registeredAt: 0, source: .registered, quality: 0.9811, template: nil),
                StoredTemplate(
                    id: 2, identifier: "alice", algorithm: 1000, registeredAt: 0, source: .registered, quality: nil, template: nil,
                    landmarkQuality: 0.75),
            ])
        let lines = result.text(.builtIn).split(separator: "\n").map(String.init)
        #expect(lines[1].hasSuffix("SOURCE      CAPTURE QUALITY  LANDMARK QUALITY"))
        #expect(lines[2].hasSuffix("registered  0.981            -"))
        #expect(lines[3].hasSuffix("registered  -                0.750"))
        let json = JSONOutput.document(result)
        #expect(json.contains(#""landmarkQuality" : 0.75"#))
    }
}

@Suite struct StrictLivenessSpecTests {
    @Test func strictIsAcceptedWithOperations() throws {
        let policy = try LivenessPolicySpec.parse("authenticate,strict")
        #expect(policy == LivenessPolicy(authenticate: true, strict: true))
        #expect(throws: (any Error).self) { _ = try LivenessPolicySpec.parse("strictly") }
    }
}

@Suite struct AuditCommandTests {
    @Test func timesAreUnixSecondsOrAges() {
        #expect(AuditCommand.micros("1700000000", now: 0) == 1_700_000_000_000_000)
        let now: Int64 = 1_000_000_000_000
        let halfHourAgo: Int64 = now - 1_800_000_000
        let twoDaysAgo: Int64 = now - 172_800_000_000
        #expect(AuditCommand.micros("30m", now: now) == halfHourAgo)
        #expect(AuditCommand.micros("2d", now: now) == twoDaysAgo)
        #expect(AuditCommand.micros("yesterday", now: 0) == nil)
        #expect(AuditCommand.micros("-5", now: 0) == nil)
    }

    @Test func globalOptionsMayComeBeforeTheCommand() throws {
        #expect(
            RegistryCtl.placingGlobalOptions(["--socket", "/s", "--json", "register", "alice", "f.json"])
                == ["register", "alice", "f.json", "--socket", "/s", "--json"])
        #expect(
            RegistryCtl.placingGlobalOptions(["--socket=/s", "gallery", "define", "g", "--", "-x"]) == [
                "gallery", "define", "g", "--socket=/s", "--", "-x",
            ])
        #expect(RegistryCtl.placingGlobalOptions(["--help"]) == ["--help"])
        #expect(RegistryCtl.placingGlobalOptions(["--socket", "/s"]) == ["--socket", "/s"])
        let command = try #require(
            try RegistryCtl.parseAsRoot(RegistryCtl.placingGlobalOptions(["--socket", "/s", "audit", "--limit", "5"])) as? AuditCommand)
        #expect(command.options.socketPath == "/s" && command.limit == 5)
    }

    /// What `audit` prints is what `--since` takes back (an operator copies a time from one to the other).
    @Test func printedTimesAreAcceptedBack() {
        var random = SeededRandom(seed: 31)
        for _ in 0..<500 {
            let micros = Int64.random(in: -2_000_000_000_000_000...8_000_000_000_000_000, using: &random)
            let printed = Timestamp.iso8601(micros: micros)
            #expect(AuditCommand.micros(printed, now: 0) == micros, "\(printed)")
        }
        #expect(Timestamp.micros(iso8601: "2024-02-29") == 1_709_164_800_000_000)
        #expect(Timestamp.micros(iso8601: "2023-11-14T22:13:20Z") == 1_700_000_000_000_000)
        #expect(Timestamp.micros(iso8601: "2023-11-14T23:13:20.5+01:00") == 1_700_000_000_500_000)
        for invalid in ["2023-02-29", "2024-13-01", "2024-05-01T24:00:00Z", "2024-05-01T12:00:00", "2024-05-01T12:00:00.Z", "2024-5-1"] {
            #expect(Timestamp.micros(iso8601: invalid) == nil, "\(invalid)")
        }
    }

    @Test func parsing() throws {
        let command = try #require(
            try RegistryCtl.parseAsRoot(["audit", "--identifier", "alice", "--outcome", "refused", "--since", "1h"]) as? AuditCommand)
        #expect(command.identifier == "alice" && command.outcome == "refused" && command.since == "1h" && command.limit == 100)
        #expect(throws: (any Error).self) { _ = try RegistryCtl.parseAsRoot(["audit", "--outcome", "maybe"]) }
        #expect(throws: (any Error).self) { _ = try RegistryCtl.parseAsRoot(["audit", "--since", "soon"]) }
    }
}
