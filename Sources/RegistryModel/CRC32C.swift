import CChecksum

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the engine's template
/// records and payloads (RegistryEngine's `TemplateRecord`) and of registryctl's dumps (their
/// trailer). Start-up checks every payload byte: with the CPU's crc32 instruction where it has one
/// (SSE4.2, chosen at run time), else slicing-by-8 over eight 256-entry tables (the byte-at-a-time
/// loop would cost seconds on a million templates).
///
/// Here rather than in the engine because registryctl, which must not depend on the engine, checks
/// dumps with it: one implementation, whose two paths StoreChecksTests compare, rather than a copy.
/// That makes the model depend on CScanKernels, for the crc32 instruction only.
package struct CRC32C {
    private(set) var state: UInt32 = 0xFFFF_FFFF

    /// The checksum of everything passed to ``update(_:)`` so far.
    package var value: UInt32 { ~self.state }

    package init() {}

    /// The checksum of `bytes` alone.
    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32C()
        crc.update(bytes)
        return crc.value
    }

    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { Self.checksum($0) }
    }

    /// Whether the crc32 instruction is used (tests compare both paths).
    static let hasInstruction = rk_has_crc32c() != 0

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        if Self.hasInstruction {
            self.state = rk_crc32c_update(self.state, bytes.baseAddress, bytes.count)
        } else {
            self.updateWithTables(bytes)
        }
    }

    /// The portable path.
    mutating func updateWithTables(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        var crc = self.state
        Self.tables.withUnsafeBufferPointer { t in
            var offset = 0
            let count = bytes.count
            while count - offset >= 8 {
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                let low = UInt32(truncatingIfNeeded: word) ^ crc
                let high = UInt32(truncatingIfNeeded: word >> 32)
                crc =
                    t[7 << 8 | Int(low & 0xFF)] ^ t[6 << 8 | Int(low >> 8 & 0xFF)]
                    ^ t[5 << 8 | Int(low >> 16 & 0xFF)] ^ t[4 << 8 | Int(low >> 24)]
                    ^ t[3 << 8 | Int(high & 0xFF)] ^ t[2 << 8 | Int(high >> 8 & 0xFF)]
                    ^ t[1 << 8 | Int(high >> 16 & 0xFF)] ^ t[Int(high >> 24)]
                offset += 8
            }
            while offset < count {
                crc = t[Int((crc ^ UInt32(bytes[offset])) & 0xFF)] ^ (crc >> 8)
                offset += 1
            }
        }
        self.state = crc
    }

    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { self.update($0) }
    }

    /// Table k (entries k·256 …) advances a byte's contribution by k further bytes.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[byte] = crc
        }
        for k in 1..<8 {
            for byte in 0..<256 {
                let previous = tables[(k - 1) << 8 | byte]
                tables[k << 8 | byte] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()
}
