/// ISO-8601 UTC timestamps from microseconds since the Unix epoch, computed directly (civil-from-days,
/// proleptic Gregorian calendar), so no calendar or formatter is needed.
public enum Timestamp {
    /// `2024-05-01T12:34:56.123456Z` (microseconds always shown).
    public static func iso8601(micros: Int64) -> String {
        let (seconds, micro) = Self.floorDivide(micros, 1_000_000)
        let (days, secondOfDay) = Self.floorDivide(seconds, 86_400)
        let (year, month, day) = Self.civil(fromDays: days)
        let hour = secondOfDay / 3600
        let minute = secondOfDay % 3600 / 60
        let second = secondOfDay % 60
        let yearText = year >= 0 && year <= 9999 ? Self.pad(year, 4) : (year < 0 ? "-" + Self.pad(-year, 6) : "+" + Self.pad(year, 6))
        return
            "\(yearText)-\(Self.pad(month, 2))-\(Self.pad(day, 2))T\(Self.pad(hour, 2)):\(Self.pad(minute, 2)):\(Self.pad(second, 2)).\(Self.pad(micro, 6))Z"
    }

    /// Microseconds since the epoch of an ISO-8601 date and time as ``iso8601(micros:)`` prints it,
    /// `2024-05-01T12:34:56.123456Z`, with any number of fraction digits (or none), `Z` or an offset
    /// such as `+02:00`; or a date alone (`2024-05-01`: its midnight UTC). Nil for anything else, a
    /// 30 February included.
    public static func micros(iso8601 text: String) -> Int64? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= bytes.count, range.allSatisfy({ (0x30...0x39).contains(bytes[$0]) }) else { return nil }
            return range.reduce(0) { $0 * 10 + Int64(bytes[$1] - 0x30) }
        }
        func byte(_ index: Int, is character: Character) -> Bool { index < bytes.count && bytes[index] == character.asciiValue! }
        guard let year = number(0..<4), byte(4, is: "-"), let month = number(5..<7), byte(7, is: "-"), let day = number(8..<10),
            (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        let days = Self.days(fromCivil: year, month, day)
        guard Self.civil(fromDays: days) == (year, month, day) else { return nil }  // 30 February
        guard bytes.count > 10 else { return days * 86_400_000_000 }
        guard byte(10, is: "T") || byte(10, is: " "), let hour = number(11..<13), byte(13, is: ":"), let minute = number(14..<16),
            byte(16, is: ":"), let second = number(17..<19), hour < 24, minute < 60, second < 60
        else { return nil }
        var index = 19
        var micro: Int64 = 0
        if byte(index, is: ".") {
            index += 1
            var digits = 0
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                if digits < 6 { micro = micro * 10 + Int64(bytes[index] - 0x30) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 6) { micro *= 10 }
        }
        var offset: Int64 = 0
        if byte(index, is: "Z") {
            index += 1
        } else if byte(index, is: "+") || byte(index, is: "-") {
            guard let hours = number(index + 1..<index + 3), byte(index + 3, is: ":"), let minutes = number(index + 4..<index + 6),
                hours < 24, minutes < 60
            else { return nil }
            offset = (hours * 3600 + minutes * 60) * (byte(index, is: "-") ? -1 : 1)
            index += 6
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        return ((days * 86_400 + hour * 3600 + minute * 60 + second) - offset) * 1_000_000 + micro
    }

    /// Days since 1970-01-01 of a date (Howard Hinnant's `days_from_civil`).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value / divisor
        let remainder = value % divisor
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
