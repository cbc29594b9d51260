import Glibc

/// Key material in memory.
public enum KeyMaterial {
    /// Overwrites `bytes` with zeros before its storage is released (explicit_bzero: not optimised
    /// away as a store to memory about to be freed could be). Best effort: a copy the array shared its
    /// storage with before is wiped only if it is this storage; callers keep key bytes in one array.
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
        }
    }
}
