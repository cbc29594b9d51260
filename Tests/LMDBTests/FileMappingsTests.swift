import Glibc
import TestSupport
import Testing

@testable import LMDB

extension FileIdentity {
    /// The file at `path` (following symbolic links, as `open` does), or nil when it cannot be read.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        self.init(info)
    }
}

/// Finding LMDB's map of `data.mdb` in `/proc/self/maps` (``FileMappings``), which the tree check at
/// open reads through and the releases of the map's pages advise.
@Suite struct FileMappingsTests {
    static func makeStore(at path: String) throws {
        let env = try Environment(path: path)
        defer { env.close() }
        let records = try env.write { txn in try txn.openDatabase("records", create: true) }
        try env.write { txn in
            for index in 0..<2_000 { try txn.put(records, key: Array("key \(index)".utf8), value: [UInt8](repeating: 7, count: 300)) }
        }
    }

    /// Right after an open LMDB's map is there once, from the file's start and past its last committed
    /// page: what the check needs to read through it rather than through a private map of its own.
    @Test func anOpenStoreIsMappedOnceFromItsStart() throws {
        let directory = TemporaryDirectory("mappings")
        defer { directory.remove() }
        try Self.makeStore(at: directory.path)
        let dataFile = directory.path + "/data.mdb"
        let file = try #require(FileIdentity(path: dataFile))
        #expect(FileMappings.of(file).isEmpty, "nothing maps a closed store")
        let env = try Environment(path: directory.path)
        defer { env.close() }
        let mappings = FileMappings.of(file)
        #expect(mappings.count == 1)
        #expect(mappings.first?.offset == 0)
        #expect((mappings.first?.length ?? 0) >= env.usedBytes)
        // The mapping is the file: its first meta page reads through it.
        let magic = mappings.first.map { UnsafeRawPointer(bitPattern: $0.start)!.loadUnaligned(fromByteOffset: 16, as: UInt32.self) }
        #expect(magic == DataFile.magic)
    }

    /// A store whose path ends as another open store's path does (`/tmp/a/s` and `/tmp/b/tmp/a/s`) is
    /// told apart: by device and inode, not by the end of the path (which matched both before).
    @Test func storesWhosePathsEndAlikeAreToldApart() throws {
        let directory = TemporaryDirectory("mappings")
        defer { directory.remove() }
        let short = directory.path + "/s"
        let long = directory.path + "/b" + short
        #expect(mkdir(directory.path + "/b", 0o700) == 0)
        #expect(system("mkdir -p '\(long)'") == 0)
        try Self.makeStore(at: short)
        try Self.makeStore(at: long)
        let first = try Environment(path: short)
        defer { first.close() }
        let second = try Environment(path: long)
        defer { second.close() }
        #expect(long.hasSuffix(short))
        let shortMaps = FileMappings.of(try #require(FileIdentity(path: short + "/data.mdb")))
        let longMaps = FileMappings.of(try #require(FileIdentity(path: long + "/data.mdb")))
        #expect(shortMaps.count == 1 && longMaps.count == 1)
        #expect(shortMaps.first?.start != longMaps.first?.start)
    }
}
