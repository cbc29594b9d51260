/// What a manual page says that `--help` does not: the environment, the files of an installation and
/// the related pages. Everything else on the pages comes from the binaries' own help.
struct ManualExtras {
    struct Entry {
        var name: String
        var text: String
    }

    /// Synopsis lines of the top-level page (mdoc macro lines after `.Nm TOOL`, one list per form),
    /// when the help's usage line would not do; only options the tool has may appear (checked).
    var synopses: [[String]]?
    var environment: [Entry]
    var files: [Entry]
    var seeAlso: [Reference]
}

/// Where tools/install put things (its options), for the FILES sections.
struct InstallLayout {
    var prefix = "/usr/local"
    var unitDirectory = "/etc/systemd/system"
    var sysusersDirectory = "/usr/lib/sysusers.d"
    var tmpfilesDirectory = "/etc/tmpfiles.d"

    // Fixed by the units and the tmpfiles entry (systemd/).
    static let systemSocket = "/run/registryd/registryd.sock"
    static let configuration = "/etc/registryd/registryd.json"
    static let data = "/var/lib/registryd"
    static let backups = "/var/lib/registryd-backups"
}

extension ManualExtras {
    static func forTool(_ name: String, layout: InstallLayout) throws -> ManualExtras {
        switch name {
        case "registryctl": return self.registryctl(layout)
        case "registryd": return self.registryd(layout)
        default: throw ManualError(description: "no manual extras for '\(name)' (registryctl or registryd)")
        }
    }

    static let systemdPages = [
        Reference(name: "systemctl", section: 1), Reference(name: "journalctl", section: 1),
        Reference(name: "systemd.socket", section: 5), Reference(name: "systemd.service", section: 5),
    ]

    static func registryctl(_ layout: InstallLayout) -> ManualExtras {
        ManualExtras(
            synopses: nil,
            environment: [
                Entry(
                    name: "REGISTRYD_SOCKET",
                    text: """
                        The daemon's socket when --socket is not given (an empty value counts as unset). The \
                        shell completion of gallery names asks the daemon at this socket too.
                        """)
            ],
            files: [
                Entry(
                    name: "./run/registryd.sock",
                    text: """
                        The socket when neither --socket nor REGISTRYD_SOCKET names one and this file exists \
                        (relative to the current directory: a daemon run from the source tree).
                        """),
                Entry(
                    name: InstallLayout.systemSocket,
                    text: """
                        The system service's socket (registryd.socket), used when neither --socket nor \
                        REGISTRYD_SOCKET names one and ./run/registryd.sock does not exist. Connecting needs \
                        membership of its group, registryd.
                        """),
                Entry(
                    name: InstallLayout.configuration,
                    text: "The daemon's configuration: galleries, access policy, limits (registryd(8)); the galleries command shows what it defines."),
                Entry(
                    name: InstallLayout.backups,
                    text: """
                        Where the system service can write backups: registryctl backup \
                        \(InstallLayout.backups)/NAME, or --into \(InstallLayout.backups) (the daemon writes \
                        the copy; its sandbox lets it write nowhere else).
                        """),
                Entry(
                    name: "\(layout.unitDirectory)/registryd-backup.timer",
                    text: "Runs registryctl backup --into \(InstallLayout.backups) --keep 7 daily (not enabled by default)."),
                Entry(
                    name: "\(layout.unitDirectory)/registryd-metrics.timer",
                    text: "Runs registryctl metrics --output for node_exporter's textfile collector (not enabled by default)."),
                Entry(
                    name: "\(layout.prefix)/share/doc/registryd/README.md",
                    text: "The administrator's guide: access, logs, reload, backups, the sandbox."),
            ],
            seeAlso: [Reference(name: "registryd", section: 8)] + self.systemdPages)
    }

    static func registryd(_ layout: InstallLayout) -> ManualExtras {
        ManualExtras(
            synopses: [
                ["Op Ar options"],
                ["Fl -check-config", "Op Ar options", "Op Ar file"],
                ["Fl -verify-store Ar DIR", "Op Ar options"],
                ["Fl -restore Ar BACKUP", "Op Ar options"],
            ],
            environment: [
                Entry(
                    name: "LISTEN_FDS , LISTEN_PID",
                    text: """
                        Socket activation (sd_listen_fds(3)): the daemon serves the listening socket systemd \
                        hands it as descriptor 3 instead of creating --socket.
                        """),
                Entry(
                    name: "NOTIFY_SOCKET",
                    text:
                        "Where the daemon sends READY=1 once the store is open and the index loaded, STATUS= lines and STOPPING=1 (sd_notify(3), Type=notify)."
                ),
                Entry(
                    name: "WATCHDOG_USEC , WATCHDOG_PID",
                    text: "The watchdog interval (WatchdogSec=): WATCHDOG=1 is sent every half interval while the event loops and the store answer."),
                Entry(
                    name: "CREDENTIALS_DIRECTORY",
                    text:
                        "Without --key-file or keyFile, the key of templates at rest is read from its store-key file when there is one (LoadCredential=store-key:... in the unit)."
                ),
                Entry(
                    name: "JOURNAL_STREAM",
                    text:
                        "When it names the file standard error is open on (systemd.exec(5)), log lines start with a syslog priority and carry no timestamp of their own."
                ),
                Entry(
                    name: "REGISTRY_PREFILTER",
                    text: "off: scans compare every template in float32, without the int8 prefilter (for benchmarks; the answers are the same)."),
            ],
            files: [
                Entry(
                    name: InstallLayout.configuration,
                    text: "The configuration the unit passes as --config; SIGHUP (systemctl reload registryd) re-reads it."),
                Entry(
                    name: InstallLayout.data,
                    text: "The LMDB store (--data in the unit): templates are biometric data, readable by the registryd user alone."),
                Entry(
                    name: InstallLayout.backups,
                    text: "The directory the service may write backups into (registryctl backup, registryd-backup.timer)."),
                Entry(name: InstallLayout.systemSocket, text: "The socket registryd.socket listens on and hands to the daemon."),
                Entry(
                    name: "run/registryd.sock , data",
                    text: "The socket and the store when neither the configuration nor a flag names them (relative to the current directory)."),
                Entry(
                    name: "\(layout.unitDirectory)/registryd.socket , registryd.service",
                    text:
                        "The units: the socket systemd listens on, and the service it starts on the first connection (systemctl enable --now registryd.socket)."
                ),
                Entry(
                    name: "\(layout.unitDirectory)/registryd-metrics.service , registryd-metrics.timer",
                    text: "Write the daemon's metrics for node_exporter's textfile collector (not enabled by default)."),
                Entry(
                    name: "\(layout.unitDirectory)/registryd-backup.service , registryd-backup.timer",
                    text: "A daily backup into \(InstallLayout.backups), keeping the newest 7 (not enabled by default)."),
                Entry(name: "\(layout.sysusersDirectory)/registryd.conf", text: "The registryd user and group (sysusers.d(5))."),
                Entry(
                    name: "\(layout.tmpfilesDirectory)/registryd.conf", text: "The directories above and the configuration's mode (tmpfiles.d(5))."),
                Entry(
                    name: "\(layout.prefix)/share/doc/registryd/README.md",
                    text: "The administrator's guide: access, logs, reload, backups, the sandbox."),
            ],
            seeAlso: [
                Reference(name: "registryctl", section: 1), Reference(name: "sd_listen_fds", section: 3), Reference(name: "sd_notify", section: 3),
                Reference(name: "systemd.exec", section: 5), Reference(name: "sysusers.d", section: 5), Reference(name: "tmpfiles.d", section: 5),
            ] + self.systemdPages)
    }
}
