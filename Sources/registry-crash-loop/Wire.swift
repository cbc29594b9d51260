import Glibc
import RegistryProtocol
import SwiftProtobuf

/// A failure of the tool itself or of the daemon's protocol (not a finding about durability).
struct CrashLoopError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One non-blocking Unix-socket connection speaking the length-prefixed protocol (PROTOCOL §2):
/// requests are queued as frames and written as the socket accepts them, replies are parsed as they
/// arrive, so any number of requests can be in flight without waiting for their replies.
final class FrameConnection {
    private(set) var fd: Int32
    /// Bytes queued for the daemon; `outgoingOffset` of them are already written.
    private var outgoing: [UInt8] = []
    private var outgoingOffset = 0
    private var incoming: [UInt8] = []
    private var incomingOffset = 0
    /// recv's buffer, reused: receive runs on every turn of the load loop.
    private var chunk = [UInt8](repeating: 0, count: 256 << 10)
    /// The daemon closed its side (EOF or reset): no more replies will come.
    private(set) var readClosed = false
    /// Writing failed (EPIPE, ECONNRESET): queued bytes are dropped.
    private(set) var writeClosed = false
    /// Replies are far below this; a larger prefix means the stream is garbled.
    private let maximumFrame = 64 << 20

    /// Connects (blocking, as connect on a Unix socket answers at once), then switches to non-blocking.
    init(path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CrashLoopError("socket: \(Self.errorText())") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            Glibc.close(fd)
            throw CrashLoopError("socket path longer than \(capacity - 1) bytes: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let text = Self.errorText()
            Glibc.close(fd)
            throw CrashLoopError("connect \(path): \(text)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        self.fd = fd
    }

    deinit { self.close() }

    func close() {
        if self.fd >= 0 {
            Glibc.close(self.fd)
            self.fd = -1
        }
        self.readClosed = true
        self.writeClosed = true
    }

    var hasPendingOutput: Bool { !self.writeClosed && self.outgoingOffset < self.outgoing.count }

    /// Queues one request frame (written by `flush`).
    func enqueue(_ request: Registry_V1_Request) throws {
        let body: [UInt8] = try request.serializedBytes()
        let length = UInt32(body.count)
        if self.outgoingOffset > 0 && self.outgoingOffset == self.outgoing.count {
            self.outgoing.removeAll(keepingCapacity: true)
            self.outgoingOffset = 0
        }
        self.outgoing.append(contentsOf: [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)])
        self.outgoing.append(contentsOf: body)
    }

    /// Writes what the socket accepts now.
    func flush() {
        while self.hasPendingOutput {
            let written = self.outgoing.withUnsafeBytes { raw in
                send(self.fd, raw.baseAddress! + self.outgoingOffset, raw.count - self.outgoingOffset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                self.outgoingOffset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                return
            } else {
                // EPIPE or ECONNRESET: the daemon is gone or stopped reading for good.
                self.writeClosed = true
                return
            }
        }
    }

    /// Reads what has arrived and returns the whole replies in it, in order.
    func receive() throws -> [Registry_V1_Response] {
        while !self.readClosed {
            let count = self.chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress!, $0.count, 0) }
            if count > 0 {
                self.incoming.append(contentsOf: self.chunk[0..<count])
            } else if count == 0 {
                self.readClosed = true
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                break
            } else {
                // ECONNRESET: the daemon died with our bytes unread; nothing more will come.
                self.readClosed = true
            }
        }
        var replies: [Registry_V1_Response] = []
        while self.incoming.count - self.incomingOffset >= 4 {
            let base = self.incomingOffset
            let length = self.incoming[base..<base + 4].reduce(0) { $0 << 8 | Int($1) }
            guard length <= self.maximumFrame else { throw CrashLoopError("reply frame of \(length) bytes: the stream is garbled") }
            guard self.incoming.count - base - 4 >= length else { break }
            let body = self.incoming[(base + 4)..<(base + 4 + length)]
            do {
                replies.append(try Registry_V1_Response(serializedBytes: Array(body)))
            } catch {
                throw CrashLoopError("undecodable reply frame of \(length) bytes: \(error)")
            }
            self.incomingOffset = base + 4 + length
        }
        if self.incomingOffset > 0 && self.incomingOffset * 2 >= self.incoming.count {
            self.incoming.removeFirst(self.incomingOffset)
            self.incomingOffset = 0
        }
        return replies
    }

    /// Bytes of a reply that had begun to arrive when the connection closed.
    var truncatedReplyBytes: Int { self.incoming.count - self.incomingOffset }

    static func errorText() -> String { String(cString: strerror(errno)) }
}

enum Poll {
    /// Waits until one of the connections can be read (or written, if it has output), or the timeout.
    static func wait(_ connections: [FrameConnection], milliseconds: Int32) {
        var fds = connections.filter { !$0.readClosed || $0.hasPendingOutput }.map { connection in
            pollfd(fd: connection.fd, events: Int16(POLLIN) | (connection.hasPendingOutput ? Int16(POLLOUT) : 0), revents: 0)
        }
        if fds.isEmpty {
            usleep(useconds_t(max(0, milliseconds)) * 1000)
            return
        }
        _ = poll(&fds, nfds_t(fds.count), milliseconds)
    }
}

extension FrameConnection {
    /// Sends `requests` pipelined, at most `window` unanswered, and returns their replies in order.
    /// For the checks after a restart, where every request must be answered.
    func exchange(_ requests: [Registry_V1_Request], window: Int = 32, timeoutSeconds: Double = 120) throws -> [Registry_V1_Response] {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .milliseconds(Int64(timeoutSeconds * 1000)))
        var replies: [Registry_V1_Response] = []
        replies.reserveCapacity(requests.count)
        var sent = 0
        while replies.count < requests.count {
            while sent < requests.count && sent - replies.count < window {
                try self.enqueue(requests[sent])
                sent += 1
            }
            self.flush()
            for reply in try self.receive() {
                guard replies.count < sent else { throw CrashLoopError("a reply (id \(reply.id)) to no request") }
                let expected = requests[replies.count].id
                guard reply.id == expected else { throw CrashLoopError("reply id \(reply.id) where \(expected) was due (out of order)") }
                replies.append(reply)
            }
            if replies.count == requests.count { break }
            guard !self.readClosed else {
                throw CrashLoopError(
                    "the daemon closed the connection with \(requests.count - replies.count) of \(requests.count) requests unanswered")
            }
            guard clock.now < deadline else { throw CrashLoopError("no reply within \(timeoutSeconds) s") }
            Poll.wait([self], milliseconds: 100)
        }
        return replies
    }

    /// One request, one reply.
    func call(_ request: Registry_V1_Request) throws -> Registry_V1_Response {
        try self.exchange([request])[0]
    }
}
