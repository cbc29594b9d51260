import Glibc

/// CPU time spent by the daemon at the other end of the socket and by this process, read around the
/// measured phase: the figure that does not depend on how many cores the machine has or on who else
/// uses them (on two cores, a load generator's CPU is the daemon's lost throughput). tools/bench sets
/// these beside the same figures for its anchors (redis-server per GET, py-lmdb per commit).
struct ProcessCPU {
    /// The daemon's pid, as the kernel recorded it when the daemon's socket accepted us
    /// (SO_PEERCRED); nil when the socket cannot be reached or the peer is in another pid namespace.
    static func peer(of socketPath: String) -> pid_t? {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard socketPath.utf8.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in socketPath.utf8.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return nil }
        // `struct ucred` (pid, uid, gid), which Glibc's Swift module hides behind _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.pid > 0 else { return nil }
        return credentials.pid
    }

    /// User plus system CPU seconds of process `pid`, all its threads (fields 14 and 15 of
    /// /proc/PID/stat, in clock ticks); nil when it cannot be read.
    static func seconds(of pid: pid_t) -> Double? {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 4096)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let line = String(cString: buffer)
        // The command name (field 2) is in parentheses and may hold spaces: count fields after its ')'.
        guard let close = line.lastIndex(of: ")") else { return nil }
        let fields = line[line.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so field n is fields[n - 3].
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// User plus system CPU seconds of this process so far.
    static func ownSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let seconds = { (time: timeval) in Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    let server: pid_t?
    private let serverStart: Double?
    private let ownStart: Double

    /// Starts the window.
    init(serverSocket: String) {
        self.server = Self.peer(of: serverSocket)
        self.serverStart = self.server.flatMap(Self.seconds(of:))
        self.ownStart = Self.ownSeconds()
    }

    /// The window's CPU seconds: the server's (nil when it could not be read) and this process's.
    func end() -> (server: Double?, own: Double) {
        let serverEnd = self.server.flatMap(Self.seconds(of:))
        let server = self.serverStart.flatMap { start in serverEnd.map { $0 - start } }
        return (server, Self.ownSeconds() - self.ownStart)
    }
}
