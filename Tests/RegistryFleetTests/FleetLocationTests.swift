import RegistryFleet
import Testing

/// The fleet URL as operators write it: TCP, a Unix socket directory two ways, and every refusal
/// saying what to write instead — never repeating a password.
@Suite struct FleetLocationTests {
    @Test func tcpWithAndWithoutAPort() throws {
        let full = try FleetLocation(url: "postgresql://registry@db.example:6432/faces")
        #expect(full == FleetLocation(user: "registry", database: "faces", endpoint: .tcp(host: "db.example", port: 6432)))
        #expect(try FleetLocation(url: "postgres://registry@10.0.0.5/faces").endpoint == .tcp(host: "10.0.0.5", port: 5432))
        #expect(try FleetLocation(url: "postgresql://registry@[fd00::5]:5433/faces").endpoint == .tcp(host: "fd00::5", port: 5433))
        #expect(full.description == "postgresql://registry@db.example:6432/faces")
    }

    @Test func aUnixSocketDirectoryEitherWay() throws {
        let query = try FleetLocation(url: "postgresql://registry@/faces?host=/run/postgresql")
        #expect(query.endpoint == .unixSocket(directory: "/run/postgresql", port: 5432))
        #expect(query.socketPath == "/run/postgresql/.s.PGSQL.5432")
        let encoded = try FleetLocation(url: "postgresql://registry@%2Frun%2Fpostgresql:5433/faces")
        #expect(encoded.endpoint == .unixSocket(directory: "/run/postgresql", port: 5433))
        #expect(try FleetLocation(url: "postgresql://registry@/faces?host=/tmp/pg&port=6000").socketPath == "/tmp/pg/.s.PGSQL.6000")
        #expect(try FleetLocation(url: query.description) == query)
    }

    /// A primary and its standbys, as libpq writes them: after the @ (each host with its port or
    /// not), or in ?host= with one port for all or one each; target_session_attrs=read-write is
    /// what a node does anyway.
    @Test func severalServers() throws {
        let tcp = try FleetLocation(url: "postgresql://registry@db-1:6432,db-2,[fd00::7]:5433/faces?target_session_attrs=read-write")
        #expect(tcp.endpoints == [.tcp(host: "db-1", port: 6432), .tcp(host: "db-2", port: 5432), .tcp(host: "fd00::7", port: 5433)])
        #expect(tcp.description == "postgresql://registry@db-1:6432,db-2:5432,[fd00::7]:5433/faces")
        #expect(try FleetLocation(url: tcp.description) == tcp)
        let sockets = try FleetLocation(url: "postgresql://registry@/faces?host=/run/a,/run/b&port=5432,5433")
        #expect(sockets.endpoints == [.unixSocket(directory: "/run/a", port: 5432), .unixSocket(directory: "/run/b", port: 5433)])
        #expect(sockets.endpoints.map(\.socketPath) == ["/run/a/.s.PGSQL.5432", "/run/b/.s.PGSQL.5433"])
        #expect(try FleetLocation(url: sockets.description) == sockets)
        let onePort = try FleetLocation(url: "postgresql://registry@/faces?host=/run/a,db-2&port=6000&target_session_attrs=primary")
        #expect(onePort.endpoints == [.unixSocket(directory: "/run/a", port: 6000), .tcp(host: "db-2", port: 6000)])
        #expect(try FleetLocation(url: onePort.description) == onePort)
        let eight = (1...8).map { "db-\($0)" }.joined(separator: ",")
        #expect(try FleetLocation(url: "postgresql://registry@\(eight)/faces").endpoints.count == 8)
    }

    /// A socket directory of 87 bytes leaves room for the socket file's name within a Unix socket
    /// path (108 bytes with its NUL, the port at most 5 digits); 88 is refused, saying why.
    @Test func theSocketDirectoryIsBoundedByTheSocketPath() throws {
        let at = "/" + String(repeating: "d", count: 86)
        #expect(try FleetLocation(url: "postgresql://registry@/faces?host=\(at)&port=65535").socketPath?.utf8.count == 87 + 15)
        do {
            _ = try FleetLocation(url: "postgresql://registry@/faces?host=\(at)d")
            Issue.record("an 88-byte socket directory was accepted")
        } catch {
            #expect(error.description.contains("at most 87 bytes"), "\(error)")
        }
    }

    @Test(arguments: [
        ("mysql://registry@db/faces", "postgresql://"),
        ("postgresql://db/faces", "no user"),
        ("postgresql://registry:secret@db/faces", "password"),
        ("postgresql://registry@db", "no database"),
        ("postgresql://registry@db/", "database name"),
        ("postgresql://registry@db:x/faces", "port is not a number"),
        ("postgresql://registry@db:70000/faces", "within 1-65535"),
        ("postgresql://registry@/faces", "no host"),
        ("postgresql://registry@db/faces?sslmode=require", "'sslmode' is not supported"),
        ("postgresql://registry@db/faces?password=secret", "'password' is not supported"),
        ("postgresql://registry@db/faces?host=/run/pg", "host is given twice"),
        ("postgresql://registry@db:5432/faces?port=5433", "port is given twice"),
        ("postgresql://registry@db/fa%zzces", "percent-encoding"),
        ("postgresql://registry@a,,b/faces", "a host is empty"),
        ("postgresql://registry@/faces?host=/run/a,", "a host in ?host= is empty"),
        ("postgresql://registry@/faces?host=/a,/b,/c&port=1,2", "3 hosts: one for all, or one each"),
        ("postgresql://registry@a,b,c,d,e,f,g,h,i/faces", "9 servers; at most 8"),
        ("postgresql://registry@a,b/faces?target_session_attrs=any", "target_session_attrs must be read-write"),
        ("postgresql://registry@a:1,b:x/faces", "port is not a number"),
    ])
    func refusals(url: String, says: String) {
        do {
            _ = try FleetLocation(url: url)
            Issue.record("accepted \(url)")
        } catch {
            #expect(error.description.contains(says), "\(error)")
            #expect(!error.description.contains("secret"), "a refusal repeats the password: \(error)")
        }
    }
}
