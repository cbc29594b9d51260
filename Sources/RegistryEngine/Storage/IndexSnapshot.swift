import Glibc
import RegistryModel

/// A derived copy of the in-memory index, written at a clean close so that the next open can map it
/// instead of rebuilding it from every payload in LMDB.
///
/// LMDB stays the only durable truth; the snapshot is trusted for one open only, and only when all of
/// these hold (else the open loads everything from LMDB, as without a snapshot):
/// - it carries the random 16-byte token that the closing engine committed to `meta/snapshot_token`
///   *after* the file was complete and on disk (written, `fdatasync`ed, renamed, directory synced);
/// - the open's first write transaction reads and deletes that token, and the file leaves its name as
///   soon as it is opened (renamed to ``inUseSuffix``'s name, which no open reads), so any later
///   write, crash or copy of `data.mdb` without the file makes it worthless: a stale file can never
///   match a store that changed since. A clean close whose index has not changed since it was
///   loaded gives the file its name back and commits the same token again;
/// - its header checksum, every section's checksum and its per-registry template ids equal what the
///   load read from LMDB's records (template ids are never reused and payloads never change, so equal
///   ids in equal order mean equal rows).
///
/// An encrypted store gets no snapshot: it would put its templates on disk in the clear.
///
/// Layout (little-endian; sections start at multiples of ``alignment`` so that they can be mapped
/// where the index keeps its rows): a header, then per registry the sections
/// template ids (u64, ascending), rows (`stride` f32 each, in the same order), and, where the registry
/// has them, prefilter codes, bound terms and landmark masks (u32).
///
/// Header: magic `RGSNAP01` (8); format u32 (1); token (16); registry count u32;
/// per registry: id u32, algorithm version u32, row bytes u32, code bytes u32, count u64, then five
/// sections (ids, rows, codes, terms, masks), each offset u64, length u64, CRC-32C u32 (offset 0 and
/// length 0 when absent); then the CRC-32C of everything before it.
struct IndexSnapshot {
    static let fileName = "index.snapshot"
    static let magic = Array("RGSNAP01".utf8)
    static let format: UInt32 = 1
    /// Section alignment: a multiple of every page size Linux uses (4 KiB, 16 KiB, 64 KiB).
    static let alignment = 1 << 16

    enum Kind: Int, CaseIterable {
        case ids, rows, codes, terms, masks
    }

    struct Section: Equatable {
        var offset = 0
        var length = 0
        var checksum: UInt32 = 0
    }

    struct Registry: Equatable {
        var id: UInt32
        var algorithm: UInt32
        var rowBytes: Int
        var codeBytes: Int
        var count: Int
        var sections: [Section] = Array(repeating: Section(), count: Kind.allCases.count)

        subscript(kind: Kind) -> Section {
            get { self.sections[kind.rawValue] }
            set { self.sections[kind.rawValue] = newValue }
        }
    }

    var token: [UInt8]
    var registries: [Registry]

    /// Why a snapshot was not used (for the start-up log; never names template data).
    struct Unusable: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func path(in directory: String) -> String { directory + "/" + Self.fileName }

