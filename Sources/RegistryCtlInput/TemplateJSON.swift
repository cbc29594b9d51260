import FoundationEssentials
import RegistryModel

/// The Ver-ID JSON template forms, read for `register`, `identify`, `authenticate` and `import`:
///
/// ```json
/// {"version": 24, "data": [0.1, ...]}
/// {"version": 1000, "landmarks": [{"name": "LEFT_EYE", "x": 1, "y": 2, "z": 3}, ...]}
/// ```
///
/// A landmark may say `"type"` instead of `"name"` (the CoMa matcher's `FaceLandmark{type,x,y,z}`), `z` is
/// optional (0), and a landmark template without `"version"` is the landmark algorithm's (1000). An
/// export record adds `"identifier"`. A file holds one object or an array of them; other keys are
/// ignored. For register, identify and authenticate a file may instead hold a face object with capture
/// metadata and depth frames (see FaceJSON.swift).
public enum TemplateJSON {
    /// The landmark algorithm's version, assumed for landmark templates without `"version"`.
    static let landmarkVersion: UInt32 = Algorithm.landmarks.version

    /// One template object, with the identifier of an export record when it has one.
    struct Record: Decodable {
        var identifier: String?
        var template: FaceTemplate

        private enum Keys: String, CodingKey {
            case identifier, version, data, landmarks
        }

        init(from decoder: any Decoder) throws {
            let container: KeyedDecodingContainer<Keys>
            do {
                container = try decoder.container(keyedBy: Keys.self)
            } catch DecodingError.typeMismatch(_, let context) {
                throw SchemaProblem(context.codingPath, "expected a template object")
            }
            self.identifier = try container.decodeIfPresent(String.self, forKey: .identifier)
            if container.contains(.landmarks) {
                let landmarks = try container.decode([LandmarkRecord].self, forKey: .landmarks)
                guard !landmarks.isEmpty else {
                    throw SchemaProblem(container.codingPath + [Keys.landmarks], "the landmark list is empty")
                }
                let version = try container.contains(.version) ? Self.version(container) : TemplateJSON.landmarkVersion
                self.template = FaceTemplate(algorithm: version, landmarks: landmarks.map(\.landmark))
            } else if container.contains(.data) {
                guard container.contains(.version) else {
                    throw SchemaProblem(container.codingPath, "missing \"version\" (the algorithm, e.g. 24)")
                }
                let version = try Self.version(container)
                // Doubles first, so that a value outside the float range is reported at its position.
                let values = try container.decode([Double].self, forKey: .data)
                var data = [Float](repeating: 0, count: values.count)
                for (index, value) in values.enumerated() {
                    data[index] = try TemplateJSON.float(value, at: container.codingPath + [Keys.data, IndexKey(index)])
                }
                self.template = FaceTemplate(algorithm: version, vector: data)
            } else {
                throw SchemaProblem(container.codingPath, "missing \"data\" (a vector template) or \"landmarks\"")
            }
        }

        private static func version(_ container: KeyedDecodingContainer<Keys>) throws -> UInt32 {
            // A double first: the decoder reports a non-integral or huge integer only as "not valid JSON".
            let value = try container.decode(Double.self, forKey: .version)
            guard let version = UInt32(exactly: value) else {
                throw SchemaProblem(container.codingPath + [Keys.version], "expected an algorithm version (an integer 0...4294967295)")
            }
            return version
        }
    }

    struct LandmarkRecord: Decodable {
        var landmark: Landmark

        private enum Keys: String, CodingKey {
            case name, type, x, y, z
        }

        init(from decoder: any Decoder) throws {
            let container: KeyedDecodingContainer<Keys>
            do {
                container = try decoder.container(keyedBy: Keys.self)
            } catch DecodingError.typeMismatch(_, let context) {
                throw SchemaProblem(context.codingPath, "expected a landmark object")
            }
            let name: String
            if let value = try container.decodeIfPresent(String.self, forKey: .name) {
                name = value
            } else if let value = try container.decodeIfPresent(String.self, forKey: .type) {
                name = value
            } else {
                throw SchemaProblem(container.codingPath, "missing \"name\" (or \"type\") of the landmark")
            }
            func coordinate(_ key: Keys) throws -> Float {
                try TemplateJSON.float(try container.decode(Double.self, forKey: key), at: container.codingPath + [key])
            }
            self.landmark = Landmark(
                name: name, x: try coordinate(.x), y: try coordinate(.y),
                z: container.contains(.z) ? try coordinate(.z) : 0)
        }
    }

