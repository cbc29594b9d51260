import FoundationEssentials
import RegistryModel

// Face files and liveness enrolment files (README, capture gates): the JSON forms of capture metadata and depth
// frames.
//
// A face file is a template file (one template object or an array of them) or a face object:
//
// ```json
// {"templates": [{"version": 24, "data": [...]}],
//  "capture": {"detectorConfidence": 0.98, "faceBox": {"x": 360, "y": 160, "width": 560, "height": 640},
//              "imageWidth": 1280, "imageHeight": 960, "yaw": 3, "pitch": -2, "roll": 1,
//              "facePixelSize": 560, "sharpness": 420, "brightnessMean": 128, "brightnessStdDev": 42},
//  "depthFrames": [{"depths": [0.45, ..., null, ...], "timestampMillis": 0,
//                   "faceBox": {"x": 360, "y": 160, "width": 560, "height": 640}}]}
// ```
//
// Every capture key is optional. A depth frame holds exactly 100 depths (a 10 × 10 grid, row-major, in
// metres; `null` for a sample the camera did not measure, sent as NaN), an integer `timestampMillis`
// and an optional `faceBox`. A liveness enrolment file maps poses to depth frames:
// `{"center": [frames], "left": [...], "right": [...], "up": [...], "down": [...], "closer": [...],
// "further": [...]}`.
//
// Like templates, depth values are biometric: messages name paths and counts, never values.

/// What one face file holds.
public struct FaceFile: Sendable, Hashable {
    public var templates: [FaceTemplate]
    public var capture: CaptureMetadata?
    public var depthFrames: [DepthFrame]

    public init(templates: [FaceTemplate], capture: CaptureMetadata? = nil, depthFrames: [DepthFrame] = []) {
        self.templates = templates
        self.capture = capture
        self.depthFrames = depthFrames
    }

    var isEmpty: Bool { self.templates.isEmpty && self.capture == nil && self.depthFrames.isEmpty }
}

extension TemplateJSON {
    /// A face file's document: a template object, an array of them, or a face object.
    struct FaceDocument: Decodable {
        var face: FaceFile
        /// Whether the document is an array of templates.
        var isArray = false

        private enum Keys: String, CodingKey {
            case templates, capture, depthFrames, data, landmarks
        }

        init(from decoder: any Decoder) throws {
            if var array = try? decoder.unkeyedContainer() {
                var templates: [FaceTemplate] = []
                while !array.isAtEnd { templates.append(try array.decode(Record.self).template) }
                self.face = FaceFile(templates: templates)
                self.isArray = true
                return
            }
            guard let container = try? decoder.container(keyedBy: Keys.self),
                container.contains(.templates) || container.contains(.capture) || container.contains(.depthFrames)
            else {
                // A template object (its decoder says what is wrong with anything else).
                self.face = FaceFile(templates: [try Record(from: decoder).template])
                return
            }
            if container.contains(.data) || container.contains(.landmarks) {
                throw SchemaProblem(
                    container.codingPath,
                    #"a face object lists its templates in "templates"; "data" and "landmarks" belong in each template"#)
            }
            let templates = try container.decodeIfPresent([Record].self, forKey: .templates) ?? []
            let capture = try container.decodeIfPresent(CaptureRecord.self, forKey: .capture)?.capture
            let frames = try container.decodeIfPresent([DepthFrameRecord].self, forKey: .depthFrames) ?? []
            self.face = FaceFile(templates: templates.map(\.template), capture: capture, depthFrames: frames.map(\.frame))
        }
    }

    /// A `"capture"` object: every key optional, other keys ignored.
    struct CaptureRecord: Decodable {
        var capture: CaptureMetadata

        private enum Keys: String, CodingKey {
            case detectorConfidence, faceBox, imageWidth, imageHeight, yaw, pitch, roll, facePixelSize, sharpness
            case brightnessMean, brightnessStdDev
        }

        init(from decoder: any Decoder) throws {
            let container: KeyedDecodingContainer<Keys>
            do {
                container = try decoder.container(keyedBy: Keys.self)
            } catch DecodingError.typeMismatch(_, let context) {
                throw SchemaProblem(context.codingPath, "expected a capture metadata object")
            }
            func number(_ key: Keys) throws -> Float? {
                guard let value = try container.decodeIfPresent(Double.self, forKey: key) else { return nil }
                return try TemplateJSON.float(value, at: container.codingPath + [key])
            }
            func pixels(_ key: Keys) throws -> Int? {
                guard let value = try container.decodeIfPresent(Double.self, forKey: key) else { return nil }
                guard let pixels = UInt32(exactly: value) else {
                    throw SchemaProblem(container.codingPath + [key], "expected an integer number of pixels (0...4294967295)")
                }
                return Int(pixels)
            }
            self.capture = CaptureMetadata(
                detectorConfidence: try number(.detectorConfidence),
                faceBox: try container.decodeIfPresent(FaceBoxRecord.self, forKey: .faceBox)?.box,
                imageWidth: try pixels(.imageWidth), imageHeight: try pixels(.imageHeight),
                yaw: try number(.yaw), pitch: try number(.pitch), roll: try number(.roll),
                facePixelSize: try number(.facePixelSize), sharpness: try number(.sharpness),
                brightnessMean: try number(.brightnessMean), brightnessStdDev: try number(.brightnessStdDev))
        }
    }

    /// `{"x", "y", "width", "height"}`, all required, in image pixels.
    struct FaceBoxRecord: Decodable {
        var box: FaceBox

        private enum Keys: String, CodingKey { case x, y, width, height }