    /// The header's encoding, its checksum last.
    func encodedHeader() -> [UInt8] {
        var writer = ByteWriter(capacity: 64 + self.registries.count * 120)
        writer.append(bytes: Self.magic)
        writer.append(Self.format)
        writer.append(bytes: self.token)
        writer.append(UInt32(self.registries.count))
        for registry in self.registries {
            writer.append(registry.id)
            writer.append(registry.algorithm)
            writer.append(UInt32(registry.rowBytes))
            writer.append(UInt32(registry.codeBytes))
            writer.append(UInt64(registry.count))
            for section in registry.sections {
                writer.append(UInt64(section.offset))
                writer.append(UInt64(section.length))
                writer.append(section.checksum)
            }
        }
        var bytes = writer.bytes
        let checksum = CRC32C.checksum(bytes)
        withUnsafeBytes(of: checksum.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Decodes and checks a header read from the start of a file of `fileSize` bytes.
    init(decoding bytes: UnsafeRawBufferPointer, fileSize: Int) throws(Unusable) {
        do {
            var reader = ByteReader(bytes)
            guard try reader.readBytes(8).elementsEqual(Self.magic) else { throw Unusable("not a snapshot file") }
            let format: UInt32 = try reader.read()
            guard format == Self.format else { throw Unusable("snapshot format \(format), not \(Self.format)") }
            self.token = Array(try reader.readBytes(16))
            let count: UInt32 = try reader.read()
            guard count <= 1 << 16 else { throw Unusable("the header claims \(count) registries") }
            self.registries = []
            for _ in 0..<count {
                var registry = Registry(
                    id: try reader.read(), algorithm: try reader.read(), rowBytes: Int(try reader.read(UInt32.self)),
                    codeBytes: Int(try reader.read(UInt32.self)), count: 0)
                let rows: UInt64 = try reader.read()
                guard rows <= UInt64(fileSize) else { throw Unusable("the header claims \(rows) rows") }
                registry.count = Int(rows)
                for kind in Kind.allCases {
                    let offset: UInt64 = try reader.read()
                    let length: UInt64 = try reader.read()
                    let checksum: UInt32 = try reader.read()
                    guard offset % UInt64(Self.alignment) == 0, length <= UInt64(fileSize), offset <= UInt64(fileSize) - length else {
                        throw Unusable("a section lies outside the file")
                    }
                    registry[kind] = Section(offset: Int(offset), length: Int(length), checksum: checksum)
                }
                self.registries.append(registry)
            }
            let covered = reader.offset
            let checksum: UInt32 = try reader.read()
            guard checksum == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<covered])) else {
                throw Unusable("its header fails its checksum")
            }
        } catch let error as Unusable {
            throw error
        } catch {
            throw Unusable("its header is truncated")
        }
    }

    init(token: [UInt8], registries: [Registry]) {
        self.token = token
        self.registries = registries
    }

    /// Bytes the header takes, rounded up to a section boundary (where the first section starts).
    static func headerSpace(registries: Int) -> Int {
        let bytes = 8 + 4 + 16 + 4 + registries * (4 + 4 + 4 + 4 + 8 + Kind.allCases.count * 20) + 4
        return Self.aligned(bytes)
    }

    static func aligned(_ bytes: Int) -> Int { (bytes + Self.alignment - 1) / Self.alignment * Self.alignment }
}

// MARK: Writing

extension IndexSnapshot {
    /// Writes a snapshot file section by section through a buffer: each section's bytes come from
    /// `produce`, which is handed a sink it calls with consecutive pieces.
    final class Writer {
        private let fd: Int32
        private let path: String
        private var buffer: UnsafeMutableRawBufferPointer
        private var filled = 0
        private(set) var offset: Int

        /// Creates `path` (0600, replacing nothing: the caller removed any leftover) and leaves room
        /// for a header of `registries` entries.
        init(path: String, registries: Int) throws(Unusable) {
            self.path = path
            self.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard self.fd >= 0 else { throw Unusable("cannot create \(path): \(String(cString: strerror(errno)))") }
            self.buffer = .allocate(byteCount: 4 << 20, alignment: 64)
            self.offset = IndexSnapshot.headerSpace(registries: registries)
        }

        deinit {
            self.buffer.deallocate()
            close(self.fd)
        }

        /// Writes one section at the current offset (aligned), returning where it lies and its checksum.
        func section(_ produce: ((UnsafeRawBufferPointer) throws(Unusable) -> Void) throws(Unusable) -> Void) throws(Unusable) -> Section {
            let start = self.offset
            var crc = CRC32C()
            var length = 0
            try produce { (bytes: UnsafeRawBufferPointer) throws(Unusable) in
                crc.update(bytes)
                length += bytes.count
                try self.append(bytes)
            }
            try self.flush()
            self.offset = IndexSnapshot.aligned(start + length)
            return Section(offset: start, length: length, checksum: crc.value)
        }

        private func append(_ bytes: UnsafeRawBufferPointer) throws(Unusable) {
            var rest = bytes
            while !rest.isEmpty {
                let step = min(rest.count, self.buffer.count - self.filled)
                (self.buffer.baseAddress! + self.filled).copyMemory(from: rest.baseAddress!, byteCount: step)
                self.filled += step
                rest = UnsafeRawBufferPointer(rebasing: rest[step...])
                if self.filled == self.buffer.count { try self.flush() }
            }
        }

        /// Writes the buffer at the section's position (pwrite: the gaps between sections stay holes,
        /// which read as zeros).
        private func flush() throws(Unusable) {
            var written = 0
            while written < self.filled {
                let step = pwrite(self.fd, self.buffer.baseAddress! + written, self.filled - written, off_t(self.offset))
                if step < 0 && errno == EINTR { continue }
                guard step > 0 else { throw Unusable("cannot write \(self.path): \(String(cString: strerror(errno)))") }
                written += step
                self.offset += step
            }
            self.filled = 0
        }

