import Glibc

/// What a privacy audit of a store does: read `directory/data.mdb` whole and look for bytes in it
/// (never printing them: they are template data).
public struct DataFileScan {
    public let bytes: [UInt8]

    /// Why a store file could not be searched.
    public struct Unreadable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The whole of `directory/data.mdb`.
    /// - Throws: ``Unreadable`` when it cannot be read or is empty: a search of nothing finds
    ///   nothing, and a test that bytes are gone must fail then, not pass without having looked.
    public init(directory: String) throws(Unreadable) {
        let path = directory + "/data.mdb"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Unreadable(description: "cannot open \(path) to search it: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Unreadable(description: "cannot read \(path) to search it: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        guard !bytes.isEmpty else { throw Unreadable(description: "\(path) is empty: there is nothing to search") }
        self.bytes = bytes
    }

    /// Whether `needle` occurs anywhere in the file (memchr for its first byte, then memcmp).
    public func contains(_ needle: [UInt8]) -> Bool {
        self.bytes.withUnsafeBytes { haystack in
            needle.withUnsafeBytes { pattern in
                guard let base = haystack.baseAddress, let start = pattern.baseAddress, let first = pattern.first, haystack.count >= pattern.count
                else { return false }
                var offset = 0
                let last = haystack.count - pattern.count
                while offset <= last, let hit = memchr(base + offset, Int32(first), last - offset + 1) {
                    offset = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(base + offset, start, pattern.count) == 0 { return true }
                    offset += 1
                }
                return false
            }
        }
    }

    /// How many of `needles` occur in the file.
    public func count(_ needles: [[UInt8]]) -> Int { needles.count { self.contains($0) } }
}