    /// One object or an array of them.
    struct Document: Decodable {
        var records: [Record]

        init(from decoder: any Decoder) throws {
            if var array = try? decoder.unkeyedContainer() {
                var records: [Record] = []
                if let count = array.count { records.reserveCapacity(count) }
                while !array.isAtEnd { records.append(try array.decode(Record.self)) }
                self.records = records
            } else {
                self.records = [try Record(from: decoder)]
            }
        }
    }

    /// An array position in a coding path.
    struct IndexKey: CodingKey {
        var intValue: Int?
        var stringValue: String { "Index \(self.intValue ?? 0)" }
        init(_ index: Int) { self.intValue = index }
        init?(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { nil }
    }

    /// A JSON number as a template float.
    /// - Throws: ``SchemaProblem`` when it is outside the 32-bit float range.
    static func float(_ value: Double, at path: [any CodingKey]) throws -> Float {
        let float = Float(value)
        guard float.isFinite else { throw SchemaProblem(path, "the number is outside the 32-bit float range") }
        return float
    }

    /// A structural problem found while decoding, at a JSON path.
    struct SchemaProblem: Error {
        var path: String
        var message: String

        init(_ codingPath: [any CodingKey], _ message: String) {
            self.path = TemplateJSON.path(codingPath)
            self.message = message
        }
    }

    // MARK: Reading

    /// Reads the templates of one file (one object, an array, or a face object's `"templates"`).
    /// - Throws: ``InputFileError`` naming the file and what is wrong, never a template value.
    public static func templates(in file: String) throws(InputFileError) -> [FaceTemplate] {
        try self.templates(from: try FileIO.read(file), file: file)
    }

    /// Parses the templates of a file's contents.
    /// - Parameters:
    ///   - bytes: the file's contents.
    ///   - file: the file's name, for messages.
    /// - Throws: ``InputFileError``.
    public static func templates(from bytes: [UInt8], file: String) throws(InputFileError) -> [FaceTemplate] {
        let templates = try self.faceFile(from: bytes, file: file).templates
        guard !templates.isEmpty else { throw InputFileError(file: file, message: "holds no template") }
        return templates
    }

    /// Parses export records: templates that carry their `"identifier"`.
    /// - Throws: ``InputFileError`` for malformed JSON or a record without an identifier.
    public static func importItems(from bytes: [UInt8], file: String) throws(InputFileError) -> [ImportItem] {
        let records = try self.records(from: bytes, file: file)
        var items: [ImportItem] = []
        items.reserveCapacity(records.count)
        for (index, record) in records.enumerated() {
            guard let identifier = record.identifier else {
                throw InputFileError(file: file, message: "at [\(index)]: missing \"identifier\"")
            }
            items.append(ImportItem(identifier: identifier, template: record.template))
        }
        return items
    }

    /// Reads all files as one face: their templates (at most one per algorithm), the capture metadata
    /// (at most one file may give it) and the depth frames (in file order, then frame order).
    /// - Throws: ``InputFileError`` naming the file with the problem.
    public static func face(files: [String]) throws(InputFileError) -> Face {
        var templates: [FaceTemplate] = []
        var fileOf: [UInt32: String] = [:]
        var capture: (metadata: CaptureMetadata, file: String)?
        var frames: [DepthFrame] = []
        for file in files {
            let face = try self.faceFile(in: file)
            for template in face.templates {
                if let first = fileOf[template.algorithm] {
                    let also = first == file ? "" : " (the first is in \(first))"
                    throw InputFileError(
                        file: file,
                        message: "a second template of algorithm \(template.algorithm)\(also): a face carries at most one template per algorithm")
                }
                fileOf[template.algorithm] = file
                templates.append(template)
            }
            if let metadata = face.capture {
                if let first = capture {
                    throw InputFileError(
                        file: file,
                        message: "a second \"capture\" (the first is in \(first.file)): a face carries the metadata of one capture")
                }
                capture = (metadata, file)
            }
            frames += face.depthFrames
        }
        if templates.isEmpty, let last = files.last {
            let others = files.count > 1 ? ", and neither do the other files" : ""
            throw InputFileError(file: last, message: "holds no template\(others): a face needs at least one")
        }
        return Face(templates: templates, capture: capture?.metadata, depthFrames: frames)
    }

