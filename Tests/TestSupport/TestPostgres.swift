import Glibc

/// A PostgreSQL server of its own for one test: Debian's `initdb` and `pg_ctl` (as the `postgres`
/// user, which needs root to switch to) on a fresh directory, listening only on a Unix socket in a
/// private directory (no TCP port to collide with another test or a system cluster), trust
/// authentication, `fsync` kept on. ``stop(immediately:)`` stops it (immediately: as a crash would).
public final class TestPostgres: Sendable {
    /// The temporary directory holding the data directory, the socket directory and the logs.
    public let base: String
    public let directory: String
    /// Where the server's socket file is (`.s.PGSQL.5432`).
    public let socketDirectory: String
    public let port: Int
    /// The TCP addresses it listens on besides its socket ('' for none).
    public let listenAddresses: String
    private let binaries: String

    /// Why the server could not be started.
    public struct Refused: Error, CustomStringConvertible {
        public let description: String
    }

    /// Initialises and starts the server, and creates `database` (owned by the `postgres` role).
    /// - Throws: ``Refused`` saying which step failed and what it printed (not root; PostgreSQL not
    ///   installed: `tools/ensure-deps --test` installs it).
    /// A test that needs the server fails with this when it cannot have one: it never passes without
    /// having looked.
    /// - Parameter tcp: addresses to listen on (`listen_addresses`) and the network whose clients
    ///   it trusts there (a `pg_hba.conf` line): for clients in other network namespaces.
    public init(database: String = "registry", port: Int = 5432, tcp: (addresses: String, trusted: String)? = nil) throws(Refused) {
        guard geteuid() == 0 else {
            throw Refused(description: "the test PostgreSQL runs as the postgres user, which only root can switch to: run the tests as root")
        }
        guard let binaries = Self.binaries() else {
            throw Refused(description: "PostgreSQL's server programs are not installed (Debian: apt-get install postgresql)")
        }
        self.binaries = binaries
        self.port = port
        self.listenAddresses = tcp?.addresses ?? ""
        let base = TemporaryDirectory("registry-pg").path
        self.base = base
        self.directory = base + "/data"
        self.socketDirectory = base + "/socket"
        // The server refuses to run as root: its files belong to `postgres`, and /tmp/... is searchable.
        try Self.run("mkdir -p '\(self.directory)' '\(self.socketDirectory)' && chown -R postgres:postgres '\(base)' && chmod 0755 '\(base)'", base)
        try Self.run(
            "runuser -u postgres -- '\(binaries)/initdb' -D '\(self.directory)' -A trust -U postgres --no-sync -E UTF8 --locale=C.UTF-8",
            base)
        if let tcp {
            try Self.run("echo 'host all all \(tcp.trusted) trust' >>'\(self.directory)/pg_hba.conf'", base)
        }
        try Self.run(self.startCommand, base)
        do {
            try Self.run(
                "runuser -u postgres -- psql -h '\(self.socketDirectory)' -p \(self.port) -U postgres -v ON_ERROR_STOP=1 -q "
                    + "-c 'CREATE DATABASE \(database)'", base)
        } catch {
            self.remove()
            throw error
        }
    }

    /// A streaming standby of `primary`: a `pg_basebackup` of it (`-R`: it follows the primary over
    /// its socket, through a replication slot of its own: ``slotName()``), started on a data and socket directory of its own. ``promote()`` makes it the
    /// primary, as a failover does.
    /// Listening on `port` and on the primary's TCP addresses, when it has any.
    public init(standbyOf primary: TestPostgres, port: Int? = nil) throws(Refused) {
        self.binaries = primary.binaries
        self.port = port ?? primary.port
        self.listenAddresses = primary.listenAddresses
        let base = TemporaryDirectory("registry-pg-standby").path
        self.base = base
        self.directory = base + "/data"
        self.socketDirectory = base + "/socket"
        try Self.run("mkdir -p '\(self.socketDirectory)' && chown -R postgres:postgres '\(base)' && chmod 0755 '\(base)'", base)
        do {
            try Self.run(
                "runuser -u postgres -- '\(self.binaries)/pg_basebackup' -h '\(primary.socketDirectory)' -p \(primary.port) -U postgres "
                    + "-D '\(self.directory)' -R -X stream -C -S \(Self.slotName()) --checkpoint=fast --no-sync", base)
            try Self.run(self.startCommand, base)
        } catch {
            self.remove()
            throw error
        }
    }

    /// A new replication slot's name. A standby streams through a slot of its own on its primary
    /// (`pg_basebackup -C -S`, written into its settings by `-R`): without one the primary removes WAL
    /// a standby that fell behind (the primary restarted under load, again and again) still needs,
    /// the standby never streams again, and with `synchronous_standby_names` every commit waits
    /// for it for good (the fleet fault loop's fleets stopped writing so for minutes).
    static func slotName() -> String { "standby_\(UInt32.random(in: 0...UInt32.max))" }

    /// Makes this server, a primary that failed (or was failed over from), a streaming standby of
    /// `primary`, the server promoted in its place, on the same directories (its socket stays where
    /// clients look for it): its data is replaced by a `pg_basebackup` of `primary`, as an operator
    /// re-clones a failed primary after a failover.
    public func rebuild(asStandbyOf primary: TestPostgres) throws(Refused) {
        self.remove(keepingBase: true)
        try Self.run(
            "runuser -u postgres -- '\(self.binaries)/pg_basebackup' -h '\(primary.socketDirectory)' -p \(primary.port) -U postgres "
                + "-D '\(self.directory)' -R -X stream -C -S \(Self.slotName()) --checkpoint=fast --no-sync", self.base)
        try Self.run(self.startCommand, self.base)
    }

