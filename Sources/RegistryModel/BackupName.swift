import Glibc

/// The names of backup directories: the copy's UTC start time in ISO 8601's basic format
/// (`20261126T234000Z`), which sorts by time as text and has no `:` for `scp` or `tar` to misread,
/// and `-2`, `-3`, … after it for a second copy started in the same second (or when something else
/// already has the name). The daemon names the copies it writes (`Engine.backup(into:)`), and
/// `registryctl backup --keep` recognises them by these names, so both use this one definition.
public enum BackupName {
    /// The name of a backup started at `time`, without a suffix.
    public static func name(at time: time_t) -> String {
        var seconds = time
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return digits(parts.tm_year + 1900, 4) + digits(parts.tm_mon + 1, 2) + digits(parts.tm_mday, 2) + "T"
            + digits(parts.tm_hour, 2) + digits(parts.tm_min, 2) + digits(parts.tm_sec, 2) + "Z"
    }

    /// The name of the `sequence`th backup started at `time`: ``name(at:)`` for the first, then with
    /// `-2`, `-3`, …
    public static func name(at time: time_t, sequence: Int) -> String {
        sequence <= 1 ? Self.name(at: time) : Self.name(at: time) + "-\(sequence)"
    }

    /// The start time (seconds since the epoch) and sequence number (1 without a suffix) of a name
    /// ``name(at:sequence:)`` makes; nil for any other name, an impossible date (a 30 February, an
    /// hour 24) included, so that nothing but a backup is ever taken for one.
    public static func parse(_ name: String) -> (time: Int64, sequence: Int)? {
        let bytes = Array(name.utf8)
        guard bytes.count >= 16, bytes[8] == UInt8(ascii: "T"), bytes[15] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard bytes[range].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
            return bytes[range].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8), let hour = number(9..<11),
            let minute = number(11..<13), let second = number(13..<15)
        else { return nil }
        var sequence = 1
        if bytes.count > 16 {
            // "-N" with N at least 2, written without leading zeros (as name(at:sequence:) writes it).
            guard bytes[16] == UInt8(ascii: "-"), bytes.count > 17, bytes.count <= 26, bytes[17] != UInt8(ascii: "0"),
                let suffix = number(17..<bytes.count), suffix >= 2
            else { return nil }
            sequence = suffix
        }
        guard (1...12).contains(month), hour < 24, minute < 60, second < 60 else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let time = timegm(&parts)
        // timegm normalises a day out of range (31 April becomes 1 May): such a name is not one we make.
        guard Self.name(at: time) == String(decoding: bytes[0..<16], as: UTF8.self) else { return nil }
        return (Int64(time), sequence)
    }
}
