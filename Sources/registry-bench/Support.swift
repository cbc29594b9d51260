import Glibc

/// A wrong input found while running (a file that does not fit): printed as its message.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { self.message }
}

func printError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// The whole of a file, or an error naming it.
func readFile(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else { throw UsageError("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { fclose(file) }
    // Read until the end rather than trusting the size: /proc files report 0.
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let read = fread(&chunk, 1, chunk.count, file)
        bytes.append(contentsOf: chunk[..<read])
        if read < chunk.count { break }
    }
    guard ferror(file) == 0 else { throw UsageError("cannot read \(path)") }
    return bytes
}

/// Raw little-endian float32 rows of `dimension` values.
func readRows(_ path: String, dimension: Int) throws -> [[Float]] {
    let bytes = try readFile(path)
    guard bytes.count % (4 * dimension) == 0 else {
        throw UsageError("\(path): \(bytes.count) bytes is not a whole number of \(dimension)-float rows")
    }
    return bytes.withUnsafeBytes { raw in
        (0..<bytes.count / (4 * dimension)).map { row in
            (0..<dimension).map { raw.loadUnaligned(fromByteOffset: 4 * (row * dimension + $0), as: Float.self) }
        }
    }
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    guard let file = fopen(path, "wb") else { throw UsageError("cannot create \(path): \(String(cString: strerror(errno)))") }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw UsageError("cannot write \(path)") }
}

/// A JSON value, printed compactly on one line (what tools/bench reads).
enum JSON {
    case number(Double)
    case integer(Int)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    var text: String {
        switch self {
        case .number(let value): value.isFinite ? "\(value)" : "null"
        case .integer(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .array(let values): "[" + values.map(\.text).joined(separator: ",") + "]"
        case .object(let fields): "{" + fields.map { "\"\($0.0)\":\($0.1.text)" }.joined(separator: ",") + "}"
        }
    }
}

/// Resident memory of this process from /proc/self/status, in bytes: total, anonymous, file-backed.
func residentMemory() -> (total: Int, anonymous: Int, file: Int) {
    guard let bytes = try? readFile("/proc/self/status") else { return (0, 0, 0) }
    var fields: [String: Int] = [:]
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        let parts = line.split(whereSeparator: { $0 == " " || $0 == ":" || $0 == "\t" })
        if parts.count >= 2, let kilobytes = Int(parts[1]) { fields[String(parts[0])] = kilobytes * 1024 }
    }
    return (fields["VmRSS"] ?? 0, fields["RssAnon"] ?? 0, fields["RssFile"] ?? 0)
}

/// Resident bytes of this process's mappings of the index snapshot (rows, codes and terms an open
/// took from it live there instead of in anonymous memory), from /proc/self/smaps.
func snapshotResidentMemory() -> Int {
    guard let bytes = try? readFile("/proc/self/smaps") else { return 0 }
    var total = 0
    var inSnapshot = false
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        if let first = line.first, first.isHexDigit, line.contains("-") && !line.hasSuffix(":") && line.split(separator: " ").count >= 5 {
            inSnapshot = line.contains("/index.snapshot")
        } else if inSnapshot && line.hasPrefix("Rss:") {
            total += (Int(line.split(whereSeparator: { $0 == " " })[1]) ?? 0) * 1024
        }
    }
    return total
}