    /// Lets commits go on without a standby (`synchronous_standby_names` emptied), as a failover
    /// manager does once the old primary is gone, until ``requireSynchronousStandby()`` again.
    public func allowAsynchronousCommits() {
        _ = self.psql("ALTER SYSTEM SET synchronous_standby_names = ''")
        _ = self.psql("SELECT pg_reload_conf()")
    }

    /// Makes every commit on this primary wait until a standby has it (`synchronous_standby_names`):
    /// with it, a failover loses no acknowledged commit.
    /// Returns once a standby streams as the synchronous one (or after 60 s: until then commits
    /// wait for a standby that is not there, and the caller finds out).
    public func requireSynchronousStandby() {
        _ = self.psql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        _ = self.psql("SELECT pg_reload_conf()")
        for _ in 0..<600 {
            if self.replication.contains("streaming sync") { return }
            usleep(100_000)
        }
    }

    /// The primary's standbys as `pg_stat_replication` shows them: state and sync state, a line each.
    public var replication: String { self.psql("SELECT state || ' ' || sync_state FROM pg_stat_replication") }

    /// Promotes this standby to primary (`pg_ctl promote`, waiting until it accepts writes).
    public func promote() {
        _ = system("runuser -u postgres -- '\(self.binaries)/pg_ctl' -D '\(self.directory)' -w -t 60 promote >/dev/null 2>&1")
    }

    /// A fleet URL reaching `database` on this server as `postgres`.
    public func url(database: String = "registry") -> String {
        "postgresql://postgres@/\(database)?host=\(self.socketDirectory)&port=\(self.port)"
    }

    /// Runs `sql` with psql (as `postgres`), returning what it printed (unaligned, tuples only).
    public func psql(_ sql: String, database: String = "registry") -> String {
        let output = self.base + "/psql.out"
        let escaped = sql.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''")
        _ = system(
            "runuser -u postgres -- psql -h '\(self.socketDirectory)' -p \(self.port) -U postgres -d \(database) -At -c '\(escaped)' >'\(output)' 2>&1"
        )
        var text = Substring(readFileText(output))
        while text.last == "\n" || text.last == " " { text.removeLast() }
        return String(text)
    }

    /// Starts the server again after ``stop(immediately:)``, on the same directory and socket.
    public func start() {
        _ = system(self.startCommand + " >/dev/null 2>&1")
    }

    /// pg_ctl starting the server on its directory, socket, port and addresses, waiting until it answers.
    private var startCommand: String {
        "runuser -u postgres -- '\(self.binaries)/pg_ctl' -D '\(self.directory)' -l '\(self.base)/server.log' -w -t 60 "
            + "-o \"-c listen_addresses='\(self.listenAddresses)' -p \(self.port) -k '\(self.socketDirectory)'\" start"
    }

    /// Stops the server: `fast` (sessions ended, a clean shutdown), or `immediate` (as a crash).
    public func stop(immediately: Bool = false) {
        _ = system(
            "runuser -u postgres -- '\(self.binaries)/pg_ctl' -D '\(self.directory)' -m \(immediately ? "immediate" : "fast") -w stop >/dev/null 2>&1"
        )
    }

    /// Stops the server and removes its files. Should pg_ctl fail to stop it, the postmaster (the
    /// first line of `postmaster.pid`, which a clean stop removes) is killed: no test leaves a server.
    public func remove() {
        self.remove(keepingBase: false)
    }

    /// ``remove()``; when `keepingBase`, only the data directory goes (the socket directory and the
    /// logs stay, for ``rebuild(asStandbyOf:)``).
    private func remove(keepingBase: Bool) {
        self.stop(immediately: true)
        if let pid = readFileText(self.directory + "/postmaster.pid").split(separator: "\n").first.flatMap({ Int32($0) }), pid > 0 {
            kill(pid, SIGKILL)
        }
        _ = system("rm -rf '\(keepingBase ? self.directory : self.base)'")
    }

    /// The newest installed server's program directory (`/usr/lib/postgresql/N/bin`).
    static func binaries() -> String? {
        let versions = (directoryEntries("/usr/lib/postgresql") ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "/usr/lib/postgresql/\($0)/bin" }.first { access($0 + "/initdb", X_OK) == 0 }
    }

    private static func run(_ command: String, _ base: String) throws(Refused) {
        let log = base + "/step.log"
        let status = system("(\(command)) >'\(log)' 2>&1")
        guard status == 0 else {
            let said = readFileText(log).split(separator: "\n").suffix(5).joined(separator: "; ")
            // pg_ctl only says to look at the server's log, which goes with the directory: its end
            // is the reason (a standby that found no consistent state, a port in use, ...).
            let server = readFileText(base + "/server.log").split(separator: "\n").suffix(8).joined(separator: "; ")
            throw Refused(
                description: "starting a test PostgreSQL failed (status \(status >> 8)) at: \(command): \(said)"
                    + (server.isEmpty ? "" : "; the server's log ends: \(server)"))
        }
    }
}
