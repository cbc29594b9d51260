import Glibc
import Logging

/// Checks, at start, that the process may open enough files for `maximumConnections`.
///
/// Each connection is a descriptor; beyond the limit `accept` fails and clients wait unanswered.
/// The soft limit is raised towards the hard one when it is too low (the common default soft limit
/// is 1024); if even the hard limit is too low, the daemon refuses to start and says so.
enum FileDescriptorLimit {
    /// Descriptors the daemon needs besides its connections: the store, its lock, the listening
    /// socket, the event loops' epoll and event descriptors, systemd's sockets, standard streams.
    static let reserve = 64

    /// RLIM_INFINITY (`~0`; the C macro does not import).
    private static let unlimited = rlim_t.max

    /// What ``ensure(connections:logger:)`` would refuse, without changing any limit: the hard limit
    /// (which the soft one can be raised to) is too low. For `--check-config`.
    static func problem(connections: Int) -> String? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_max != Self.unlimited else { return nil }
        return Int(limit.rlim_max) >= connections + Self.reserve ? nil : Self.refusal(connections: connections, allowed: limit.rlim_max)
    }

    private static func refusal(connections: Int, allowed: rlim_t) -> String {
        "limits.maximumConnections is \(connections), but the process may open only \(allowed) files "
            + "(\(Self.reserve) are needed besides connections): lower maximumConnections or raise the limit "
            + "(LimitNOFILE= in the unit, ulimit -n)"
    }

    static func ensure(connections: Int, logger: Logger) throws(ConfigurationError) {
        let needed = connections + Self.reserve
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        if limit.rlim_cur != Self.unlimited && Int(limit.rlim_cur) < needed {
            let raised = limit.rlim_max == Self.unlimited ? rlim_t(needed) : min(limit.rlim_max, rlim_t(needed))
            var wanted = limit
            wanted.rlim_cur = raised
            if raised > limit.rlim_cur && setrlimit(Int32(RLIMIT_NOFILE.rawValue), &wanted) == 0 {
                logger.info("raised the open-file limit", metadata: ["from": "\(limit.rlim_cur)", "to": "\(raised)"])
                limit.rlim_cur = raised
            }
        }
        guard limit.rlim_cur == Self.unlimited || Int(limit.rlim_cur) >= needed else {
            throw ConfigurationError(Self.refusal(connections: connections, allowed: limit.rlim_cur))
        }
    }
}