        /// Writes the header at the start, sizes the file to the last section's boundary and makes
        /// it durable.
        func finish(_ snapshot: IndexSnapshot) throws(Unusable) {
            let header = snapshot.encodedHeader()
            precondition(header.count <= IndexSnapshot.headerSpace(registries: snapshot.registries.count))
            let written = header.withUnsafeBytes { pwrite(self.fd, $0.baseAddress!, $0.count, 0) }
            guard written == header.count else { throw Unusable("cannot write \(self.path): \(String(cString: strerror(errno)))") }
            guard ftruncate(self.fd, off_t(self.offset)) == 0, fdatasync(self.fd) == 0 else {
                throw Unusable("cannot write \(self.path): \(String(cString: strerror(errno)))")
            }
        }
    }
}

// MARK: Reading

extension IndexSnapshot {
    /// An opened snapshot file: its checked header and a descriptor to map its sections from. The
    /// file lies under its in-use name (``inUseSuffix``), or has none; unless ``keep()`` is called,
    /// that name is unlinked when this goes away.
    final class Opened: @unchecked Sendable {
        let header: IndexSnapshot
        let fd: Int32
        let size: Int
        /// Where the file lies while this open uses it, nil when it could not be renamed there and
        /// was unlinked instead.
        let inUse: String?
        private var kept = false

        fileprivate init(header: IndexSnapshot, fd: Int32, size: Int, inUse: String?) {
            self.header = header
            self.fd = fd
            self.size = size
            self.inUse = inUse
        }

        /// Leaves the file under its in-use name: the index now holds what it holds, and a clean
        /// close may give it its name back (the engine unlinks it at the index's first change).
        func keep() { self.kept = true }

        deinit {
            close(self.fd)
            if !self.kept, let inUse { unlink(inUse) }
        }
    }

    /// A snapshot file taken out of the data directory: opened, then renamed to its in-use name
    /// (``inUseSuffix``), before the open's first write transaction. ``open(token:)`` then decides
    /// whether it is used; one that is not (or not kept) is unlinked when it is let go, so that its
    /// disk space comes back whatever happens to the open (a full disk failing that transaction
    /// included).
    final class Taken {
        private var fd: Int32
        private let path: String
        private let inUse: String?
        private let failure: String?

        fileprivate init(fd: Int32, path: String, inUse: String?, failure: String?) {
            self.fd = fd
            self.path = path
            self.inUse = inUse
            self.failure = failure
        }

        deinit {
            guard self.fd >= 0 else { return }
            close(self.fd)
            if let inUse { unlink(inUse) }
        }

        /// The snapshot, if it decodes and carries `token` (the token the store held; nil: none).
        func open(token: [UInt8]?) throws(Unusable) -> Opened {
            if let failure { throw Unusable(failure) }
            guard let token else { throw Unusable("the store holds no token for it (the last stop did not write it, or the store changed since)") }
            var status = stat()
            guard fstat(self.fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { throw Unusable("\(self.path) is not a regular file") }
            let size = Int(status.st_size)
            var header = [UInt8](repeating: 0, count: min(size, 1 << 20))
            let read = header.withUnsafeMutableBytes { pread(self.fd, $0.baseAddress!, $0.count, 0) }
            guard read == header.count else { throw Unusable("cannot read \(self.path)") }
            let decoded = try header.withUnsafeBytes { bytes in Result { () throws(Unusable) in try IndexSnapshot(decoding: bytes, fileSize: size) } }
                .get()
            guard decoded.token == token else { throw Unusable("its token is not the store's (a snapshot of another state)") }
            defer { self.fd = -1 }
            return Opened(header: decoded, fd: self.fd, size: size, inUse: self.inUse)
        }
    }

    /// What a snapshot file's name becomes while an open uses it. A clean close whose index is still
    /// the one the file holds renames it back (``Engine/saveSnapshot()``) rather than writing the
    /// same bytes again; the first change to the index unlinks it; the next open removes one that a
    /// crash left (its token was taken by the open's first commit, so it matches nothing any more).
    static let inUseSuffix = ".in-use"

    /// Opens the snapshot in `directory` and takes it out of the way of later opens (renamed to its
    /// in-use name; unlinked if that fails), and removes a half-written one and one an earlier open
    /// left in use. Nil when there is none.
    static func take(from directory: String) -> Taken? {
        let path = Self.path(in: directory)
        unlink(path + Self.inUseSuffix)
        unlink(path + ".tmp")
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        let code = errno
        if fd < 0 && code == ENOENT { return nil }
        let failure = fd < 0 ? "cannot open \(path): \(String(cString: strerror(code)))" : nil
        // Whatever follows, the file is used at most by this open.
        let inUse = path + Self.inUseSuffix
        guard fd >= 0, rename(path, inUse) == 0 else {
            unlink(path)
            return Taken(fd: fd, path: path, inUse: nil, failure: failure)
        }
        return Taken(fd: fd, path: path, inUse: inUse, failure: failure)
    }
}
