import Glibc
import SyntheticFaces

/// A fresh directory under /tmp for one test, removed with everything in it by ``remove()``.
public struct TemporaryDirectory: Sendable {
    public let path: String

    /// - Parameter prefix: names the test area in the directory's name (`/tmp/PREFIX-XXXXXX`).
    public init(_ prefix: String = "registry-tests") {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        // Without a directory no test can run; say why instead of failing later on a missing path.
        precondition(made != nil, "mkdtemp failed in /tmp: errno \(errno)")
        self.path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Removes the directory and everything in it (`rm -rf`: the tests create nested stores, backups
    /// and sockets; the path is mkdtemp's, with no character the shell would read).
    public func remove() {
        _ = system("rm -rf '\(self.path)'")
    }
}

/// A tmpfs of a few megabytes mounted on a fresh directory, for tests of a full disk (ENOSPC, as a
/// real full file system answers) and of a read-only one. Mounting needs root.
public struct TemporaryMount: Sendable {
    public let path: String

    /// Why the tmpfs could not be mounted.
    public struct Refused: Error, CustomStringConvertible {
        public let description: String
    }

    /// - Throws: ``Refused``, with what mount said, when it cannot be mounted (not root, or in a
    ///   container without the right to mount). A test that needs the tmpfs then fails rather than
    ///   passing without having run: the tests run as root in CI (tools/test), where it must work.
    public init(options: String) throws(Refused) {
        let point = TemporaryDirectory("registryd-mount").path
        let errors = point + ".mount-errors"
        let status = system("mount -t tmpfs -o \(options) tmpfs '\(point)' 2>'\(errors)'")
        let said = readFileText(errors).split(separator: "\n").map { $0.drop { $0 == " " || $0 == "\t" } }.joined(separator: "; ")
        unlink(errors)
        guard status == 0 else {
            rmdir(point)
            throw Refused(
                description: "cannot mount a tmpfs (-o \(options)) on \(point) (mount exited with status \(status >> 8): "
                    + "\(said.isEmpty ? "it said nothing" : said)); this test needs root and the right to mount "
                    + "(CAP_SYS_ADMIN; a container needs it granted)")
        }
        self.path = point
    }

    public func remove() {
        // Lazily when busy: a child of another test running in parallel may still hold a descriptor
        // on it (each full run left one tmpfs mounted in /tmp before LMDB's data.mdb descriptor was
        // made close-on-exec); detached now, it goes once the child lets go.
        _ = system("umount '\(self.path)' 2>/dev/null || umount -l '\(self.path)'")
        rmdir(self.path)
    }
}

/// A sibling executable of the test bundle (SwiftPM puts every product of a build in one directory).
public func siblingExecutable(_ name: String) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    var path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    while let slash = path.lastIndex(of: "/") {
        path = String(path[..<slash])
        let candidate = path + "/" + name
        if access(candidate, X_OK) == 0 { return candidate }
        if path.hasSuffix("/debug") || path.hasSuffix("/release") { break }
    }
    return nil
}

/// A whole file's bytes (nil when it cannot be opened).
public func readFileBytes(_ path: String) -> [UInt8]? {
    guard let file = fopen(path, "rb") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count == 0 { break }
        bytes += buffer[0..<count]
    }
    return bytes
}

/// A whole file as text (empty when it cannot be read).
public func readFileText(_ path: String) -> String {
    String(decoding: readFileBytes(path) ?? [], as: UTF8.self)
}

/// The tests' deterministic noise: SyntheticFaces' SplitMix64, the same numbers on every run and
/// platform, so a failure can be replayed.
public typealias SeededGenerator = SeededRandom

extension SeededRandom {
    /// A standard normal value.
    public mutating func normal() -> Double { self.gaussian() }
}

/// The names in a directory (nil when it cannot be read).
public func directoryEntries(_ path: String) -> [String]? {
    guard let directory = opendir(path) else { return nil }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// The absolute path of a file of this repository, given from the package root (`docs/operations.md`):
/// tests that hold the code against its documentation read the files beside the sources they were
/// built from. This file is Tests/TestSupport/TestSupport.swift, three levels below the root.
public func repositoryPath(_ path: String) -> String {
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/") + "/" + path
}

/// The first Markdown table after the line `heading` in `text`: its header's cells and each row's,
/// trimmed (nil when there is no such heading or no table under it). Cells are split at every `|`:
/// the tables read this way keep `|` out of their cells.
public func markdownTable(in text: String, under heading: String) -> (header: [String], rows: [[String]])? {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard let start = lines.firstIndex(of: heading) else { return nil }
    let table = lines[(start + 1)...].drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
    func cells(_ line: String) -> [String] {
        line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast().map { cell in
            let start = cell.firstIndex { $0 != " " } ?? cell.endIndex
            let end = cell.lastIndex { $0 != " " }.map(cell.index(after:)) ?? start
            return String(cell[start..<max(start, end)])
        }
    }
    // The header, then the line of dashes under it, then the rows.
    guard let header = table.first, table.count >= 2 else { return nil }
    return (cells(header), table.dropFirst(2).map(cells))
}
