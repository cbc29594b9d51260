import Glibc

/// A file as the kernel names it in `/proc/self/maps`: its device and inode, which, unlike a path,
/// cannot name another file (a longer path that ends the same way, a file renamed or replaced since).
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64

    init(_ info: stat) {
        self.device = UInt64(info.st_dev)
        self.inode = UInt64(info.st_ino)
    }

    /// `major:minor` as `/proc/self/maps` prints the device (glibc's `gnu_dev_major`/`gnu_dev_minor`
    /// split of `dev_t`, each in hexadecimal).
    var mapsDevice: (major: UInt64, minor: UInt64) {
        ((self.device >> 8) & 0xfff | (self.device >> 32) & ~0xfff, self.device & 0xff | (self.device >> 12) & ~0xff)
    }
}

/// One mapping of a file in this process.
struct FileMapping: Equatable, Sendable {
    var start: UInt
    var length: Int
    /// Where in the file the mapping begins.
    var offset: UInt64
}

enum FileMappings {
    /// This process's mappings of `file`, in address order, read from `/proc/self/maps` (LMDB does not
    /// expose where it mapped `data.mdb`: `me_mapaddr` is only the `MDB_FIXEDMAP` address). Empty when
    /// there is none or the table cannot be read.
    static func of(_ file: FileIdentity) -> [FileMapping] {
        guard let maps = fopen("/proc/self/maps", "r") else { return [] }
        defer { fclose(maps) }
        let (major, minor) = file.mapsDevice
        var line = [CChar](repeating: 0, count: 4096)
        var found: [FileMapping] = []
        while fgets(&line, Int32(line.count), maps) != nil {
            // "start-end perms offset major:minor inode path": the path (which may hold spaces) is not read.
            let text = String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, UInt64(fields[4]) == file.inode else { continue }
            let device = fields[3].split(separator: ":")
            guard device.count == 2, UInt64(device[0], radix: 16) == major, UInt64(device[1], radix: 16) == minor else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16), start != 0, end > start,
                let offset = UInt64(fields[2], radix: 16)
            else { continue }
            found.append(FileMapping(start: start, length: Int(end - start), offset: offset))
        }
        return found
    }
}
