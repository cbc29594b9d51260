import Foundation
import RegistryEngine
import RegistryModel
import Testing

@testable import RegistryServer

/// The configuration's checks: a value out of range is a clear error, never a trap (a trap here
/// would stop the daemon at start, or a running one on SIGHUP).
@Suite struct ConfigurationTests {
    func configuration(_ json: String) throws -> ServerConfiguration {
        try ServerConfiguration.decode(Data(json.utf8), from: "test.json")
    }

    /// Found by the `config` fuzz target: days × 86,400 overflowed Int64 inside `validated()`.
    @Test(arguments: ["3066666666666666666", "9223372036854775807", "106751991167301"])
    func anAuditAgeTooLargeToCountInSecondsIsRefused(days: String) throws {
        let configuration = try self.configuration(#"{ "audit": { "maximumAgeDays": \#(days) } }"#)
        let error = #expect(throws: ConfigurationError.self) { try configuration.validated() }
        #expect(error?.description.contains("audit.maximumAgeDays") == true)
    }

    @Test(arguments: [#"{ "maximumAgeDays": 0 }"#, #"{ "maximumAgeDays": -1 }"#, #"{ "maximumEntries": 0 }"#, #"{ "maximumEntries": -5 }"#])
    func auditRetentionBelowOneIsRefused(audit: String) throws {
        let configuration = try self.configuration(#"{ "audit": \#(audit) }"#)
        let error = #expect(throws: ConfigurationError.self) { try configuration.validated() }
        #expect(error?.description.contains("audit.maximum") == true)
    }

    @Test func auditRetentionInRangeIsKeptInSeconds() throws {
        let configuration = try self.configuration(#"{ "audit": { "maximumAgeDays": 36500, "maximumEntries": 1 } }"#)
        let (engine, _) = try configuration.validated()
        #expect(engine.auditRetention.maximumAgeSeconds == Int64(36_500) * 86_400)
        #expect(engine.auditRetention.maximumEntries == 1)
    }
}
