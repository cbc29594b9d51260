import Glibc
import RegistryModel
import TestSupport
import Testing

@testable import registryctl

/// The names the daemon gives its backups (``BackupName``), which retention later recognises.
@Suite struct BackupRetentionNameTests {
    @Test func namesAreTheUTCStartTimeInISOBasicFormat() {
        #expect(BackupName.name(at: 0) == "19700101T000000Z")
        #expect(BackupName.name(at: 1_795_729_223) == "20261126T214023Z")
        #expect(BackupName.name(at: 951_782_400) == "20000229T000000Z")
        #expect(BackupName.name(at: 951_782_400, sequence: 1) == "20000229T000000Z")
        #expect(BackupName.name(at: 951_782_400, sequence: 2) == "20000229T000000Z-2")
    }

    @Test func namesSortAsTheirTimesAndAreRecognised() {
        var generator = SystemRandomNumberGenerator()
        let times = (0..<500).map { _ in time_t(Int.random(in: 0...4_102_444_799, using: &generator)) }
        let names = times.map { BackupName.name(at: $0) }
        #expect(names.allSatisfy(BackupRetention.isBackupName))
        #expect(zip(times, names).allSatisfy { BackupName.parse($1).map { $0.time == Int64($0.time) && $0.sequence == 1 } ?? false })
        #expect(zip(times, names).sorted { $0.0 < $1.0 }.map(\.1) == names.sorted())
        #expect(BackupName.parse("20261126T214023Z-2")! == (1_795_729_223, 2))
        #expect(BackupName.parse("20261126T214023Z-17")! == (1_795_729_223, 17))
        let others = [
            "", "20240101T000000", "20240101T000000Z.partial", "2024-01-01T00:00:00Z", "20240101X000000Z", "2024010aT000000Z",
            "20240101T000000Z-", "20240101T000000Z-1", "20240101T000000Z-02", "20240101T000000Z-x", "20240101T000000Z2",
            "20240230T000000Z", "20241301T000000Z", "20240101T240000Z", "20240101T006000Z",
        ]
        for other in others {
            #expect(!BackupRetention.isBackupName(other), "\(other)")
        }
    }

    /// A name later than now (with a minute's slack) is never counted: planted as
    /// `29991231T000000Z`, it made the copy just taken the oldest, removed at once.
    @Test func namesFromTheFutureAreNeitherCountedNorRemoved() throws {
        let parent = TemporaryDirectory("registryctl-retention")
        defer { parent.remove() }
        let now = Int64(time(nil))
        func backup(_ name: String) {
            #expect(mkdir(parent.path + "/" + name, 0o700) == 0)
            let file = open(parent.path + "/" + name + "/manifest.json", O_WRONLY | O_CREAT | O_EXCL, 0o600)
            close(file)
        }
        let old = BackupName.name(at: time_t(now - 86_400))
        let fresh = BackupName.name(at: time_t(now))
        let again = BackupName.name(at: time_t(now), sequence: 2)
        let aheadWithinSlack = BackupName.name(at: time_t(now + 30))
        let future = ["29991231T000000Z", BackupName.name(at: time_t(now + 3_600)), BackupName.name(at: time_t(now + 3_600), sequence: 2)]
        for name in [old, fresh, again, aheadWithinSlack] + future { backup(name) }
        let outcome = BackupRetention.prune(directory: parent.path, keep: 2, now: now)
        #expect(outcome.problems == [])
        // The newest two that are not in the future stay: the one 30 s ahead and the second of now.
        #expect(outcome.removed == [old, fresh])
        let left = Set(directoryEntries(parent.path) ?? [])
        #expect(left == Set([again, aheadWithinSlack] + future))
    }
}
