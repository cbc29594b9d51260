/// Where a fleet's record of truth is: a PostgreSQL URL, as `registryd --fleet URL` and `fleet.url`
/// take it (docs/fleet.md).
///
///     postgresql://USER@HOST:PORT/DB                 TCP (PORT 5432 when left out)
///     postgresql://USER@/DB?host=/run/postgresql     a Unix socket in that directory (PORT, or
///     postgresql://USER@%2Frun%2Fpostgresql/DB       ?port=, names its file .s.PGSQL.PORT)
///
/// No password in the URL, which ends up in process listings, unit files and logs: it comes from a
/// file or a systemd credential. Parsed strictly: whatever is not understood is refused with what to
/// write instead, never guessed at.
public struct FleetLocation: Sendable, Hashable, CustomStringConvertible {
    public enum Endpoint: Sendable, Hashable {
        case tcp(host: String, port: Int)
        /// The directory holding the server's socket file, and the port that names it.
        case unixSocket(directory: String, port: Int)
    }

    public let user: String
    public let database: String
    public let endpoint: Endpoint

    public init(user: String, database: String, endpoint: Endpoint) {
        self.user = user
        self.database = database
        self.endpoint = endpoint
    }

    /// The socket file of a Unix-socket endpoint (nil for TCP).
    public var socketPath: String? {
        guard case .unixSocket(let directory, let port) = self.endpoint else { return nil }
        return directory + "/.s.PGSQL.\(port)"
    }

    /// The URL again, without a password (there is none): safe for logs and `status`.
    public var description: String {
        switch self.endpoint {
        case .tcp(let host, let port):
            let shown = host.contains(":") ? "[\(host)]" : host
            return "postgresql://\(self.user)@\(shown):\(port)/\(self.database)"
        case .unixSocket(let directory, let port):
            return "postgresql://\(self.user)@/\(self.database)?host=\(directory)&port=\(port)"
        }
    }

    /// Parses `url`.
    /// - Throws: ``FleetLocationError`` saying what is wrong and what to write.
    public init(url: String) throws(FleetLocationError) {
        func refuse(_ problem: String) -> FleetLocationError { FleetLocationError(problem: problem) }
        let schemes = ["postgresql://", "postgres://"]
        guard let scheme = schemes.first(where: { url.hasPrefix($0) }) else {
            throw refuse("it must start with postgresql://")
        }
        var rest = Substring(url.dropFirst(scheme.count))
        var query: [String: String] = [:]
        if let mark = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: true) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty else { throw refuse("the parameter '\(pair)' is not NAME=VALUE") }
                guard let value = Self.percentDecoded(parts[1]) else { throw refuse("the parameter '\(parts[0])' is not valid percent-encoding") }
                guard query.updateValue(value, forKey: String(parts[0])) == nil else { throw refuse("the parameter '\(parts[0])' is given twice") }
            }
            rest = rest[..<mark]
        }
        if let unknown = query.keys.sorted().first(where: { !["host", "port"].contains($0) }) {
            throw refuse("the parameter '\(unknown)' is not supported (only host and port; the password comes from a file)")
        }
        guard let at = rest.firstIndex(of: "@") else { throw refuse("it names no user: write postgresql://USER@HOST/DB") }
        let userInfo = rest[..<at]
        guard !userInfo.contains(":") else {
            throw refuse("it holds a password, which would show in process listings and logs: give it in a password file instead")
        }
        guard let user = Self.percentDecoded(userInfo), !user.isEmpty else { throw refuse("the user is empty or not valid percent-encoding") }
        rest = rest[rest.index(after: at)...]
        guard let slash = rest.firstIndex(of: "/") else { throw refuse("it names no database: write postgresql://USER@HOST/DB") }
        guard let database = Self.percentDecoded(rest[rest.index(after: slash)...]), !database.isEmpty, !database.contains("/") else {
            throw refuse("the database name is empty, has a '/' or is not valid percent-encoding")
        }
        var hostPort = rest[..<slash]
        var port: Int?
        // A port after the host (an IPv6 address is in brackets, so its colons are not the port's).
        if let colon = hostPort.lastIndex(of: ":"), !hostPort[colon...].contains("]") {
            guard let number = Int(hostPort[hostPort.index(after: colon)...]) else { throw refuse("the port is not a number") }
            port = number
            hostPort = hostPort[..<colon]
        }
        if let given = query["port"] {
            guard port == nil else { throw refuse("the port is given twice") }
            guard let number = Int(given) else { throw refuse("the port is not a number") }
            port = number
        }
        let resolvedPort = port ?? 5432
        guard (1...65535).contains(resolvedPort) else { throw refuse("the port \(resolvedPort) is not within 1-65535") }
        var host = hostPort.hasPrefix("[") && hostPort.hasSuffix("]") ? String(hostPort.dropFirst().dropLast()) : Self.percentDecoded(hostPort)
        if let given = query["host"] {
            guard host?.isEmpty ?? false else { throw refuse("the host is given twice") }
            host = given
        }
        guard let host, !host.isEmpty else { throw refuse("it names no host: a name or address, or ?host=/directory for a Unix socket") }
        self.user = user
        self.database = database
        if host.hasPrefix("/") {
            guard !host.contains("\0"), host.utf8.count + 20 <= 107 else {
                throw refuse("the socket directory is too long for a Unix socket path (at most 87 bytes)")
            }
            self.endpoint = .unixSocket(directory: host, port: resolvedPort)
        } else {
            self.endpoint = .tcp(host: host, port: resolvedPort)
        }
    }

    /// `text` with `%XX` escapes decoded; nil for a malformed escape or bytes that are not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A fleet URL that cannot be used, and why. It does not repeat the URL, which may hold the password
/// it is refused for.
public struct FleetLocationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let problem: String

    public var description: String { "the fleet URL is not usable: \(self.problem)" }
}