        init(from decoder: any Decoder) throws {
            let container: KeyedDecodingContainer<Keys>
            do {
                container = try decoder.container(keyedBy: Keys.self)
            } catch DecodingError.typeMismatch(_, let context) {
                throw SchemaProblem(context.codingPath, #"expected a face box object {"x", "y", "width", "height"}"#)
            }
            func number(_ key: Keys) throws -> Float {
                try TemplateJSON.float(try container.decode(Double.self, forKey: key), at: container.codingPath + [key])
            }
            self.box = FaceBox(x: try number(.x), y: try number(.y), width: try number(.width), height: try number(.height))
        }
    }

    /// One depth frame: 100 depths (null: not measured), an integer timestamp, an optional face box.
    struct DepthFrameRecord: Decodable {
        var frame: DepthFrame

        private enum Keys: String, CodingKey { case depths, timestampMillis, faceBox }

        init(from decoder: any Decoder) throws {
            let container: KeyedDecodingContainer<Keys>
            do {
                container = try decoder.container(keyedBy: Keys.self)
            } catch DecodingError.typeMismatch(_, let context) {
                throw SchemaProblem(context.codingPath, "expected a depth frame object")
            }
            let values = try container.decode([Double?].self, forKey: .depths)
            let required = DepthFrame.gridSize * DepthFrame.gridSize
            guard values.count == required else {
                throw SchemaProblem(
                    container.codingPath + [Keys.depths],
                    "\(values.count) depth sample\(values.count == 1 ? "" : "s"), expected \(required) "
                        + "(a \(DepthFrame.gridSize) × \(DepthFrame.gridSize) grid, row-major)")
            }
            var depths = [Float](repeating: .nan, count: required)
            for (index, value) in values.enumerated() {
                guard let value else { continue }  // null: no depth measured there
                depths[index] = try TemplateJSON.float(value, at: container.codingPath + [Keys.depths, IndexKey(index)])
            }
            let timestamp = try container.decode(Double.self, forKey: .timestampMillis)
            guard let millis = Int64(exactly: timestamp) else {
                throw SchemaProblem(container.codingPath + [Keys.timestampMillis], "expected an integer (milliseconds)")
            }
            self.frame = DepthFrame(
                depths: depths, timestampMillis: millis,
                faceBox: try container.decodeIfPresent(FaceBoxRecord.self, forKey: .faceBox)?.box)
        }
    }

    /// A liveness enrolment file: `{"center": [frames], "left": [...], ...}`.
    struct EnrolmentDocument: Decodable {
        var frames: [EnrolmentPose: [DepthFrame]]

        init(from decoder: any Decoder) throws {
            let container: KeyedDecodingContainer<NameKey>
            do {
                container = try decoder.container(keyedBy: NameKey.self)
            } catch DecodingError.typeMismatch(_, let context) {
                throw SchemaProblem(context.codingPath, #"expected an object of poses: {"center": [frames], "left": [...], ...}"#)
            }
            var frames: [EnrolmentPose: [DepthFrame]] = [:]
            for key in container.allKeys {
                guard let pose = EnrolmentPose(rawValue: key.stringValue) else {
                    throw SchemaProblem(
                        container.codingPath + [key],
                        "unknown pose; the poses are \(EnrolmentPose.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                frames[pose] = try container.decode([DepthFrameRecord].self, forKey: key).map(\.frame)
            }
            self.frames = frames
        }
    }

    /// An object key by name.
    struct NameKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    // MARK: Reading

    /// Reads one face file: its templates, capture metadata and depth frames.
    /// - Throws: ``InputFileError`` naming the file and what is wrong, never a template or depth value.
    public static func faceFile(in file: String) throws(InputFileError) -> FaceFile {
        try self.faceFile(from: try FileIO.read(file), file: file)
    }

    /// Parses a face file's contents (see ``faceFile(in:)``).
    public static func faceFile(from bytes: [UInt8], file: String) throws(InputFileError) -> FaceFile {
        let document = try self.decode(FaceDocument.self, from: bytes, file: file)
        guard !document.face.isEmpty else {
            let what = document.isArray ? "holds no template (an empty array)" : "holds no template, capture or depth frame (an empty face)"
            throw InputFileError(file: file, message: what)
        }
        return document.face
    }

    /// Reads a liveness enrolment file: depth frames per pose. Which poses are present and how many
    /// frames they have is for the daemon to judge (it says which pose falls short).
    /// - Throws: ``InputFileError``.
    public static func enrolmentFrames(in file: String) throws(InputFileError) -> [EnrolmentPose: [DepthFrame]] {
        try self.enrolmentFrames(from: try FileIO.read(file), file: file)
    }

    public static func enrolmentFrames(from bytes: [UInt8], file: String) throws(InputFileError) -> [EnrolmentPose: [DepthFrame]] {
        let frames = try self.decode(EnrolmentDocument.self, from: bytes, file: file).frames
        guard !frames.isEmpty else {
            throw InputFileError(
                file: file, message: "holds no pose (expected \(EnrolmentPose.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        return frames
    }

    /// Decodes a document, with the messages of ``describe(_:in:)``.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], file: String) throws(InputFileError) -> T {
        guard bytes.contains(where: { !Self.isWhitespace($0) }) else {
            throw InputFileError(file: file, message: "is empty")
        }
        // Checked first: Foundation's decoder traps on some documents nested 513 deep (a crash, not
        // an error); the checker refuses anything deeper than 512 with its position.
        guard JSONSyntaxChecker.firstProblem(in: bytes) == nil else {
            throw InputFileError(file: file, message: Self.syntaxProblem(in: bytes))
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw InputFileError(file: file, message: Self.describe(error, in: bytes))
        }
    }
}
