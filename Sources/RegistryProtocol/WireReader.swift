/// Protobuf's wire format over a range of bytes; every read returns nil on malformed input.
struct WireReader {
    enum WireType: UInt64 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case startGroup = 3
        case endGroup = 4
        case fixed32 = 5
    }

    let bytes: UnsafeRawBufferPointer
    private var index: Int
    private let end: Int

    init(bytes: UnsafeRawBufferPointer, range: Range<Int>) {
        self.bytes = bytes
        self.index = range.lowerBound
        self.end = range.upperBound
    }

    var atEnd: Bool { self.index >= self.end }
    /// How many bytes are left.
    var remaining: Int { self.end - self.index }

    private mutating func skip(_ count: Int) {
        self.index += count
    }

    /// Steps over a fixed-size value (4 or 8 bytes), or returns nil when it runs past the end.
    mutating func fixed(_ size: Int) -> Range<Int>? {
        guard self.remaining >= size else { return nil }
        let range = self.index..<self.index + size
        self.skip(size)
        return range
    }

    /// A varint of at most 10 bytes whose value fits 64 bits.
    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while self.index < self.end {
            let byte = UInt64(self.bytes[self.index])
            self.index += 1
            if shift == 63 && byte > 1 { return nil }
            value |= (byte & 0x7f) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    /// A field's number (1 or more) and wire type.
    mutating func tag() -> (field: UInt64, wireType: WireType)? {
        guard let key = self.varint(), key >> 3 > 0, let wireType = WireType(rawValue: key & 7) else { return nil }
        return (key >> 3, wireType)
    }

    /// The range of a length-delimited field's bytes, which must lie inside this reader's range.
    mutating func lengthDelimited() -> Range<Int>? {
        guard let length = self.varint(), length <= UInt64(self.end - self.index) else { return nil }
        let range = self.index..<self.index + Int(length)
        self.index = range.upperBound
        return range
    }

    /// A string field: valid UTF-8, or nil.
    mutating func string() -> String? {
        guard let range = self.lengthDelimited() else { return nil }
        let text = UnsafeRawBufferPointer(rebasing: self.bytes[range])
        // Names are ASCII in practice: ASCII is valid UTF-8, and decoding it needs no validation (the
        // generic validating initialiser looks its encoding's metadata up on every call).
        if text.allSatisfy({ $0 < 0x80 }) { return String(decoding: text, as: UTF8.self) }
        return String(validating: text, as: UTF8.self)
    }
}
