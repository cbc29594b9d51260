import FoundationEssentials
import RegistryModel

/// What the configuration file may contain, checked before it is decoded: a misspelt key is an error
/// naming the key and where it is (with the nearest known key), not a setting silently left at its
/// default; and a value of the wrong type is reported as a plain sentence, not a decoder dump.
enum ConfigurationCheck {
    /// The keys of each object of the file: those the configuration's types decode (their
    /// `CodingKeys`), so that the check and the decoder never disagree. `access` maps gallery names
    /// (or `*`) to operation classes; its keys are checked by `AccessPolicy`, its gallery names are
    /// the operator's.
    static let topLevel = Self.keys(ServerConfiguration.CodingKeys.self)
    static let limits = Self.keys(ServerConfiguration.Limits.CodingKeys.self)
    static let algorithm = Self.keys(ServerConfiguration.AlgorithmEntry.CodingKeys.self)
    static let gallery = Self.keys(ServerConfiguration.GalleryEntry.CodingKeys.self)
    static let registry = Self.keys(ServerConfiguration.RegistryEntry.CodingKeys.self)
    static let audit = Self.keys(ServerConfiguration.AuditEntryRetention.CodingKeys.self)
    static let backup = Self.keys(ServerConfiguration.BackupEntry.CodingKeys.self)
    static let fleet = Self.keys(ServerConfiguration.FleetEntry.CodingKeys.self)
    static let operationClasses = Set(OperationClass.allCases.map(\.rawValue))

    /// The known keys of each object, by its place in the file (`[]`: any element of a list), as
    /// ``unknownKeys(in:file:)`` checks them.
    static let knownKeys: [String: Set<String>] = [
        "": Self.topLevel, "limits": Self.limits, "audit": Self.audit, "backup": Self.backup, "fleet": Self.fleet, "algorithms[]": Self.algorithm,
        "galleries[]": Self.gallery, "galleries[].registries[]": Self.registry,
    ]

    private static func keys<Key: CodingKey & CaseIterable>(_ type: Key.Type) -> Set<String> {
        Set(Key.allCases.map(\.stringValue))
    }

    /// Every unknown key in `data` (a JSON document), as messages; empty when all are known.
    /// - Throws: ``ConfigurationError`` when `data` is not JSON, or not an object.
    static func unknownKeys(in data: Data, file: String) throws(ConfigurationError) -> [String] {
        // The checker runs before the decoder: it says where a problem is (the decoder does not, and
        // the message never quotes the text), and Foundation's decoder traps on some documents
        // nested 513 deep, which the checker refuses (deeper than 512) before they reach it.
        let bytes = Array(data)
        if let problem = JSONSyntaxChecker.firstProblem(in: bytes) {
            let (line, column) = JSONSyntaxChecker.position(of: problem.offset, in: bytes)
            throw ConfigurationError("\(file) is not valid JSON: line \(line), column \(column): \(problem.what)")
        }
        let document: JSONValue
        do {
            document = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw ConfigurationError("\(file) is not valid JSON")
        }
        guard case .object(let top) = document else { throw ConfigurationError("\(file): the configuration must be a JSON object") }
        var problems: [String] = []
        func check(_ object: [String: JSONValue], _ known: Set<String>, at path: String) {
            for key in object.keys.sorted() where !known.contains(key) {
                let place = path.isEmpty ? "at the top level" : "in \(path)"
                let hint = Self.nearest(key, in: known).map { " (did you mean \"\($0)\"?)" } ?? ""
                problems.append("\(file): unknown key \"\(key)\" \(place)\(hint)")
            }
        }
        check(top, Self.topLevel, at: "")
        // Whole-number settings: the decoder cannot say which one is out of range, so say it here.
        let anyInt = Double(Int64.min)...Double(Int64.max)
        func wholeNumbers(_ object: [String: JSONValue], _ keys: Set<String>, at path: String, within range: ClosedRange<Double>) {
            for key in keys.sorted() {
                guard case .number(let value) = object[key], value.rounded() != value || !range.contains(value) else { continue }
                let bounds = range == anyInt ? "" : " within \(Int64(range.lowerBound))...\(Int64(range.upperBound))"
                problems.append("\(file): \(path.isEmpty ? "" : path + ".")\(key) must be a whole number\(bounds)")
            }
        }
        if case .object(let limits) = top["limits"] {
            check(limits, Self.limits, at: "limits")
            wholeNumbers(limits, Self.limits, at: "limits", within: anyInt)
        }
        if case .object(let audit) = top["audit"] {
            check(audit, Self.audit, at: "audit")
            wholeNumbers(audit, Self.audit, at: "audit", within: anyInt)
        }
        if case .object(let backup) = top["backup"] {
            check(backup, Self.backup, at: "backup")
        }
        if case .object(let fleet) = top["fleet"] {
            check(fleet, Self.fleet, at: "fleet")
        }
        if case .array(let algorithms) = top["algorithms"] {
            for (index, entry) in algorithms.enumerated() {
                guard case .object(let object) = entry else { continue }
                check(object, Self.algorithm, at: "algorithms[\(index)]")
                wholeNumbers(object, ["version"], at: "algorithms[\(index)]", within: 0...Double(UInt32.max))
                wholeNumbers(object, ["dimension"], at: "algorithms[\(index)]", within: anyInt)
            }
        }
        if case .array(let galleries) = top["galleries"] {
            for (index, entry) in galleries.enumerated() {
                guard case .object(let gallery) = entry else { continue }
                check(gallery, Self.gallery, at: "galleries[\(index)]")
                guard case .array(let registries) = gallery["registries"] else { continue }
                for (position, registry) in registries.enumerated() {
                    guard case .object(let object) = registry else { continue }
                    check(object, Self.registry, at: "galleries[\(index)].registries[\(position)]")
                    wholeNumbers(object, ["algorithm"], at: "galleries[\(index)].registries[\(position)]", within: 0...Double(UInt32.max))
                }
            }
        }
        if case .object(let access) = top["access"] {
            for (gallery, rules) in access.sorted(by: { $0.key < $1.key }) {
                if case .object(let classes) = rules { check(classes, Self.operationClasses, at: "access[\"\(gallery)\"]") }
            }
        }
        return problems
    }

