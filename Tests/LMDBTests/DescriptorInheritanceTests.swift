import Glibc
import TestSupport
import Testing

@testable import LMDB

/// No descriptor of an open store outlives an exec: a child the process starts (a test's daemon, a
/// shell) would otherwise hold the store, and its file system, open (found as tmpfs mounts that a
/// full test run could not unmount: another test's child held a store on them).
@Suite struct DescriptorInheritanceTests {
    @Test func everyDescriptorOfAnOpenStoreIsClosedOnExec() throws {
        let directory = TemporaryDirectory("cloexec")
        defer { directory.remove() }
        try FileMappingsTests.makeStore(at: directory.path)
        for readOnly in [false, true] {
            var options = Environment.Options()
            options.readOnly = readOnly
            let env = try Environment(path: directory.path, options: options)
            defer { env.close() }
            var found = 0
            for name in try #require(directoryEntries("/proc/self/fd")) {
                guard let fd = Int32(name) else { continue }
                var target = [CChar](repeating: 0, count: 4096)
                let length = readlink("/proc/self/fd/\(name)", &target, target.count - 1)
                guard length > 0, String(cString: target).hasPrefix(directory.path + "/") else { continue }
                found += 1
                #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0, "\(String(cString: target)) (read-only: \(readOnly)) is inherited by exec")
            }
            #expect(found >= 2, "data.mdb's descriptors and the lock files")
        }
    }
}
