import RegistryModel

/// An audit entry's stored form (little-endian): i64 time, u32 uid, i32 pid, operation, gallery, u16
/// count and the identifiers, outcome, f32 score (NaN: none), error code ("" : none), then, only when
/// the entry stands for more than one request, a u32 count; strings as u16 length and UTF-8, each cut
/// to ``maximumStringBytes``. Entries are stored in blocks (``AuditBlock``).
///
/// The count is a trailing field rather than a new schema: an entry's frame gives its length, so an
/// entry without it (every entry written before it existed) reads as one request, and an older
/// daemon reading a newer store stops before it.
extension AuditEntry {
    /// The longest string an entry keeps (a name cut short is still a name an operator recognises;
    /// requests are bounded before they are audited, so this only guards the encoder).
    static let maximumStringBytes = 1_024
    /// The most identifiers an entry keeps (identify lists those it found; no operation lists more
    /// than a reply does).
    static let maximumIdentifiers = 1_024

    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        self.encode(into: &writer)
        return writer.bytes
    }

    func encode(into writer: inout ByteWriter) {
        Self.encode(
            into: &writer, time: self.time, uid: self.uid, pid: self.pid, operation: self.operation, gallery: self.gallery,
            identifiers: self.identifiers, outcome: self.outcome, score: self.score, errorCode: self.errorCode, count: self.count)
    }

    /// An entry's stored form from its parts, without an entry value.
    static func encode(
        into writer: inout ByteWriter, time: Int64, uid: UInt32, pid: Int32, operation: String, gallery: String, identifiers: [String],
        outcome: AuditOutcome, score: Float?, errorCode: String?, count: UInt32 = 1
    ) {
        let cut = Self.maximumStringBytes
        writer.append(time)
        writer.append(uid)
        writer.append(pid)
        writer.append(string: operation, cutTo: cut)
        writer.append(string: gallery, cutTo: cut)
        let kept = identifiers.prefix(Self.maximumIdentifiers)
        writer.append(UInt16(kept.count))
        for identifier in kept { writer.append(string: identifier, cutTo: cut) }
        writer.append(string: outcome.rawValue, cutTo: cut)
        writer.append(score ?? .nan)
        writer.append(string: errorCode ?? "", cutTo: cut)
        if count != 1 { writer.append(count) }
    }

    init(decoding bytes: UnsafeRawBufferPointer) throws(StoreCorruption) {
        var reader = ByteReader(bytes)
        do {
            let time: Int64 = try reader.read()
            let uid: UInt32 = try reader.read()
            let pid: Int32 = try reader.read()
            let operation = try reader.readString()
            let gallery = try reader.readString()
            let identifierCount: UInt16 = try reader.read()
            var identifiers: [String] = []
            for _ in 0..<identifierCount { identifiers.append(try reader.readString()) }
            let outcome = try reader.readString()
            let score = try reader.read(Float.self)
            let code = try reader.readString()
            let count: UInt32 = reader.remaining == 0 ? 1 : try reader.read()
            self.init(
                time: time, uid: uid, pid: pid, operation: operation, gallery: gallery, identifiers: identifiers,
                outcome: AuditOutcome(rawValue: outcome), score: score.isNaN ? nil : score, errorCode: code.isEmpty ? nil : code,
                count: count)
        } catch {
            throw StoreCorruption("truncated audit entry")
        }
    }
}

/// One record of the `audit` database (schema 4): up to ``maximumEntries`` entries in the order they
/// were recorded, as u32 count ‖ i64 oldest time ‖ i64 newest time ‖ the entries, each framed as u32
/// length ‖ entry. Its key is the time of its first entry when written (big-endian) ‖ a u32 sequence.
///
/// Blocks rather than a record per entry: at a hundred thousand authentications a second, a record
/// per entry cost the writer a B-tree insertion per request, and retention as many deletions.
/// The header's times let a query skip a block and retention drop a whole block without decoding it.
enum AuditBlock {
    static let headerSize = 20
    /// Entries per block at most: small enough that retention and queries touch little beyond what
    /// they need, large enough that a flush writes few records.
    static let maximumEntries = 256

    struct Header {
        var count: Int
        var oldest: Int64
        var newest: Int64
    }

    static func header(_ value: UnsafeRawBufferPointer) throws(StoreCorruption) -> Header {
        guard value.count >= Self.headerSize else { throw StoreCorruption("an audit block of \(value.count) bytes") }
        return Header(
            count: Int(UInt32(littleEndian: value.loadUnaligned(as: UInt32.self))),
            oldest: Int64(littleEndian: value.loadUnaligned(fromByteOffset: 4, as: Int64.self)),
            newest: Int64(littleEndian: value.loadUnaligned(fromByteOffset: 12, as: Int64.self)))
    }

    /// The framed entries of a block, in place; throws unless they fill it exactly and match its count.
    static func entries(_ value: UnsafeRawBufferPointer) throws(StoreCorruption) -> [UnsafeRawBufferPointer] {
        let header = try Self.header(value)
        var entries: [UnsafeRawBufferPointer] = []
        entries.reserveCapacity(header.count)
        var offset = Self.headerSize
        while offset < value.count {
            guard let entry = Self.entry(in: value, at: offset) else { throw StoreCorruption("a truncated audit block") }
            entries.append(entry)
            offset += 4 + entry.count
        }
        guard entries.count == header.count else {
            throw StoreCorruption("an audit block of \(entries.count) entries that says \(header.count)")
        }
        return entries
    }

    /// The entry framed at `offset` of `bytes`, or nil when its frame runs past the end.
    static func entry(in bytes: UnsafeRawBufferPointer, at offset: Int) -> UnsafeRawBufferPointer? {
        guard bytes.count - offset >= 4 else { return nil }
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        guard length >= 8, bytes.count - offset - 4 >= length else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + 4 + length)])
    }

    /// An encoded entry's time (its first field).
    static func time(of entry: UnsafeRawBufferPointer) -> Int64 {
        Int64(littleEndian: entry.loadUnaligned(as: Int64.self))
    }

    /// Appends an entry framed (u32 length ‖ what `encode` writes) to `writer`.
    static func appendFramed(to writer: inout ByteWriter, _ encode: (inout ByteWriter) -> Void) {
        let start = writer.count
        writer.append(UInt32(0))
        encode(&writer)
        writer.setUInt32(UInt32(writer.count - start - 4), at: start)
    }

    /// The block of the framed entries `framed` (back to back, as ``appendFramed(to:_:)`` writes them),
    /// its header counted from them.
    static func block(framed: UnsafeRawBufferPointer) -> [UInt8] {
        var (count, oldest, newest) = (0, Int64.max, Int64.min)
        var offset = 0
        while let entry = Self.entry(in: framed, at: offset) {
            let time = Self.time(of: entry)
            (count, oldest, newest) = (count + 1, min(oldest, time), max(newest, time))
            offset += 4 + entry.count
        }
        // Only ever given frames this process wrote or already checked.
        precondition(offset == framed.count, "audit entries framed past the end of their buffer")
        var writer = ByteWriter(capacity: Self.headerSize + framed.count)
        writer.append(UInt32(count))
        writer.append(oldest)
        writer.append(newest)
        writer.append(bytes: framed)
        return writer.bytes
    }
}
