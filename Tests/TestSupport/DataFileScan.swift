import Glibc

/// What a privacy audit of a store does: read `directory/data.mdb` whole and look for bytes in it
/// (never printing them: they are template data).
public struct DataFileScan {
    public let bytes: [UInt8]

    /// The whole of `directory/data.mdb` (empty when it cannot be read).
    public init(directory: String) {
        self.bytes = readFileBytes(directory + "/data.mdb") ?? []
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
