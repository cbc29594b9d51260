import RegistryProtocol

/// A fleet node's place in its fleet (docs/fleet.md), as `status` and `stats` show it; absent for
/// a standalone daemon.
struct FleetFigures: Encodable, Equatable {
    var node: String
    var fleetId: String
    var appliedPosition: UInt64
    var headPosition: UInt64
    var lagEntries: UInt64
    var lagSeconds: Double
    var databaseReachable: Bool

    init?(_ stats: Registry_V1_StatsResult) {
        guard stats.hasFleet else { return nil }
        let fleet = stats.fleet
        self.node = fleet.node
        self.fleetId = fleet.fleetID
        self.appliedPosition = fleet.appliedPosition
        self.headPosition = fleet.headPosition
        self.lagEntries = fleet.lagEntries
        self.lagSeconds = fleet.lagSeconds
        self.databaseReachable = fleet.databaseReachable
    }

    /// `node door-1, applied 1234, head 1240 (6 behind, 0.02 s), database reachable`.
    var line: String {
        let behind = self.lagEntries == 0 ? "up to date" : "\(self.lagEntries) behind, \(Format.fixed(self.lagSeconds, digits: 2)) s"
        return "node \(self.node), applied \(self.appliedPosition), head \(self.headPosition) (\(behind)), "
            + (self.databaseReachable ? "database reachable" : "database UNREACHABLE")
    }
}
