import Glibc

// The files registryctl reads: kept apart from the commands so the parsers can be fuzzed (an
// executable target cannot be imported by another executable).

/// An input file that could not be read or does not hold what it should (exit status 65).
///
/// Messages name the file and what is wrong (a JSON path, a record number, a size), never template
/// values: templates are biometric data.
public struct InputFileError: Error, Hashable, CustomStringConvertible {
    /// The file as given on the command line (`-` for standard input).
    public var file: String
    public var message: String

    public init(file: String, message: String) {
        self.file = file
        self.message = message
    }

    public var description: String { "\(self.file): \(self.message)" }
}

/// The text of the current `errno`.
public func errnoDescription(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}

/// Whole-file reads (registryctl adds the path helpers it needs).
public enum FileIO {
    /// Reads a whole file (`-`: standard input).
    /// - Throws: ``InputFileError`` when it cannot be opened or read.
    public static func read(_ path: String) throws(InputFileError) -> [UInt8] {
        let fd: Int32
        if path == "-" {
            fd = STDIN_FILENO
        } else {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw InputFileError(file: path, message: "cannot open: \(errnoDescription())") }
        }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var info = stat()
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw InputFileError(file: path, message: "is a directory")
        }
        var bytes: [UInt8] = []
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG { bytes.reserveCapacity(Int(info.st_size)) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw InputFileError(file: path, message: "cannot read: \(errnoDescription())")
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return bytes
    }
}
