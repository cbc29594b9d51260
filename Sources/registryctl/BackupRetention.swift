import Glibc
import RegistryCtlInput
import RegistryModel

/// Timestamped backups side by side in one directory (`registryctl backup --keep N`, what the backup
/// timer runs): the daemon names each by its UTC start time (``BackupName``), and all but the newest
/// few are removed after a successful backup.
///
/// Removing a backup wipes its files with zeros before unlinking them. A backup holds the templates
/// of people erased since it was taken, so an erasure is complete on this machine only when the last
/// backup older than it is gone; unlinking alone would leave their blocks on the disk as it does for
/// any deleted file (the store wipes its own freed pages the same way). The limits of overwriting in
/// place (copy-on-write file systems, an SSD's remapping) are the store's too: docs/security.md.
///
/// A name later than now is not a backup this machine made: whoever can write the directory could
/// plant one (`29991231T000000Z`), and counted as the newest it would make the copy just taken the
/// oldest, removed at once. Such names are never counted nor removed.
enum BackupRetention {
    /// How far ahead of this machine's clock a backup's name may be and still count (a daemon whose
    /// clock runs a little ahead of registryctl's).
    static let clockSlack: Int64 = 60

    /// Whether `name` is one the daemon gives its backups (``BackupName``). Nothing else in the
    /// directory is ever touched.
    static func isBackupName(_ name: String) -> Bool { BackupName.parse(name) != nil }

    /// The directory holding the backup `path` (`/` for one at the top).
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// What pruning did.
    struct Outcome: Equatable {
        /// The backups removed, oldest first.
        var removed: [String] = []
        /// Why a backup that should have gone is still there, one line each.
        var problems: [String] = []
    }

    /// Removes the backups in `directory` beyond the newest `keep`. Only directories with a backup's
    /// name no later than `now` (and ``clockSlack``) and a `manifest.json` count, so a copy that
    /// failed half-way is neither kept in place of a good one nor removed, and a name from the future
    /// neither.
    static func prune(directory: String, keep: Int, now: Int64 = Int64(time(nil))) -> Outcome {
        var outcome = Outcome()
        let backups: [String]
        do {
            let named = try self.entries(of: directory).compactMap { name -> (name: String, time: Int64, sequence: Int)? in
                guard let (time, sequence) = BackupName.parse(name), time <= now + Self.clockSlack else { return nil }
                return (name, time, sequence)
            }
            backups = named.filter { self.exists(directory + "/" + $0.name + "/manifest.json") }
                .sorted { ($0.time, $0.sequence) < ($1.time, $1.sequence) }.map(\.name)
        } catch {
            outcome.problems.append(error.description)
            return outcome
        }
        for name in backups.dropLast(keep) {
            do {
                try self.remove(backup: directory + "/" + name)
                outcome.removed.append(name)
            } catch {
                outcome.problems.append(error.description)
            }
        }
        return outcome
    }

    private static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    private static func entries(of directory: String) throws(OutputFileError) -> [String] {
        guard let stream = opendir(directory) else {
            throw OutputFileError(file: directory, message: "cannot read the directory: \(errnoDescription())")
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Wipes and unlinks the regular files of one backup, then removes its directory. Symbolic links
    /// are unlinked, never followed; anything else (a subdirectory) leaves the directory in place and
    /// is reported.
    private static func remove(backup path: String) throws(OutputFileError) {
        let directory = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard directory >= 0 else { throw OutputFileError(file: path, message: "cannot open: \(errnoDescription())") }
        defer { close(directory) }
        for name in try self.entries(of: path) {
            var status = stat()
            guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
                throw OutputFileError(file: path + "/" + name, message: "cannot read: \(errnoDescription())")
            }
            if (status.st_mode & S_IFMT) == S_IFREG {
                try self.wipe(path + "/" + name, in: directory, name: name, size: Int(status.st_size))
            }
            guard unlinkat(directory, name, 0) == 0 else {
                throw OutputFileError(file: path + "/" + name, message: "cannot remove: \(errnoDescription())")
            }
        }
        guard rmdir(path) == 0 else { throw OutputFileError(file: path, message: "cannot remove: \(errnoDescription())") }
    }

    private static func wipe(_ path: String, in directory: Int32, name: String, size: Int) throws(OutputFileError) {
        let fd = openat(directory, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw OutputFileError(file: path, message: "cannot open to wipe: \(errnoDescription())") }
        defer { close(fd) }
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        while offset < size {
            let count = min(zeros.count, size - offset)
            let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress!, count, off_t(offset)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw OutputFileError(file: path, message: "cannot wipe: \(errnoDescription())") }
            offset += written
        }
        // The zeros must reach the disk before the name goes, or the blocks are freed still holding data.
        guard fdatasync(fd) == 0 else { throw OutputFileError(file: path, message: "cannot wipe: \(errnoDescription())") }
    }
}
