import Glibc
import RegistryClient

/// The daemon's socket could not be connected to: the client's error, with what to do about it
/// (the lines after `registryctl: UNREACHABLE: …`). When registryctl chose the socket itself, the
/// lines name every path it looks at and what each is; the hints name the socket's real group.
struct SocketUnreachable: Error {
    let error: RegistryClientError
    /// Neither `--socket` nor `REGISTRYD_SOCKET` named the socket.
    let implicit: Bool

    init(_ error: RegistryClientError, implicit: Bool) {
        self.error = error
        self.implicit = implicit
    }

    /// What to do, one line each.
    var hint: [String] {
        guard case .unreachable(let path, let reason) = self.error else { return [] }
        var lines: [String] = []
        if self.implicit {
            let tried = [GlobalOptions.defaultSocketPath, GlobalOptions.systemSocketPath].map { "\($0) (\(Self.state(of: $0)))" }
            lines.append("without --socket or REGISTRYD_SOCKET registryctl uses \(tried.joined(separator: ", else "))")
        }
        switch reason {
        case String(cString: strerror(EACCES)):
            lines += Self.permissionHint(socketPath: path)
        case String(cString: strerror(ECONNREFUSED)):
            lines.append("the socket file is there but no registryd listens on it (a daemon that was killed leaves it):")
            lines.append("start registryd (systemctl start registryd), or name the running daemon's socket with --socket")
        case String(cString: strerror(ENOENT)):
            lines.append("no registryd has made this socket: start one (systemctl start registryd, or registryd --socket PATH),")
            lines.append("or name the running daemon's socket with --socket PATH or REGISTRYD_SOCKET")
        default:
            break
        }
        return lines
    }

    /// What is at `path`, in a word or two: a socket, missing, not a socket.
    static func state(of path: String) -> String {
        var info = stat()
        guard lstat(path, &info) == 0 else { return errno == ENOENT ? "missing" : String(cString: strerror(errno)) }
        return info.st_mode & S_IFMT == S_IFSOCK ? "a socket" : "not a socket"
    }

    /// What to do when the socket refused this user: the group that may use it, and how to join;
    /// for a socket of group root, which no user should join for this, how the installed service
    /// gives it a group of its own.
    static func permissionHint(socketPath: String) -> [String] {
        var info = stat()
        guard stat(socketPath, &info) == 0 else { return [] }
        let group = getgrgid(info.st_gid).map { String(cString: $0.pointee.gr_name) } ?? "\(info.st_gid)"
        guard info.st_gid != 0 else {
            return [
                "the socket belongs to group root: run registryctl as root, or run registryd with a group of its own",
                "for its socket (the installed service's socket is group registryd: systemctl start registryd.socket)",
            ]
        }
        return [
            "the socket is for the members of group '\(group)'; add this user (usermod -aG \(group) USER)",
            "and log in again, or run registryctl as a member (sudo -g \(group) registryctl ...)",
        ]
    }
}
