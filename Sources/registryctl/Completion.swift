import ArgumentParser
import Glibc
import RegistryProtocol
import SwiftProtobuf

/// Shell completion of the values only the daemon knows: gallery names, asked for when TAB is pressed
/// (`registryctl ---completion …`, run by the scripts `--generate-completion-script` writes).
///
/// A plain blocking socket rather than ``RegistryClient``: ArgumentParser runs a completion closure
/// synchronously, and a completion must stay fast and silent when no daemon answers (no socket, a
/// refused connection, a daemon that does not reply within ``timeoutMilliseconds``): it then offers
/// nothing.
enum GalleryCompletion {
    /// For `--gallery` and the gallery-name arguments.
    static let kind = CompletionKind.custom { words, _, prefix in names(words: words, prefix: prefix) }

    /// The longest wait for each step (connect, write, read) of the exchange.
    static let timeoutMilliseconds = 500

    /// The galleries whose names start with `prefix`, from the daemon at the socket the command line
    /// names (`--socket`, else as every command finds it: `REGISTRYD_SOCKET`, …); none when it does not
    /// answer.
    static func names(words: [String], prefix: String) -> [String] {
        let path = GlobalOptions.socketPath(
            option: self.socketOption(in: words), environment: getenv("REGISTRYD_SOCKET").map { String(cString: $0) })
        guard let names = self.listGalleries(socketPath: path) else { return [] }
        return names.filter { $0.hasPrefix(prefix) }.sorted()
    }

    /// The value of the last `--socket P` or `--socket=P` before any `--`, as the shell would pass it
    /// (the words reach the closure as typed, quotes and backslashes included).
    static func socketOption(in words: [String]) -> String? {
        var socket: String?
        var index = 0
        while index < words.count, words[index] != "--" {
            if words[index] == "--socket", index + 1 < words.count {
                socket = self.unquoted(words[index + 1])
                index += 2
                continue
            }
            if words[index].hasPrefix("--socket=") { socket = self.unquoted(String(words[index].dropFirst("--socket=".count))) }
            index += 1
        }
        return socket.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A shell word as the command would receive it: quotes removed, backslash escapes resolved, a
    /// leading `~/` made the home directory. (Enough for paths; no variables or globs.)
    static func unquoted(_ word: String) -> String {
        var result = ""
        var quote: Character?
        var escaped = false
        for character in word {
            if escaped {
                result.append(character)
                escaped = false
            } else if let open = quote {
                if character == open {
                    quote = nil
                } else if character == "\\" && open == "\"" {
                    escaped = true
                } else {
                    result.append(character)
                }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "\\" {
                escaped = true
            } else {
                result.append(character)
            }
        }
        if result.hasPrefix("~/"), let home = getenv("HOME") {
            result = String(cString: home) + result.dropFirst()
        }
        return result
    }

    /// The gallery names (a `list_galleries` request, which any peer may make), or nil when the
    /// daemon cannot be reached or does not answer in time.
    static func listGalleries(socketPath: String) -> [String]? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // Bounds connect (a full backlog) as well as reads and writes on a Unix socket.
        var timeout = timeval(tv_sec: 0, tv_usec: self.timeoutMilliseconds * 1000)
        let size = socklen_t(MemoryLayout<timeval>.size)
        guard setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, size) == 0, setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, size) == 0
        else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socketPath.utf8)
        guard !path.isEmpty, path.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return nil }

        var request = Registry_V1_Request()
        request.id = 1
        request.operation = .listGalleries(Registry_V1_ListGalleriesRequest())
        guard let body: [UInt8] = try? request.serializedBytes() else { return nil }
        let length = UInt32(body.count)
        let frame = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
        guard self.writeAll(fd, frame), let header = self.read(fd, count: 4) else { return nil }
        let announced = header.reduce(0) { $0 << 8 | Int($1) }
        guard announced <= 16 << 20, let payload = self.read(fd, count: announced),
            let response = try? Registry_V1_Response(serializedBytes: payload),
            case .listGalleries(let list)? = response.result
        else { return nil }
        return list.galleries.map(\.name)
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    /// Exactly `count` bytes, or nil on end of stream, an error or the timeout.
    private static func read(_ fd: Int32, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = bytes[offset...].withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return nil }
            offset += got
        }
        return bytes
    }
}
