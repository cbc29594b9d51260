import RegistryEngine
import RegistryModel
import RegistryProtocol
import SwiftProtobuf
import Synchronization

extension Registry_V1_StatsRequest: AsyncRegistryOperation {
    static let name = "stats"
    static let right: OperationClass? = nil
    static func response(_ result: Registry_V1_StatsResult) -> Registry_V1_Response.OneOf_Result { .stats(result) }

    var scope: OperationScope { .store }

    func perform(in context: OperationContext) async throws -> Registry_V1_StatsResult {
        let engine = context.engine
        let counters = context.counters
        let (commits, operations) = engine.commitStatistics
        let uptime = ContinuousClock.now - counters.startedAt
        return .with {
            $0.serverVersion = RequestDispatcher.serverVersion
            $0.uptimeSeconds = UInt64(max(0, uptime.components.seconds))
            $0.openConnections = UInt64(counters.connections.load(ordering: .relaxed))
            $0.requestsServed = UInt64(counters.requestsServed.load(ordering: .relaxed))
            $0.storeBytes = UInt64(engine.storeBytesInUse)
            $0.commits = UInt64(commits)
            $0.committedOperations = UInt64(operations)
            $0.galleries = engine.galleries().map(Registry_V1_Gallery.init)
            $0.scanKernels = Engine.scanKernels
            let prefilter = Engine.prefilterCounts
            $0.prefilterRowsConsidered = UInt64(prefilter.considered)
            $0.prefilterRowsRescored = UInt64(prefilter.rescored)
            let metrics = context.metrics.report(engine: engine, counters: counters)
            $0.metrics = metrics.exposition
            $0.operations = metrics.operations
            $0.writer = metrics.writer
            if let status = context.fleet?.status() {
                $0.fleet = .with { fleet in
                    fleet.node = status.node
                    fleet.fleetID = status.fleetId.map(FleetMembership.hex) ?? ""
                    fleet.appliedPosition = UInt64(max(0, status.applied))
                    fleet.headPosition = UInt64(max(0, status.head))
                    fleet.lagEntries = UInt64(max(0, status.head - status.applied))
                    fleet.lagSeconds = status.lagSeconds
                    fleet.databaseReachable = status.reachable
                }
            }
        }
    }
}
