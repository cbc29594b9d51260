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

    /// The 32 bytes of a key given as 32 bytes, or as 64 hexadecimal characters (white space
    /// ignored): the store's key and the fleet key. The copies made on the way are wiped; the caller
    /// wipes `material` and the result.
    /// - Throws: ``RegistryError`` (`malformedRequest`) for any other key material.
    public static func keyBytes(_ material: [UInt8]) throws(RegistryError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        if material.count == 32 {
            for index in 0..<32 { bytes[index] = material[index] }
            return bytes
        }
        // Hexadecimal read byte by byte, without a String: a string's storage could not be wiped.
        var nibbles = 0
        for character in material {
            let value: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = character - UInt8(ascii: "A") + 10
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
            default:
                Self.wipe(&bytes)
                throw .malformedRequest("an encryption key is 32 bytes, or 64 hexadecimal characters")
            }
            guard nibbles < 64 else {
                Self.wipe(&bytes)
                throw .malformedRequest("an encryption key is 32 bytes, or 64 hexadecimal characters")
            }
            bytes[nibbles / 2] |= nibbles % 2 == 0 ? value << 4 : value
            nibbles += 1
        }
        guard nibbles == 64 else {
            Self.wipe(&bytes)
            throw .malformedRequest("an encryption key is 32 bytes, or 64 hexadecimal characters")
        }
        return bytes
    }
}
