import Glibc
import RegistryEngine
import RegistryModel
import RegistryProtocol

/// `struct ucred` of SO_PEERCRED (Glibc's Swift module hides it behind _GNU_SOURCE): same layout.
struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Who is on the other end of a connection, from the socket itself (SO_PEERCRED): the kernel's
/// word, not the client's.
public struct Peer: Sendable, Hashable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// The user's primary and supplementary groups (from the user database).
    public var groups: Set<UInt32>

    public init(uid: UInt32, gid: UInt32, pid: Int32, groups: Set<UInt32>) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.groups = groups
    }

    /// The peer of a connected Unix socket, with its groups looked up by user name.
    init(credentials: PeerCredentials) {
        var groups: Set<UInt32> = [credentials.gid]
        var record = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        if getpwuid_r(credentials.uid, &record, &buffer, buffer.count, &result) == 0, let user = result {
            var count: Int32 = 64
            var list = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(user.pointee.pw_name, credentials.gid, &list, &count) >= 0 {
                groups.formUnion(list.prefix(Int(count)))
            }
        }
        self.init(uid: credentials.uid, gid: credentials.gid, pid: credentials.pid, groups: groups)
    }
}

/// The rights an operation needs (PROTOCOL.md); each operation names its own (`Operations/`).
public enum OperationClass: String, Sendable, CaseIterable {
    /// identify, authenticate.
    case identify
    /// register (and enrolling one's liveness profile).
    case enrol
    /// everything that reads who is enrolled or changes the store otherwise: listing identifiers and
    /// templates, deletion, export, import, backup, configuration, verification.
    case admin
}

/// Which peers may do what, per gallery and operation class. Principals are `uid:N`, `gid:N`,
/// `user:NAME` or `group:NAME` (names resolved when the policy is built); a gallery's rules come
/// from its own entry, else from the `*` entry.
///
/// Out of the box (no `access` in the configuration): root, the daemon's own user and the group
/// `registryd-admin` may do everything everywhere; the group `registryd` (the socket's group under
/// systemd) may identify and enrol in `default`.
public struct AccessPolicy: Sendable {
    /// Principals per class, per gallery name ("*": any gallery without its own entry).
    private var rules: [String: [OperationClass: Set<Principal>]]

    enum Principal: Hashable, Sendable {
        case uid(UInt32)
        case gid(UInt32)
    }

    /// Builds a policy from the configuration's `access` section (nil: the default policy).
    /// - Throws: ``ConfigurationError`` for an unknown class, principal form, user or group.
    public init(_ configuration: [String: [String: [String]]]?, daemonUID: UInt32 = getuid()) throws(ConfigurationError) {
        guard let configuration else {
            var everything: Set<Principal> = [.uid(0), .uid(daemonUID)]
            if let admins = Self.groupId("registryd-admin") { everything.insert(.gid(admins)) }
            var apps: Set<Principal> = everything
            if let group = Self.groupId("registryd") { apps.insert(.gid(group)) }
            self.rules = [
                "*": [.identify: everything, .enrol: everything, .admin: everything],
                GalleryConfiguration.defaultName: [.identify: apps, .enrol: apps, .admin: everything],
            ]
            return
        }
        self.rules = [:]
        // Every problem, each with its place in the file: an operator fixes them all in one pass.
        var problems: [String] = []
        for (gallery, classes) in configuration.sorted(by: { $0.key < $1.key }) {
            var entry: [OperationClass: Set<Principal>] = [:]
            for (name, principals) in classes.sorted(by: { $0.key < $1.key }) {
                guard let operationClass = OperationClass(rawValue: name) else {
                    problems.append("access[\"\(gallery)\"]: unknown operation class '\(name)' (identify, enrol or admin)")
                    continue
                }
                var allowed = Set<Principal>()
                for (index, text) in principals.enumerated() {
                    do {
                        allowed.insert(try Self.principal(text))
                    } catch {
                        problems.append("access[\"\(gallery)\"].\(name)[\(index)]: \(error.description)")
                    }
                }
                entry[operationClass] = allowed
            }
            self.rules[gallery] = entry
        }
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "\n")) }
    }

    /// Whether `peer` may perform an operation of `operationClass` in `gallery` ("" = every gallery).
    ///
    /// An operation on the whole store (backup, verify, set_encryption_key) touches every gallery, so
    /// it needs the right in every entry: the `*` entry (every gallery without one of its own) and
    /// each gallery's own. An admin of `*` whom a gallery's entry leaves out may not copy, check or
    /// re-key the store that holds that gallery. (Entries of galleries not defined in the store count
    /// too: the policy does not know the store's galleries, and a refusal is the safe side.)
    public func allows(_ peer: Peer, _ operationClass: OperationClass, gallery: String) -> Bool {
        guard gallery.isEmpty else { return Self.holds(peer, (self.rules[gallery] ?? self.rules["*"])?[operationClass]) }
        return self.rules.values.allSatisfy { Self.holds(peer, $0[operationClass]) } && self.rules["*"] != nil
    }

    /// Whether `peer` holds `operationClass` in at least one entry: enough to read the audit trail,
    /// which then shows only the entries of the galleries it holds the right in
    /// (``allows(_:_:gallery:)`` per entry).
    public func allowsSomewhere(_ peer: Peer, _ operationClass: OperationClass) -> Bool {
        self.rules.values.contains { Self.holds(peer, $0[operationClass]) }
    }

    private static func holds(_ peer: Peer, _ principals: Set<Principal>?) -> Bool {
        guard let principals else { return false }
        if principals.contains(.uid(peer.uid)) { return true }
        return peer.groups.contains { principals.contains(.gid($0)) }
    }

    private static func principal(_ text: String) throws(ConfigurationError) -> Principal {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ConfigurationError("'\(text)' is not uid:N, gid:N, user:NAME or group:NAME") }
        switch parts[0] {
        case "uid": if let id = UInt32(parts[1]) { return .uid(id) }
        case "gid": if let id = UInt32(parts[1]) { return .gid(id) }
        case "user":
            if let user = getpwnam(parts[1]) { return .uid(user.pointee.pw_uid) }
            throw ConfigurationError("no user '\(parts[1])'")
        case "group":
            if let id = Self.groupId(parts[1]) { return .gid(id) }
            throw ConfigurationError("no group '\(parts[1])'")
        default: break
        }
        throw ConfigurationError("'\(text)' is not uid:N, gid:N, user:NAME or group:NAME")
    }

    private static func groupId(_ name: String) -> UInt32? {
        getgrnam(name).map { $0.pointee.gr_gid }
    }
}
