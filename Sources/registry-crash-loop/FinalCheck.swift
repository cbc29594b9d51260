import Glibc
import RegistryProtocol
import SwiftProtobuf

/// After the last round: every template in the store, from every round, read back with export and
/// compared with the one its identifier was registered with — so an earlier round's data damaged by
/// a later crash is found, not only counted.
enum FinalCheck {
    static func run(settings: RoundSettings, rounds: Int, expectedTotal: Int) -> [String] {
        var violations: [String] = []
        do {
            var cuts: [String] = []
            let daemon = try settings.startDaemon(phase: "final-start", round: rounds + 1, cuts: &cuts)
            defer { daemon.killHard() }
            let connection = try FrameConnection(path: settings.socketPath)
            defer { connection.close() }
            var seen = Set<String>()
            var wrong: [String] = []
            var after: UInt64 = 0
            var id: UInt64 = 0
            repeat {
                id += 1
                var request = Registry_V1_Request()
                request.id = id
                request.export = .with {
                    $0.afterTemplateID = after
                    $0.limit = 10_000
                }
                let reply = try connection.call(request, timeoutSeconds: 600)
                guard case .export(let page)? = reply.result else { throw CrashLoopError("export: \(CrashRound.describe(reply))") }
                for template in page.templates {
                    guard let registration = Registration(identifier: template.identifier), (0...rounds).contains(registration.round) else {
                        wrong.append("\(template.identifier) (not an identifier this run made)")
                        continue
                    }
                    if !seen.insert(template.identifier).inserted {
                        wrong.append("\(template.identifier) (a second template)")
                    } else if template.algorithm != Registration.algorithm
                        || !Registration.sameBits(template.template.vector, registration.template(seed: settings.seed))
                    {
                        wrong.append("\(template.identifier) (stored template differs from the one sent)")
                    }
                }
                after = page.nextAfterTemplateID
            } while after != 0
            if !wrong.isEmpty {
                violations.append("the final export found \(wrong.count) wrong templates: \(CrashRound.some(wrong))")
            }
            if seen.count != expectedTotal {
                violations.append("the final export holds \(seen.count) registrations, expected \(expectedTotal)")
            }
            daemon.signal(SIGTERM)
            if daemon.wait(seconds: settings.drainDeadlineSeconds) != .exited(0) {
                violations.append("the daemon of the final check did not exit 0 after SIGTERM: \(daemon.status.map { "\($0)" } ?? "still running")")
            }
        } catch {
            violations.append("final check: \(error)")
        }
        return violations
    }
}
