/// Where a fleet's record of truth is: a PostgreSQL URL, as `registryd --fleet URL` and `fleet.url`
/// take it (docs/fleet.md).
///
///     postgresql://USER@HOST:PORT/DB                 TCP (PORT 5432 when left out)
///     postgresql://USER@/DB?host=/run/postgresql     a Unix socket in that directory (PORT, or
///     postgresql://USER@%2Frun%2Fpostgresql/DB       ?port=, names its file .s.PGSQL.PORT)
///     postgresql://USER@HOST1:PORT1,HOST2:PORT2/DB   several servers: a primary and its standbys
///     postgresql://USER@/DB?host=/run/a,/run/b&port=5432,5433
///
/// With several servers the node writes to whichever is the primary (libpq's
/// `target_session_attrs=read-write`, which may be written and is what the node always does), and
/// looks for it again when a query fails: after a failover it finds the promoted standby by itself.
///
/// No password in the URL, which ends up in process listings, unit files and logs: it comes from a
/// file or a systemd credential. Parsed strictly: whatever is not understood is refused with what to
/// write instead, never guessed at.
public struct FleetLocation: Sendable, Hashable, CustomStringConvertible {
    public enum Endpoint: Sendable, Hashable {
        case tcp(host: String, port: Int)
        /// The directory holding the server's socket file, and the port that names it.
        case unixSocket(directory: String, port: Int)

        /// The socket file of a Unix-socket endpoint (nil for TCP).
        public var socketPath: String? {
            guard case .unixSocket(let directory, let port) = self else { return nil }
            return directory + "/.s.PGSQL.\(port)"
        }
    }

    public let user: String
    public let database: String
    /// The servers, in the order given (1 to ``maximumServers``).
    public let endpoints: [Endpoint]

    /// Servers a URL may name: a primary and a few standbys.
    public static let maximumServers = 8

    public init(user: String, database: String, endpoint: Endpoint) {
        self.init(user: user, database: database, endpoints: [endpoint])
    }

    public init(user: String, database: String, endpoints: [Endpoint]) {
        self.user = user
        self.database = database
        self.endpoints = endpoints
    }

    /// The first server.
    public var endpoint: Endpoint { self.endpoints[0] }

    /// The socket file of the first server, when it is reached by a Unix socket (nil for TCP).
    public var socketPath: String? { self.endpoint.socketPath }

    /// The URL again, without a password (there is none): safe for logs and `status`.
    public var description: String {
        let tcp = self.endpoints.compactMap { endpoint -> String? in
            guard case .tcp(let host, let port) = endpoint else { return nil }
            return "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        }
        if tcp.count == self.endpoints.count {
            return "postgresql://\(self.user)@\(tcp.joined(separator: ","))/\(self.database)"
        }
        let hosts = self.endpoints.map { endpoint in
            switch endpoint {
            case .tcp(let host, _): host
            case .unixSocket(let directory, _): directory
            }
        }
        let ports = self.endpoints.map { endpoint in
            switch endpoint {
            case .tcp(_, let port), .unixSocket(_, let port): "\(port)"
            }
        }
        return "postgresql://\(self.user)@/\(self.database)?host=\(hosts.joined(separator: ","))&port=\(ports.joined(separator: ","))"
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
        if let unknown = query.keys.sorted().first(where: { !["host", "port", "target_session_attrs"].contains($0) }) {
            throw refuse(
                "the parameter '\(unknown)' is not supported (only host, port and target_session_attrs; the password comes from a file)")
        }
        if let attributes = query["target_session_attrs"], !["read-write", "primary"].contains(attributes) {
            throw refuse("target_session_attrs must be read-write (or primary): a fleet node writes, so it always looks for the primary")
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
        // Hosts after the @, each with its port or not (an IPv6 address is in brackets, so its colons
        // are not the port's), or in ?host= with ?port=: one port for all, or one each.
        var hosts: [String] = []
        var ports: [Int?] = []
        let netloc = rest[..<slash]
        if !netloc.isEmpty {
            for hostPort in netloc.split(separator: ",", omittingEmptySubsequences: false) {
                var host = hostPort
                var port: Int?
                if let colon = hostPort.lastIndex(of: ":"), !hostPort[colon...].contains("]") {
                    guard let number = Int(hostPort[hostPort.index(after: colon)...]) else { throw refuse("the port is not a number") }
                    port = number
                    host = hostPort[..<colon]
                }
                let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : Self.percentDecoded(host)
                guard let name, !name.isEmpty else { throw refuse("a host is empty or not valid percent-encoding") }
                hosts.append(name)
                ports.append(port)
            }
        }
        if let given = query["host"] {
            guard hosts.isEmpty else { throw refuse("the host is given twice") }
            hosts = given.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard hosts.allSatisfy({ !$0.isEmpty }) else { throw refuse("a host in ?host= is empty") }
            ports = Array(repeating: nil, count: hosts.count)
        }
        guard !hosts.isEmpty else { throw refuse("it names no host: a name or address, or ?host=/directory for a Unix socket") }
        guard hosts.count <= Self.maximumServers else { throw refuse("it names \(hosts.count) servers; at most \(Self.maximumServers)") }
        if let given = query["port"] {
            guard ports.allSatisfy({ $0 == nil }) else { throw refuse("the port is given twice") }
            let numbers = given.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
            guard numbers.allSatisfy({ $0 != nil }) else { throw refuse("the port is not a number") }
            guard numbers.count == 1 || numbers.count == hosts.count else {
                throw refuse("?port= gives \(numbers.count) ports for \(hosts.count) hosts: one for all, or one each")
            }
            ports = numbers.count == 1 ? Array(repeating: numbers[0], count: hosts.count) : numbers
        }
        var endpoints: [Endpoint] = []
        for (host, port) in zip(hosts, ports) {
            let resolvedPort = port ?? 5432
            guard (1...65535).contains(resolvedPort) else { throw refuse("the port \(resolvedPort) is not within 1-65535") }
            if host.hasPrefix("/") {
                guard !host.contains("\0"), host.utf8.count + 20 <= 107 else {
                    throw refuse("the socket directory is too long for a Unix socket path (at most 87 bytes)")
                }
                endpoints.append(.unixSocket(directory: host, port: resolvedPort))
            } else {
                endpoints.append(.tcp(host: host, port: resolvedPort))
            }
        }
        self.user = user
        self.database = database
        self.endpoints = endpoints
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
