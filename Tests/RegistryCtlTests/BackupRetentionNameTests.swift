import Glibc
import Testing

@testable import registryctl

/// The names `registryctl backup --into` gives its copies, which retention later recognises.
@Suite struct BackupRetentionNameTests {
    @Test func namesAreTheUTCStartTimeInISOBasicFormat() {
        #expect(BackupRetention.name(at: 0) == "19700101T000000Z")
        #expect(BackupRetention.name(at: 1_795_729_223) == "20261126T214023Z")
        #expect(BackupRetention.name(at: 951_782_400) == "20000229T000000Z")
    }

    @Test func namesSortAsTheirTimesAndAreRecognised() {
        var generator = SystemRandomNumberGenerator()
        let times = (0..<500).map { _ in time_t(Int.random(in: 0...4_102_444_799, using: &generator)) }
        let names = times.map(BackupRetention.name(at:))
        #expect(names.allSatisfy(BackupRetention.isBackupName))
        #expect(zip(times, names).sorted { $0.0 < $1.0 }.map(\.1) == names.sorted())
        for other in ["", "20240101T000000", "20240101T000000Z.partial", "2024-01-01T00:00:00Z", "20240101X000000Z", "2024010aT000000Z"] {
            #expect(!BackupRetention.isBackupName(other), "\(other)")
        }
    }
}
