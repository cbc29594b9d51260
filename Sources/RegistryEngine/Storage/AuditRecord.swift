import RegistryModel

/// An audit entry's stored form (the `audit` database; little-endian): i64 time, u32 uid, i32 pid,
/// operation, gallery, u16 count and the identifiers, outcome, f32 score (NaN: none), error code
/// ("" : none); strings as u16 length and UTF-8.
extension AuditEntry {
    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        writer.append(self.time)
        writer.append(self.uid)
        writer.append(self.pid)
        writer.append(string: self.operation)
        writer.append(string: self.gallery)
        writer.append(UInt16(self.identifiers.count))
        for identifier in self.identifiers { writer.append(string: identifier) }
        writer.append(string: self.outcome)
        writer.append(self.score ?? .nan)
        writer.append(string: self.errorCode ?? "")
        return writer.bytes
    }

    init(decoding bytes: UnsafeRawBufferPointer) throws(StoreCorruption) {
        var reader = ByteReader(bytes)
        do {
            let time: Int64 = try reader.read()
            let uid: UInt32 = try reader.read()
            let pid: Int32 = try reader.read()
            let operation = try reader.readString()
            let gallery = try reader.readString()
            let count: UInt16 = try reader.read()
            var identifiers: [String] = []
            for _ in 0..<count { identifiers.append(try reader.readString()) }
            let outcome = try reader.readString()
            let score = try reader.read(Float.self)
            let code = try reader.readString()
            self.init(
                time: time, uid: uid, pid: pid, operation: operation, gallery: gallery, identifiers: identifiers,
                outcome: outcome, score: score.isNaN ? nil : score, errorCode: code.isEmpty ? nil : code)
        } catch {
            throw StoreCorruption("truncated audit entry")
        }
    }
}
