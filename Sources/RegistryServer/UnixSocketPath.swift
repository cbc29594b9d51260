import Glibc

/// Preparing the socket path: a stale socket file left by a crash is replaced, but a socket that a
/// live daemon answers on is never taken over.
enum UnixSocketPath {
    struct InUse: Error, CustomStringConvertible {
        let description: String
    }

    /// Makes `path` free to bind: creates its directory if needed, and removes a stale socket.
    /// - Throws: ``InUse`` when a daemon answers on it or something other than a socket is there.
    static func prepare(_ path: String) throws(InUse) {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            Self.makeDirectories(String(path[..<slash]))
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // nothing there
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw InUse(description: "\(path) exists and is not a socket; refusing to replace it")
        }
        if Self.answers(path) {
            throw InUse(description: "another registryd is serving on \(path); refusing to take it over")
        }
        unlink(path)  // stale: nobody listens
    }

    /// Whether a process accepts connections on the socket at `path`.
    static func answers(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return result == 0
    }

    private static func makeDirectories(_ path: String) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            mkdir(current, 0o755)
        }
    }
}
