import Glibc
import TestSupport
import Testing

@testable import LMDB

/// What LMDB writes must hold no bytes of data already removed. A page LMDB allocates for a write is
/// a buffer from its own pool, which last held an earlier page of this process; the patch in
/// Sources/CLMDB wipes a branch or leaf page's unused middle before it is written, and a new page
/// taken from the pool whole (so a one-page overflow value's unused end, which the value does not
/// cover, reads as zeros instead of as a page written before).
@Suite struct StalePageBytesTests {
    static let marker = Array("ERASED-MARKER-16".utf8)

    @Test func aOnePageOverflowValueCarriesNoBytesOfAnEarlierPage() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { _ = system("rm -rf '\(path)'") }
        let env = try Environment(path: path)
        defer { env.close() }
        let db = try env.write { txn in try txn.openDatabase("t", create: true) }
        // Leaf pages full of the marker: after the commit their buffers go back to LMDB's pool.
        let value = Array((0..<32).map { _ in Self.marker }.joined())
        try env.write { txn in
            for key in 0..<40 { try txn.put(db, key: [UInt8(key)], value: value) }
        }
        // The marker's records removed, and a value too big for a node but within one page written: an
        // overflow page, taken from the pool.
        try env.write { txn in
            for key in 0..<40 { _ = try txn.delete(db, key: [UInt8(key)]) }
            try txn.put(db, key: [200], value: [UInt8](repeating: 0x11, count: 3000))
        }
        // A later commit lets the removal's pages be wiped; then the pass wipes them.
        try env.write { txn in try txn.put(db, key: [201], value: [1]) }
        for _ in 0..<3 {
            _ = try env.eraseFreePages(sync: true)
            try env.write { txn in try txn.put(db, key: [202], value: [2]) }
        }
        _ = try env.eraseFreePages(sync: true)
        #expect(try !DataFileScan(directory: path).contains(Self.marker), "bytes of removed records are still in data.mdb")
    }

    /// The search these tests rely on fails when it cannot look: a store file that is missing, cannot
    /// be read or is empty is an error, never a search that finds no erased bytes.
    @Test func aStoreFileThatCannotBeSearchedIsAnErrorNotANegativeResult() throws {
        let path = TemporaryDirectory("lmdb-tests").path
        defer { _ = system("rm -rf '\(path)'") }
        #expect(throws: DataFileScan.Unreadable.self) { try DataFileScan(directory: path) }
        #expect(close(open(path + "/data.mdb", O_WRONLY | O_CREAT, 0o600)) == 0)
        #expect(throws: DataFileScan.Unreadable.self) { try DataFileScan(directory: path) }
        // A directory where the file should be: open succeeds, read fails (EISDIR).
        #expect(unlink(path + "/data.mdb") == 0 && mkdir(path + "/data.mdb", 0o700) == 0)
        #expect(throws: DataFileScan.Unreadable.self) { try DataFileScan(directory: path) }
        #expect(rmdir(path + "/data.mdb") == 0)
        let env = try Environment(path: path)
        env.close()
        #expect(try DataFileScan(directory: path).bytes.count > 0)
    }
}
