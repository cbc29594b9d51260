import Glibc

/// Files the kernel generates (`/proc`, `/sys`): read whole with stdio, since their size is
/// unknown until read (`stat` says 0).
public enum KernelFile {
    /// The file's text, or nil when it cannot be opened.
    public static func text(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
