import Glibc
import RegistryCtlInput

/// An output file that could not be written (exit status 3).
public struct OutputFileError: Error, Hashable, CustomStringConvertible {
    public var file: String
    public var message: String

    public init(file: String, message: String) {
        self.file = file
        self.message = message
    }

    public var description: String { "\(self.file): \(self.message)" }
}

extension FileIO {
    /// Makes a path absolute against the current directory (for paths the daemon resolves, as it runs
    /// in another directory).
    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let directory = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var relative = Substring(path)
        while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
        if relative.isEmpty || relative == "." { return directory }
        return directory == "/" ? "/" + relative : directory + "/" + relative
    }
}

/// A buffered writer to a file or standard output. A file is written under a temporary name and
/// renamed into place by ``commit()``, so a failed export never leaves a truncated file behind.
///
/// The temporary file is always a new one, created by this process (`O_EXCL | O_NOFOLLOW`) and 0600
/// until it is complete: registryctl often runs as root in directories others may write, and a
/// symbolic link planted at the temporary name must make it fail, never write through the link.
final class OutputSink {
    let name: String
    private let fd: Int32
    private let temporaryPath: String?
    /// The mode the file gets once complete, just before it is renamed into place.
    private let mode: mode_t
    private var buffer: [UInt8] = []
    private var closed = false
    private static let flushThreshold = 1 << 16

    /// Opens `path` for writing (`-`: standard output), created with `mode` (owner only unless said).
    /// - Throws: ``OutputFileError``.
    init(path: String, mode: mode_t = 0o600) throws(OutputFileError) {
        self.name = path
        self.mode = mode
        if path == "-" {
            self.fd = STDOUT_FILENO
            self.temporaryPath = nil
        } else {
            let temporary = "\(path).partial-\(getpid())"
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                let reason = errno
                let message =
                    reason == EEXIST || reason == ELOOP
                    ? "cannot create the temporary file \(temporary): something is already there (it is never overwritten, nor "
                        + "followed if it is a symbolic link); remove it if it is yours"
                    : "cannot create \(temporary): \(errnoDescription(reason))"
                throw OutputFileError(file: path, message: message)
            }
            self.fd = fd
            self.temporaryPath = temporary
        }
        self.buffer.reserveCapacity(Self.flushThreshold * 2)
    }

    deinit {
        // Not committed: drop the partial file.
        if !self.closed, let temporary = self.temporaryPath {
            close(self.fd)
            unlink(temporary)
        }
    }

    func write(_ bytes: some Sequence<UInt8>) throws(OutputFileError) {
        self.buffer.append(contentsOf: bytes)
        if self.buffer.count >= Self.flushThreshold { try self.flush() }
    }

    func write(_ text: String) throws(OutputFileError) {
        try self.write(text.utf8)
    }

    func flush() throws(OutputFileError) {
        var offset = 0
        while offset < self.buffer.count {
            let written = self.buffer.withUnsafeBytes { bytes in
                Glibc.write(self.fd, bytes.baseAddress! + offset, bytes.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw OutputFileError(file: self.name, message: "cannot write: \(errnoDescription())")
            }
            offset += written
        }
        self.buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, syncs and moves the file into place.
    func commit() throws(OutputFileError) {
        try self.flush()
        guard let temporary = self.temporaryPath else { return }
        guard fsync(self.fd) == 0 else { throw OutputFileError(file: self.name, message: "cannot sync: \(errnoDescription())") }
        if self.mode != 0o600 && fchmod(self.fd, self.mode & ~umaskValue()) != 0 {
            throw OutputFileError(file: self.name, message: "cannot set its mode: \(errnoDescription())")
        }
        self.closed = true
        close(self.fd)
        guard rename(temporary, self.name) == 0 else {
            let message = errnoDescription()
            unlink(temporary)
            throw OutputFileError(file: self.name, message: "cannot rename into place: \(message)")
        }
    }
}

/// The process's umask (reading it means setting it: set back at once).
private func umaskValue() -> mode_t {
    let value = umask(0o077)
    umask(value)
    return value
}
