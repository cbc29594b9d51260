import RegistryModel

/// Little-endian record encoding for values, big-endian for keys (so keys sort numerically).
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 64) {
        self.bytes.reserveCapacity(capacity)
    }

    /// An empty writer over `storage`'s allocation (emptied, its capacity kept).
    init(recycling storage: [UInt8]) {
        self.bytes = storage
        self.bytes.removeAll(keepingCapacity: true)
    }

    var count: Int { self.bytes.count }

    /// Overwrites four bytes written earlier (a length known only after what follows it).
    mutating func setUInt32(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { value in
            for index in 0..<4 { self.bytes[offset + index] = value[index] }
        }
    }

    mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
    }

    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { self.bytes.append(contentsOf: $0) }
    }

    mutating func append(_ value: Float) {
        self.append(value.bitPattern)
    }

    mutating func append(bytes: some Sequence<UInt8>) {
        self.bytes.append(contentsOf: bytes)
    }

    /// A string as a 16-bit length and its UTF-8 bytes (read in place: no array per string), cut to
    /// `maximum` bytes (at most 65,535, what the length can say) at a character boundary. Never traps:
    /// what is stored is bounded where it enters (names are validated before they are written), so
    /// a cut here only keeps a bug elsewhere from stopping the daemon.
    mutating func append(string: String, cutTo maximum: Int = Int(UInt16.max)) {
        var string = string
        let maximum = min(maximum, Int(UInt16.max))
        if string.utf8.count > maximum { string = Names.cut(string, toBytes: maximum) }
        string.withUTF8 { utf8 in
            self.append(UInt16(utf8.count))
            self.bytes.append(contentsOf: utf8)
        }
    }
}

/// Reads what ``ByteWriter`` wrote; a record that ends early throws instead of reading past it.
struct ByteReader {
    struct Truncated: Error {}

    private let buffer: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ buffer: UnsafeRawBufferPointer) {
        self.buffer = buffer
    }

    var remaining: Int { self.buffer.count - self.offset }

    mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws(Truncated) -> T {
        guard self.remaining >= MemoryLayout<T>.size else { throw Truncated() }
        let value = self.buffer.loadUnaligned(fromByteOffset: self.offset, as: T.self)
        self.offset += MemoryLayout<T>.size
        return T(littleEndian: value)
    }

    mutating func readBigEndian<T: FixedWidthInteger>(_: T.Type = T.self) throws(Truncated) -> T {
        guard self.remaining >= MemoryLayout<T>.size else { throw Truncated() }
        let value = self.buffer.loadUnaligned(fromByteOffset: self.offset, as: T.self)
        self.offset += MemoryLayout<T>.size
        return T(bigEndian: value)
    }

    mutating func read(_: Float.Type) throws(Truncated) -> Float {
        Float(bitPattern: try self.read(UInt32.self))
    }

    mutating func readString() throws(Truncated) -> String {
        let count = Int(try self.read(UInt16.self))
        return String(decoding: try self.readBytes(count), as: UTF8.self)
    }

    mutating func readBytes(_ count: Int) throws(Truncated) -> UnsafeRawBufferPointer {
        guard self.remaining >= count else { throw Truncated() }
        defer { self.offset += count }
        return UnsafeRawBufferPointer(rebasing: self.buffer[self.offset..<(self.offset + count)])
    }
}

extension Array where Element == UInt8 {
    /// The big-endian bytes of an integer, as a key.
    init<T: FixedWidthInteger>(bigEndian value: T) {
        self = Swift.withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }
}

extension UnsafeRawBufferPointer {
    /// Reads a big-endian integer at `offset` (keys).
    func loadBigEndian<T: FixedWidthInteger>(at offset: Int = 0, as: T.Type = T.self) -> T {
        T(bigEndian: self.loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
