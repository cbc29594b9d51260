import Glibc
import RegistryProtocol
import SwiftProtobuf

/// A connection to the daemon's socket could not be made.
public struct RawConnectionError: Error, CustomStringConvertible {
    public let path: String
    public var description: String { "cannot connect to \(self.path)" }
}

/// A plain blocking Unix-socket connection, for sending bytes no well-behaved client would.
/// (`@unchecked Sendable`: a descriptor; tests read and write it from one thread each.)
public final class RawConnection: @unchecked Sendable {
    /// -1 once ``disconnect()`` closed it: the descriptor is closed exactly once, since a second
    /// close may hit a number the process has reused meanwhile (an event loop's socket or selector,
    /// which NIO then finds registered twice and traps on).
    public private(set) var fd: Int32

    public init(_ path: String, timeoutSeconds: Int = 5) throws {
        // The descriptor becomes the object's only once connected: a class whose init throws after
        // its properties are set still runs deinit, which would close the descriptor a second time,
        // perhaps after its number was reused by another connection of this process (a NIO
        // client's: its writes then failed with EBADF, or went to the wrong socket).
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard Self.connect(fd, path) else {
            close(fd)
            throw RawConnectionError(path: path)
        }
        self.fd = fd
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { self.disconnect() }

    /// Closes the connection as a client that goes away does.
    public func disconnect() {
        guard self.fd >= 0 else { return }
        close(self.fd)
        self.fd = -1
    }

    public static func canConnect(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        return Self.connect(fd, path)
    }

    private static func connect(_ fd: Int32, _ path: String) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    public func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// A frame: the message's length as 4 big-endian bytes, then the message.
    public static func frame(_ body: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: UInt32(body.count).bigEndian) { Array($0) } + body
    }

    public static func frame(_ request: Registry_V1_Request) throws -> [UInt8] {
        Self.frame(try request.serializedBytes())
    }

    /// Reads exactly `count` bytes; nil on EOF or timeout.
    public func read(_ count: Int) -> [UInt8]? {
        var result = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: max(count, 1))
        while result.count < count {
            let got = recv(self.fd, &buffer, count - result.count, 0)
            guard got > 0 else { return nil }
            result += buffer[0..<got]
        }
        return result
    }

    /// Reads one response frame; nil on EOF or timeout.
    public func response() throws -> Registry_V1_Response? {
        guard let prefix = self.read(4) else { return nil }
        let length = prefix.reduce(0) { $0 << 8 | Int($1) }
        guard let body = self.read(length) else { return nil }
        return try Registry_V1_Response(serializedBytes: body)
    }

    /// Whether the daemon closed the connection (EOF) within the receive timeout.
    /// (A reset counts: the daemon closed while bytes this side sent were still unread.)
    public func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        let got = recv(self.fd, &byte, 1, 0)
        return got == 0 || (got < 0 && errno == ECONNRESET)
    }
}