    /// Every value of the wrong type in `data` (whose keys ``unknownKeys(in:file:)`` found known),
    /// as messages: the decoder stops at the first, so each one found is replaced by a value of the
    /// expected kind and the document decoded again (up to ``reportedTypeProblems`` of them, then a
    /// line saying more follow), and a file with three wrong
    /// values is fixed in one run, not three. A problem at a value put in by this search ends it
    /// (the placeholder does not fit: say nothing about it).
    static func typeProblems<T: Decodable>(in data: Data, as type: T.Type, file: String) -> [String] {
        guard var document = try? JSONDecoder().decode(JSONValue.self, from: data) else { return [] }
        var problems: [String] = []
        var replaced: [String] = []
        var current = data
        // Each pass either ends the search or adds a problem, and problems are bounded: it ends.
        while true {
            do {
                _ = try JSONDecoder().decode(T.self, from: current)
                return problems
            } catch let error as DecodingError {
                let (expected, context): (Any.Type?, DecodingError.Context?) =
                    switch error {
                    case .typeMismatch(let type, let context), .valueNotFound(let type, let context): (type, context)
                    case .keyNotFound(_, let context), .dataCorrupted(let context): (nil, context)
                    @unknown default: (nil, nil)
                    }
                let place = context.map { Self.path($0.codingPath) } ?? ""
                if replaced.contains(where: { place == $0 || place.hasPrefix($0 + ".") || place.hasPrefix($0 + "[") }) { return problems }
                guard problems.count < Self.reportedTypeProblems else {
                    return problems + ["\(file): more values of the wrong type follow; fix these \(problems.count) and check again"]
                }
                problems.append(Self.describe(error, file: file))
                guard let expected, let context, document.replace(at: context.codingPath[...], with: .placeholder(for: expected)),
                    let encoded = try? JSONEncoder().encode(document)
                else { return problems }
                replaced.append(place)
                current = encoded
            } catch {
                return problems + [Self.describe(error, file: file)]
            }
        }
    }

    /// The most values of the wrong type one check reports (each found costs a decoding of the file).
    static let reportedTypeProblems = 100

    /// A decoding error as a sentence: where (a path such as `galleries[0].registries[1].identification`)
    /// and what was expected. No type names of the implementation, no values.
    static func describe(_ error: any Error, file: String) -> String {
        guard let error = error as? DecodingError else { return "\(file): \(error)" }
        switch error {
        case .typeMismatch(let type, let context):
            return "\(file): \(Self.path(context.codingPath)) must be \(Self.kind(of: type))"
        case .valueNotFound(let type, let context):
            return "\(file): \(Self.path(context.codingPath)) must be \(Self.kind(of: type)), not null"
        case .keyNotFound(let key, let context):
            let owner = context.codingPath.isEmpty ? "the configuration" : Self.path(context.codingPath)
            return "\(file): \(owner) needs \"\(key.stringValue)\""
        case .dataCorrupted(let context):
            // Whole numbers out of range are found before decoding; what is left names no place.
            return "\(file): \(Self.path(context.codingPath)) has a value that does not fit its setting"
        @unknown default:
            return "\(file): \(error)"
        }
    }

    static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text.isEmpty ? "the configuration" : text
    }

    static func kind(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is UInt32.Type, is Int64.Type, is UInt64.Type: "a whole number"
        case is Float.Type, is Double.Type: "a number"
        // Arrays of any element type: the decoder names the concrete type.
        default: String(describing: type).hasPrefix("Array") ? "a list" : "an object"
        }
    }

    /// The known key closest to `key` by edit distance, when it is close enough to be a typo.
    static func nearest(_ key: String, in known: Set<String>) -> String? {
        let typed = Array(key.lowercased().unicodeScalars)
        let limit = max(2, key.count / 4)
        var best: (distance: Int, name: String)?
        for name in known {
            let candidate = Array(name.lowercased().unicodeScalars)
            // The distance is at least the difference in length.
            guard abs(candidate.count - typed.count) <= limit else { continue }
            let distance = Self.distance(typed, candidate)
            if distance <= limit, best.map({ (distance, name) < ($0.distance, $0.name) }) ?? true { best = (distance, name) }
        }
        return best?.name
    }

    /// Levenshtein distance, by rows.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

