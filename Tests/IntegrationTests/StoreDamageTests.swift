import Glibc
import RegistryClient
import RegistryModel
import SyntheticFaces
import TestSupport
import Testing

/// A damaged store, a full disk and an unwritable data directory, through the real daemon: it refuses
/// to start with one clear line and a non-zero exit (never a signal), never starts empty where a store
/// was, never serves a template that differs from what was stored, and names storage errors for what
/// they are.
@Suite(.serialized) struct StoreDamageTests {
    // MARK: Damage at rest

    @Test func randomBytesOverAPayloadPageAreRefusedAtStartNamingTheTemplate() async throws {
        let (daemon, stored) = try await Self.daemonWithTemplates(count: 300)
        daemon.stop()
        // The page holding a known template's payload: the damage is certainly in live data.
        let file = daemon.dataPath + "/data.mdb"
        let data = try Self.read(file)
        let needle = Self.payloadBytes(stored[150])
        let offset = try #require(Self.find(needle, in: data), "the payload of a registered template should be in data.mdb")
        var random = SeededGenerator(seed: 11)
        try Self.write(file, at: offset & ~4095, (0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) })

        let outcome = try Self.startToExit(daemon)
        #expect(outcome.exitedNormally, "registryd must exit with a message, not die of signal \(outcome.signal): \(outcome.log)")
        #expect(outcome.status != 0)
        #expect(outcome.log.contains("damaged") && outcome.log.contains("registryctl backup"), "\(outcome.log)")
    }

    /// 4 KiB of random bytes at several places in the data pages: whatever they hit (records, payloads,
    /// LMDB's own branch and leaf pages, free pages), the daemon either refuses to start with a message
    /// or starts and serves exactly what was stored.
    @Test(arguments: Array(UInt64(1)...12))
    func randomBytesAnywhereInTheDataNeverCrashTheDaemonNorAlterWhatItServes(seed: UInt64) async throws {
        let (daemon, stored) = try await Self.daemonWithTemplates(count: 300)
        daemon.stop()
        let file = daemon.dataPath + "/data.mdb"
        let size = try Self.read(file).count
        var random = SeededGenerator(seed: seed)
        let page = Int.random(in: 2..<(size / 4096), using: &random)
        try Self.write(file, at: page * 4096, (0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) })
        try await Self.expectRefusedOrIntact(daemon, stored, what: "4 KiB of random bytes at page \(page)")
    }

    /// The issue's measurement (issue 28): a compacted store of 10,000 templates (a backup restored, so
    /// nearly every page is live), and 100 times, on a fresh copy, one 4 KiB block of random bytes over
    /// a random page, then a start. Each ends refused at start with a reason, served unaltered (every
    /// template reads back identical), served with a refusal naming damage (a read, or an exit saying
    /// LMDB's check failed), served altered, or in the fault handler; the last two must not happen.
    /// Run twice: whole blocks, and blocks that keep the page's 16-byte header (page number, flags,
    /// `mp_lower`/`mp_upper`), so that the damage is in the node offsets, nodes and keys. Before the
    /// check of LMDB's trees at open (the registryd built just before it, seed 2800): whole blocks 70
    /// refused, 22 served unaltered (damage in pages the start does not read, such as the audit
    /// trail's), 0 altered, 8 in the fault handler; keeping headers 40 refused, 22 unaltered, 0
    /// altered, 38 in the fault handler. With it: 100 refused each, every one naming the page and
    /// its database.
    @Test(arguments: [false, true])
    func randomBlocksOverACompactedStoreAreRefusedOrServedUnaltered(keepingPageHeaders: Bool) async throws {
        let (daemon, stored) = try await Self.daemonWithTemplates(count: 10_000)
        let client = try await daemon.client()
        let backup = try await client.backup().directory
        await client.close()
        daemon.stop()
        let pristine = daemon.directory + "/pristine"
        let restored = try run([try registrydBinary(), "--restore", backup, "--data", pristine], log: daemon.directory + "/restore.log")
        try #require(restored.status == 0, "\(restored.output)")
        let original = Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) })
        let pages = try Self.read(pristine + "/data.mdb").count / 4096
        var random = SeededGenerator(seed: 2_800)
        var counts: [DamageOutcome: Int] = [:]
        var notes: [String] = []
        for trial in 0..<100 {
            #expect(system("rm -rf '\(daemon.dataPath)' && cp -a '\(pristine)' '\(daemon.dataPath)'") == 0)
            let page = Int.random(in: 2..<pages, using: &random)
            let kept = keepingPageHeaders ? 16 : 0
            try Self.write(
                daemon.dataPath + "/data.mdb", at: page * 4096 + kept, (kept..<4096).map { _ in UInt8.random(in: 0...255, using: &random) })
            let (outcome, note) = try await Self.outcome(daemon, original)
            counts[outcome, default: 0] += 1
            if outcome != .servedUnaltered { notes.append("trial \(trial), page \(page): \(outcome.rawValue): \(note)") }
        }
        let blocks = keepingPageHeaders ? "random 4 KiB blocks keeping the page header" : "random 4 KiB blocks"
        print("\(blocks) over a compacted store of 10,000 templates (\(pages) pages), 100 trials:")
        for outcome in DamageOutcome.allCases { print("  \(outcome.rawValue): \(counts[outcome] ?? 0)") }
        // Every outcome but the expected ones, and a few refusals for their messages.
        let refusals = notes.filter { $0.contains(DamageOutcome.refusedAtStart.rawValue) }
        for note in notes.filter({ !$0.contains(DamageOutcome.refusedAtStart.rawValue) }) + refusals.prefix(5) { print("  \(note)") }
        #expect(counts[.servedAltered] == nil, "altered templates served")
        #expect(counts[.faulted] == nil, "the fault handler (or a signal) ended a start")
        #expect(counts[.other] == nil, "\(notes)")
    }

    enum DamageOutcome: String, CaseIterable {
        case refusedAtStart = "refused at start, with a reason"
        case servedUnaltered = "served unaltered"
        case servedRefusingDamage = "served, refusing damaged data with a reason"
        case servedAltered = "served altered"
        case faulted = "fault handler or signal"
        case other = "something else"
    }

    /// Starts `daemon` on its (damaged) store and reads every template back: how it ended, and the
    /// message that says so.
    static func outcome(_ daemon: Daemon, _ original: [UInt64: StoredTemplate]) async throws -> (DamageOutcome, String) {
        let logBefore = daemon.log.count
        func newLog() -> String { String(daemon.log.dropFirst(logBefore)) }
        func ended(_ log: String) -> DamageOutcome {
            if log.contains("SIGSEGV") || log.contains("SIGBUS") { return .faulted }
            return log.contains("damaged") || log.contains("truncated") ? .refusedAtStart : .other
        }
        do {
            try daemon.start()
        } catch {
            // Exited during start-up: the harness reaped it; its log says how.
            if daemon.pid > 0 { daemon.stop(signal: SIGKILL) }
            let log = newLog()
            return (ended(log), Self.lastLine(log))
        }
        defer { daemon.stop(signal: SIGKILL) }
        var served: [StoredTemplate] = []
        do {
            let client = try await daemon.client()
            do {
                served = try await Self.exportAll(client)
            } catch {
                await client.close()
                throw error
            }
            await client.close()
        } catch let error as RegistryError {
            return error.message.contains("damaged") ? (.servedRefusingDamage, error.message) : (.other, error.message)
        } catch {
            // The daemon stopped (with LMDB's damage message, or a fault), or did not answer.
            let outcome = Self.waitForExit(daemon.pid, log: daemon.directory + "/registryd.log")
            let log = newLog()
            if !outcome.exitedNormally { return (.faulted, "signal \(outcome.signal): \(Self.lastLine(log))") }
            let ending = ended(log)
            return (ending == .refusedAtStart ? .servedRefusingDamage : ending, "\(error): \(Self.lastLine(log))")
        }
        let altered = served.filter { original[$0.id] != $0 }.count + max(0, original.count - served.count)
        return altered == 0 ? (.servedUnaltered, "") : (.servedAltered, "\(altered) templates altered or missing")
    }

    /// The last line of a log that is not empty, without the directory's path.
    static func lastLine(_ log: String) -> String {
        let line = log.split(separator: "\n").last { !$0.allSatisfy(\.isWhitespace) }.map(String.init) ?? ""
        return line.firstRange(of: "data.mdb is").map { String(line[$0.lowerBound...]) } ?? String(line.suffix(240))
    }

    @Test func aDataFileTruncatedToHalfIsRefusedAsTruncated() async throws {
        let (daemon, _) = try await Self.daemonWithTemplates(count: 300)
        daemon.stop()
        let file = daemon.dataPath + "/data.mdb"
        var info = stat()
        #expect(stat(file, &info) == 0)
        #expect(truncate(file, off_t(info.st_size / 2)) == 0)

        let outcome = try Self.startToExit(daemon)
        #expect(outcome.exitedNormally, "registryd must exit with a message, not die of signal \(outcome.signal): \(outcome.log)")
        #expect(outcome.status != 0)
        #expect(outcome.log.contains("truncated") && outcome.log.contains("registryctl backup"), "\(outcome.log)")
    }

    @Test func aDataFileTruncatedToNothingIsRefusedNotStartedEmpty() async throws {
        let (daemon, _) = try await Self.daemonWithTemplates(count: 20)
        daemon.stop()
        #expect(truncate(daemon.dataPath + "/data.mdb", 0) == 0)

        let outcome = try Self.startToExit(daemon)
        #expect(outcome.exitedNormally && outcome.status != 0, "an empty data.mdb must not start as an empty registry: \(outcome.log)")
        #expect(outcome.log.contains("empty"), "\(outcome.log)")
    }

    @Test func aMissingDataFileBesideTheLockFileIsRefusedNotStartedEmpty() async throws {
        let (daemon, _) = try await Self.daemonWithTemplates(count: 20)
        daemon.stop()
        #expect(unlink(daemon.dataPath + "/data.mdb") == 0)

        let outcome = try Self.startToExit(daemon)
        #expect(outcome.exitedNormally && outcome.status != 0, "\(outcome.log)")
        #expect(outcome.log.contains("data.mdb is missing"), "\(outcome.log)")
    }

    /// The issue's trial: 200 random bit flips in the data pages, several times. Before checksums, one
    /// trial served 219 altered templates and verify flagged 27. Now an altered template is never
    /// served: the daemon refuses to start, or `verify` names every damaged record.
    @Test func bitFlipsNeverLetTheDaemonServeAnAlteredTemplate() async throws {
        var served = 0
        var altered = 0
        var flagged = 0
        var refused = 0
        for trial in 0..<5 {
            let (daemon, stored) = try await Self.daemonWithTemplates(count: 300)
            daemon.stop()
            let file = daemon.dataPath + "/data.mdb"
            var data = try Self.read(file)
            var random = SeededGenerator(seed: 1000 + UInt64(trial))
            for _ in 0..<200 {
                let bit = Int.random(in: (2 * 4096 * 8)..<(data.count * 8), using: &random)
                data[bit / 8] ^= 1 << (bit % 8)
            }
            try Self.write(file, at: 0, data)
            let result = try await Self.serveAfterDamage(daemon, stored)
            if let result {
                served += 1
                altered += result.altered
                flagged += result.flagged
            } else {
                refused += 1
            }
        }
        print(
            "bit flips: \(refused) of 5 trials refused at start, \(served) started; altered templates served: \(altered), flagged by verify: \(flagged)"
        )
        #expect(altered == 0)
    }

    /// The same with the 200 flips all inside stored template payloads: the damage only checksums can
    /// see (LMDB's pages stay well-formed). Before them, the daemon started and served every altered
    /// template, and verify, comparing with an index loaded from the same bytes, flagged none.
    @Test func bitFlipsInPayloadsAreRefusedAtStartNamingATemplate() async throws {
        let (daemon, stored) = try await Self.daemonWithTemplates(count: 300)
        daemon.stop()
        let file = daemon.dataPath + "/data.mdb"
        var data = try Self.read(file)
        // Where each payload's first 8 bytes are in the file: the live copy, and stale copies in pages
        // LMDB freed (copy-on-write), which get the same flips so that whichever is live has them.
        var copies: [UInt64: [Int]] = [:]
        for template in stored {
            copies[Self.payloadBytes(template).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }] = []
        }
        data.withUnsafeBytes { bytes in
            for offset in 0..<(bytes.count - 64) {
                let prefix = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                if copies[prefix] != nil { copies[prefix]!.append(offset) }
            }
        }
        let found = copies.values.filter { !$0.isEmpty }.sorted { $0[0] < $1[0] }
        #expect(found.count == stored.count, "every payload should be found in data.mdb")
        var random = SeededGenerator(seed: 207)
        for _ in 0..<200 {
            let bit = Int.random(in: 0..<(64 * 8), using: &random)
            for offset in found.randomElement(using: &random)! { data[offset + bit / 8] ^= 1 << (bit % 8) }
        }
        try Self.write(file, at: 0, data)
        let result = try await Self.serveAfterDamage(daemon, stored)
        print(
            "bit flips in payloads: \(result.map { "started; altered templates served: \($0.altered), flagged by verify: \($0.flagged)" } ?? "refused at start")"
        )
        #expect(result == nil, "flipped payloads must not be loaded")
        #expect(daemon.log.contains("its payload does not match its checksum"), "\(daemon.log)")
    }

    // MARK: Storage errors

    /// Issue 28's full disk, and the day after: registrations into an 8 MiB tmpfs until
    /// `STORAGE_FULL` (refused for the reserve kept for deletions, before the disk is full), then
    /// reads, deletions of half the people and `verify` all work, registrations succeed again on the
    /// space the deletions freed inside the store, and once more after a file outside the store is
    /// removed — all without a restart. Before the reserve, every deletion after the first
    /// `STORAGE_FULL` failed as well (0 of 4,967 on a 16 MiB tmpfs), until a restart.
    @Test
    func aFullDiskStillDeletesAndRegistersAgainOnceSpaceIsFreed() async throws {
        let tmpfs = try TemporaryMount(options: "size=8m")
        defer { tmpfs.remove() }
        let mount = tmpfs.path
        // Space taken by something else on the file system, removed later.
        let filler = mount + "/other-files"
        #expect(system("head -c 2097152 /dev/urandom > '\(filler)'") == 0)
        // The harness's data directory becomes a directory on the small file system.
        let daemon = try Daemon()
        daemon.stop()
        #expect(system("rm -rf '\(daemon.dataPath)'") == 0 && mkdir(mount + "/data", 0o700) == 0)
        #expect(symlink(mount + "/data", daemon.dataPath) == 0)
        try daemon.start()
        // Stopped before the unmount (defers run in reverse order).
        defer { daemon.stop() }
        let client = try await daemon.client()
        var random = SeededGenerator(seed: 7)
        func register(_ identifier: String) async throws -> RegistryError? {
            do {
                _ = try await client.register(
                    identifier: identifier, face: Face(FaceTemplate(algorithm: 24, vector: Self.randomVector(&random))), force: true)
                return nil
            } catch let error as RegistryError {
                return error
            }
        }
        // One person with 4,000 templates: deleting them frees more than the store-free margin at once.
        let bulk = (0..<4000).map { _ in ImportItem(identifier: "bulk", template: FaceTemplate(algorithm: 24, vector: Self.randomVector(&random))) }
        #expect(try await client.importTemplates(bulk).count == bulk.count)
        var stored: [String] = []
        var full: RegistryError?
        for index in 0..<50_000 {
            if let refusal = try await register("person-\(index)") {
                full = refusal
                break
            }
            stored.append("person-\(index)")
        }
        #expect(full?.code == .storageFull, "a full disk must answer STORAGE_FULL: \(String(describing: full))")
        #expect(
            full?.message.contains("kept so that deletions still work") == true, "refused by the disk, not the reserve: \(String(describing: full))")
        // Registrations sent right after a deletion that made room, within the second after the
        // refusal: the deletion's commit has the free pages counted again (before, 0 of 100 went in).
        #expect(try await client.deleteIdentifier(identifier: "bulk") == bulk.count)
        var rightAfter = 0
        for index in 0..<100 where try await register("right-after-\(index)") == nil {
            rightAfter += 1
            stored.append("right-after-\(index)")
        }
        #expect(rightAfter == 100, "right after deleting \(bulk.count) templates, \(rightAfter) of 100 registrations succeeded")
        // Reads and verify.
        #expect(try await client.galleries().isEmpty == false)
        _ = try await client.identify(face: Face(FaceTemplate(algorithm: 24, vector: Self.randomVector(&random))))
        let verified = try await client.verify()
        #expect(verified.problems.isEmpty && verified.checked == stored.count, "\(verified)")
        // Deletions: every one succeeds.
        let deleting = stored.prefix(stored.count / 2)
        var deleted = 0
        var deleteFailures: [String] = []
        for identifier in deleting {
            do {
                deleted += try await client.deleteIdentifier(identifier: identifier)
            } catch {
                deleteFailures.append("\(error)")
            }
        }
        #expect(deleteFailures.count == 0, "\(deleteFailures.count) deletions failed, first: \(deleteFailures.first ?? "")")
        #expect(deleted == deleting.count)
        // Registrations again, on the pages the deletions freed inside the store: no restart.
        var again = 0
        for index in 0..<100 where try await register("again-\(index)") == nil { again += 1 }
        #expect(again == 100, "after deleting \(deleted), only \(again) of 100 registrations succeeded")
        // Fill up again, then free space outside the store: registrations go on.
        var refilled = 0
        while try await register("refill-\(refilled)") == nil { refilled += 1 }
        #expect(unlink(filler) == 0)
        var afterFreeing = 0
        for index in 0..<100 where try await register("freed-\(index)") == nil { afterFreeing += 1 }
        #expect(afterFreeing == 100, "after freeing 2 MiB outside the store, \(afterFreeing) of 100 registrations succeeded")
        print(
            "full disk: \(stored.count - rightAfter) registered until STORAGE_FULL; \(rightAfter) of 100 right after deleting \(bulk.count); "
                + "\(deleted) of \(deleting.count) deletions; "
                + "\(again) of 100 registrations after them; \(refilled) more until full; \(afterFreeing) of 100 after freeing 2 MiB outside")
        #expect(daemon.log.contains("storage reserve reached"), "\(daemon.log)")
        await client.close()
    }

    /// A read-only data directory (root ignores file modes, so a read-only mount) is reported as such,
    /// not as "another process has it open".
    @Test func anUnwritableDataDirectoryIsNamedAsSuch() async throws {
        let directory = TemporaryDirectory("registryd-it").path
        defer { _ = system("rm -rf '\(directory)'") }
        var data = directory + "/data"
        var mount: TemporaryMount?
        if geteuid() == 0 {
            let tmpfs = try TemporaryMount(options: "ro,size=1m")
            mount = tmpfs
            data = tmpfs.path
        } else {
            #expect(mkdir(data, 0o500) == 0)
        }
        defer { mount?.remove() }
        let binary = try registrydBinary()
        let log = directory + "/registryd.log"
        let pid = try spawn([binary, "--socket", directory + "/registryd.sock", "--data", data], log: log)
        let outcome = Self.waitForExit(pid, log: log)
        #expect(outcome.exitedNormally && outcome.status != 0, "\(outcome.log)")
        #expect(!outcome.log.contains("another process"), "\(outcome.log)")
        #expect(outcome.log.contains("read-only file system") || outcome.log.contains("not writable"), "\(outcome.log)")
    }

    // MARK: Helpers

    /// A daemon holding `count` arcface templates of random directions, and the templates it serves.
    static func daemonWithTemplates(count: Int) async throws -> (Daemon, [StoredTemplate]) {
        let daemon = try Daemon()
        let client = try await daemon.client()
        var random = SeededGenerator(seed: UInt64(count))
        let vectors = (0..<count).map { _ in Self.randomVector(&random) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, vector) in vectors.enumerated() {
                if index >= 16 { try await group.next() }
                group.addTask {
                    _ = try await client.register(identifier: "person-\(index)", face: Face(FaceTemplate(algorithm: 24, vector: vector)))
                }
            }
            try await group.waitForAll()
        }
        let stored = try await Self.exportAll(client)
        #expect(stored.count == count)
        await client.close()
        return (daemon, stored)
    }

    static func exportAll(_ client: RegistryConnection) async throws -> [StoredTemplate] {
        var all: [StoredTemplate] = []
        var after: UInt64 = 0
        while true {
            let page = try await client.export(after: after, limit: 1000)
            all += page.templates
            guard let next = page.next else { return all }
            after = next
        }
    }

    /// Starts the daemon on its damaged store: nil when it refused to start (with a message and a
    /// non-zero exit, never a signal), else the number of templates it served altered, after checking
    /// that `verify` reports every one of them.
    static func serveAfterDamage(_ daemon: Daemon, _ stored: [StoredTemplate]) async throws -> (altered: Int, flagged: Int)? {
        do {
            try daemon.start()
        } catch {
            let outcome = Self.lastExit(daemon)
            #expect(outcome.exitedNormally, "registryd must exit with a message, not die of a signal: \(daemon.log)")
            #expect(daemon.log.contains("damaged") && daemon.log.contains("registryctl backup"), "\(daemon.log)")
            return nil
        }
        let client = try await daemon.client()
        defer { daemon.stop(signal: SIGKILL) }
        let original = Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) })
        var served: [StoredTemplate] = []
        var problems: [String] = []
        do {
            served = try await Self.exportAll(client)
        } catch let error as RegistryError {
            // Refused: a damaged record or page is never served.
            #expect(error.message.contains("damaged"), "\(error)")
        }
        do {
            problems = try await client.verify().problems
        } catch let error as RegistryError {
            #expect(error.message.contains("damaged"), "\(error)")
            problems = [error.message]
        } catch is RegistryClientError {
            // The daemon stopped: only acceptable as an exit with the damage message (liblmdb's own
            // consistency checks failed on a page the start-up did not read).
            var status: Int32 = 0
            #expect(waitpid(daemon.pid, &status, 0) == daemon.pid)
            #expect(status & 0x7F == 0 && status != 0, "registryd died of signal \(status & 0x7F): \(daemon.log)")
            #expect(daemon.log.contains("damaged") && daemon.log.contains("registryctl backup"), "\(daemon.log)")
        }
        await client.close()
        let altered = served.filter { original[$0.id] != $0 }
        let flagged = altered.filter { template in problems.contains { $0.contains("template \(template.id)") } }
        #expect(flagged.count == altered.count, "altered templates served and not flagged by verify: \(altered.count - flagged.count)")
        return (altered.count, flagged.count)
    }

    static func expectRefusedOrIntact(_ daemon: Daemon, _ stored: [StoredTemplate], what: String) async throws {
        let result = try await Self.serveAfterDamage(daemon, stored)
        #expect((result?.altered ?? 0) == 0, "\(what): altered templates served")
    }

    struct Outcome {
        var exitedNormally: Bool
        var status: Int32
        var signal: Int32
        var log: String
    }

    /// Starts registryd on `daemon`'s socket and data and waits for it to exit (it is expected to refuse).
    static func startToExit(_ daemon: Daemon) throws -> Outcome {
        let binary = try registrydBinary()
        let log = daemon.directory + "/refused.log"
        let pid = try spawn([binary, "--socket", daemon.socketPath, "--data", daemon.dataPath], log: log)
        return Self.waitForExit(pid, log: log)
    }

    static func waitForExit(_ pid: pid_t, log: String) -> Outcome {
        var status: Int32 = 0
        for _ in 0..<400 {
            if waitpid(pid, &status, WNOHANG) == pid {
                let text = (try? Self.read(log)).map { String(decoding: $0, as: UTF8.self) } ?? ""
                let exited = status & 0x7F == 0
                return Outcome(exitedNormally: exited, status: exited ? (status >> 8) & 0xFF : 0, signal: status & 0x7F, log: text)
            }
            usleep(25_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        return Outcome(exitedNormally: true, status: 0, signal: 0, log: "registryd was still running after 10 s")
    }

    /// The harness reaps a daemon that exits during start-up without keeping its status; start it
    /// again by hand to learn how it ends.
    static func lastExit(_ daemon: Daemon) -> Outcome {
        (try? Self.startToExit(daemon)) ?? Outcome(exitedNormally: false, status: 0, signal: 0, log: "")
    }

    static func randomVector(_ random: inout SeededGenerator) -> [Float] {
        (0..<128).map { _ in Float.random(in: -1...1, using: &random) }
    }

    /// The stored (normalised, little-endian float32) bytes of a served template.
    static func payloadBytes(_ template: StoredTemplate) -> [UInt8] {
        guard case .vector(let values) = template.template?.data else { return [] }
        return values.withUnsafeBytes { Array($0) }
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        // Payloads are split in parts: the first 64 bytes are in one part.
        let probe = Array(needle.prefix(64))
        guard !probe.isEmpty, haystack.count >= probe.count else { return nil }
        for start in 0...(haystack.count - probe.count) where haystack[start] == probe[0] {
            if haystack[start..<(start + probe.count)].elementsEqual(probe) { return start }
        }
        return nil
    }

    static func read(_ path: String) throws -> [UInt8] {
        guard let file = fopen(path, "rb") else { throw HarnessError("cannot open \(path)") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { return bytes }
            bytes += buffer[0..<count]
        }
    }

    static func write(_ path: String, at offset: Int, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { throw HarnessError("cannot open \(path)") }
        defer { close(fd) }
        guard bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }) == bytes.count else {
            throw HarnessError("cannot write \(path)")
        }
    }
}