    static func records(from bytes: [UInt8], file: String) throws(InputFileError) -> [Record] {
        try self.decode(Document.self, from: bytes, file: file).records
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    // MARK: Messages

    /// A JSON path such as `[2].landmarks[5].x` (empty: the document).
    static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return text
    }

    private static func at(_ path: String) -> String {
        path.isEmpty ? "" : "at \(path): "
    }

    /// Describes a decoding failure with its JSON path and what was expected. The decoder's own texts
    /// are not used: some quote the offending value, and a value may be template data.
    static func describe(_ error: any Error, in bytes: [UInt8]) -> String {
        switch error {
        case let problem as SchemaProblem:
            return Self.at(problem.path) + problem.message
        case DecodingError.typeMismatch(let type, let context):
            let path = Self.path(context.codingPath)
            return Self.at(path) + "expected \(Self.expectation(type, path: context.codingPath))"
        case DecodingError.valueNotFound(let type, let context):
            let path = Self.path(context.codingPath)
            return Self.at(path) + "null where \(Self.expectation(type, path: context.codingPath)) is expected"
        case DecodingError.keyNotFound(let key, let context):
            return Self.at(Self.path(context.codingPath)) + "missing \"\(key.stringValue)\""
        case DecodingError.dataCorrupted(let context):
            if context.codingPath.isEmpty { return Self.syntaxProblem(in: bytes) }
            let path = Self.path(context.codingPath)
            return Self.at(path) + "invalid value, expected \(Self.expectation(nil, path: context.codingPath))"
        default:
            return "cannot be decoded"
        }
    }

    /// What the value at a path should be.
    private static func expectation(_ type: Any.Type?, path: [any CodingKey]) -> String {
        let key = path.last(where: { $0.intValue == nil })?.stringValue
        let element = path.last?.intValue != nil
        switch key {
        case "version": return "an algorithm version (an integer 0...4294967295)"
        case "data": return element ? "a number" : "an array of numbers"
        case "x", "y", "z", "width", "height": return "a number"
        case "landmarks": return element ? "a landmark object" : "an array of landmark objects"
        case "name", "type", "identifier": return "a string"
        // Face objects and enrolment files.
        case "templates": return element ? "a template object" : "an array of template objects"
        case "capture": return "a capture metadata object"
        case "detectorConfidence", "yaw", "pitch", "roll", "facePixelSize", "sharpness", "brightnessMean", "brightnessStdDev":
            return "a number"
        case "imageWidth", "imageHeight": return "an integer number of pixels (0...4294967295)"
        case "faceBox": return #"a face box object {"x", "y", "width", "height"}"#
        case "depthFrames": return element ? "a depth frame object" : "an array of depth frame objects"
        case "depths":
            return element
                ? "a number (metres) or null (not measured)"
                : "an array of \(DepthFrame.gridSize * DepthFrame.gridSize) numbers (a 10 × 10 grid, row-major)"
        case "timestampMillis": return "an integer (milliseconds)"
        case let pose? where EnrolmentPose(rawValue: pose) != nil:
            return element ? "a depth frame object" : "an array of depth frame objects"
        default: break
        }
        switch type {
        case is String.Type: return "a string"
        case is Float.Type, is Double.Type: return "a number"
        case is Int64.Type, is UInt32.Type: return "an integer"
        default: return "a template object or an array of them"
        }
    }

    /// What is wrong with a document the decoder refused as a whole: its first syntax error with
    /// its position, found by ``JSONSyntaxChecker`` (the decoder does not say where).
    static func syntaxProblem(in bytes: [UInt8]) -> String {
        guard let problem = JSONSyntaxChecker.firstProblem(in: bytes) else {
            return "cannot be decoded (a number out of range, or text that is not UTF-8)"
        }
        let (line, column) = JSONSyntaxChecker.position(of: problem.offset, in: bytes)
        return "not valid JSON: \(problem.what) at line \(line), column \(column)"
    }
}
