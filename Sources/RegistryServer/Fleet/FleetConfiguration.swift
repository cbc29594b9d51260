import Glibc
import RegistryFleet
import RegistryModel

extension ServerConfiguration {
    /// The `fleet` section checked, with the fleet key and the database password read (nil: no
    /// fleet, the daemon is standalone). The key is required: without it no node could read what
    /// another wrote, and templates would reach the database in the clear.
    /// - Throws: ``ConfigurationError`` listing every problem of the section.
    public func fleetSettings() throws(ConfigurationError) -> FleetSettings? {
        guard let fleet = self.fleet else { return nil }
        var problems: [String] = []
        var location: FleetLocation?
        do {
            location = try FleetLocation(url: fleet.url)
        } catch {
            problems.append("fleet.url: \(error.problem)")
        }
        if !Self.isNodeName(fleet.node) {
            problems.append("fleet.node must be 1 to 64 letters, digits, '.', '_' or '-' (a name unique in the fleet)")
        }
        let credentials = getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) }
        func credential(_ name: String) -> String? {
            credentials.map { "\($0)/\(name)" }.flatMap { Glibc.access($0, R_OK) == 0 ? $0 : nil }
        }
        var key: [UInt8]?
        if let path = fleet.keyFile ?? credential("fleet-key") {
            do {
                var material = try Self.readKey(path: path)
                defer { KeyMaterial.wipe(&material) }
                key = try KeyMaterial.keyBytes(material)
            } catch {
                problems.append("\(fleet.keyFile == nil ? "the fleet-key credential" : "fleet.keyFile"): \(error.message)")
            }
        } else {
            problems.append(
                "fleet mode needs the fleet key: fleet.keyFile (or the systemd credential fleet-key), the same 32 bytes or 64 hexadecimal "
                    + "characters on every node")
        }
        var password: String?
        if let path = fleet.passwordFile ?? credential("fleet-password") {
            switch Self.readRegularFile(path, maximumBytes: 1024, truncating: false) {
            case .success(let bytes):
                // One line; the newline an editor adds is not part of it.
                var text = String(decoding: bytes, as: UTF8.self)
                while text.last == "\n" || text.last == "\r" { text.removeLast() }
                password = text
            case .failure(.system(let reason)): problems.append("cannot read the fleet password file \(path): \(reason)")
            case .failure(.notRegular): problems.append("the fleet password file \(path) is not a regular file")
            case .failure(.tooLarge): problems.append("the fleet password file \(path) holds more than 1024 bytes")
            }
        }
        let compaction = fleet.compactionSeconds ?? FleetSettings.defaultCompactionSeconds
        if !(1...86_400).contains(compaction) { problems.append("fleet.compactionSeconds must be within 1...86400 (a day)") }
        let retention = fleet.retentionSeconds ?? FleetSettings.defaultRetentionSeconds
        if !(1...31_536_000).contains(retention) { problems.append("fleet.retentionSeconds must be within 1...31536000 (a year)") }
        guard problems.isEmpty, let location, let key else { throw ConfigurationError(problems.joined(separator: "\n")) }
        return FleetSettings(
            location: location, node: fleet.node, key: key, password: password, compactionInterval: .seconds(compaction),
            retention: .seconds(retention))
    }

    static func isNodeName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }
}