/// Any JSON value: read to check which keys each object has and the numbers, and written back with
/// a wrong value replaced (``ConfigurationCheck/typeProblems(in:file:)``).
enum JSONValue: Codable {
    case object([String: JSONValue])
    case array([JSONValue])
    case number(Double)
    case string(String)
    case bool(Bool)
    case null

    init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var values: [String: JSONValue] = [:]
            for key in object.allKeys { values[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(values)
        } else if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
            self = .array(values)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let bool = try? single.decode(Bool.self) {
                self = .bool(bool)
            } else if let number = try? single.decode(Double.self) {
                self = .number(number)
            } else {
                self = .string(try single.decode(String.self))
            }
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .object(let values):
            var container = encoder.container(keyedBy: AnyKey.self)
            for (key, value) in values { try container.encode(value, forKey: AnyKey(stringValue: key)) }
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case .number(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        }
    }

    /// The value at `path` (a decoder's coding path) replaced by `value`; false when there is none.
    mutating func replace(at path: ArraySlice<any CodingKey>, with value: JSONValue) -> Bool {
        guard let key = path.first else {
            self = value
            return true
        }
        switch self {
        case .object(var values):
            guard var child = values[key.stringValue], child.replace(at: path.dropFirst(), with: value) else { return false }
            values[key.stringValue] = child
            self = .object(values)
            return true
        case .array(var values):
            guard let index = key.intValue, values.indices.contains(index), values[index].replace(at: path.dropFirst(), with: value) else {
                return false
            }
            self = .array(values)
            return true
        default:
            return false
        }
    }

    /// A value of the kind `type` decodes from (``ConfigurationCheck/kind(of:)``'s kinds).
    static func placeholder(for type: Any.Type) -> JSONValue {
        switch ConfigurationCheck.kind(of: type) {
        case "a string": .string("")
        case "true or false": .bool(false)
        case "a whole number", "a number": .number(0)
        case "a list": .array([])
        default: .object([:])
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// What `registryd --check-config` prints for a usable configuration: everything the daemon would
/// check before opening the store (the file, the limits, algorithms, galleries, the key file, the
/// access policy), and what it defines.
public struct ConfigurationReport: Sendable {
    public let text: String

    /// - Throws: ``ConfigurationError`` with every problem ``ServerConfiguration/checkedForStart()``
    ///   finds: the checks a start makes before it binds the socket and opens the store.
    public init(_ configuration: ServerConfiguration, file: String?) throws(ConfigurationError) {
        let (engine, galleries) = try configuration.checkedForStart()
        let catalog: AlgorithmCatalog
        do {
            catalog = try AlgorithmCatalog(configured: engine.algorithms)
        } catch {
            throw ConfigurationError(error.message)
        }
        var lines = ["\(file ?? "the default configuration"): usable"]
        lines.append("  socket       \(configuration.socketPath)")
        lines.append("  data         \(configuration.dataDirectory)")
        lines.append("  log level    \(configuration.logLevel)")
        let limits = configuration.limits
        lines.append(
            "  limits       \(limits.maximumConnections) connections (\(limits.resolvedMaximumConnectionsPerUser) per user), "
                + "\(limits.maximumRequestsInFlight) requests in flight each, "
                + "frames up to \(limits.maximumFrameBytes) bytes, \(limits.resolvedEventLoops) event loop\(limits.resolvedEventLoops == 1 ? "" : "s"), "
                + "drain \(limits.drainDeadlineSeconds) s")
        lines.append("  algorithms   \(catalog.all.map { "\($0.name) (\($0.version))" }.joined(separator: ", "))")
        if galleries.isEmpty {
            lines.append("  galleries    none configured (the store's are kept as they are)")
        }
        for gallery in galleries {
            let registries = gallery.registries.map { entry in
                let name = (try? catalog.algorithm(version: entry.algorithm).name) ?? "\(entry.algorithm)"
                let thresholds = entry.thresholds.map { " \($0.authentication)/\($0.identification)/\($0.autoEnrolment)" } ?? ""
                return name + thresholds
            }
            lines.append("  gallery      \(gallery.name): \(registries.joined(separator: ", "))")
        }
        lines.append(
            "  access       \(configuration.access == nil ? "the default policy" : "configured for \(configuration.access!.keys.sorted().joined(separator: ", "))")"
        )
        let backupRoot = engine.backupDirectory ?? configuration.dataDirectory + "-backups"
        let allowed =
            engine.allowedBackupDirectories.isEmpty ? "" : "; a request may also name " + engine.allowedBackupDirectories.joined(separator: ", ")
        lines.append("  backups      into \(backupRoot)\(allowed)")
        lines.append("  at rest      \(engine.encryptionKey == nil ? "not encrypted (no key)" : "encrypted (the key file reads)")")
        lines.append("The store is not opened: whether it accepts these galleries is checked at start.")
        self.text = lines.joined(separator: "\n")
    }
}
