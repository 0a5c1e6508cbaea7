import Foundation

/// An HTTP-date (RFC 9110 §5.6.7) read byte by byte.
///
/// Foundation's `DateFormatter` is not used: on Linux it traps (`Incorrect range CFRange`) on some non-ASCII input,
/// and a `Date` or `Retry-After` header comes from the server. A recipient must accept all three forms:
/// `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate, the only one a sender may use), `Sunday, 06-Nov-94 08:49:37 GMT`
/// (RFC 850) and `Sun Nov  6 08:49:37 1994` (asctime). Anything else, an impossible day or time included, is nil.
enum HTTPDate {
    private static let dayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDayNames = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    private static let monthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// The date `text` names, or nil.
    ///
    /// `now` places an RFC 850 two-digit year: never more than 50 years ahead.
    static func parse(_ text: String, now: Date = Date()) -> Date? {
        guard text.utf8.count <= 64 else { return nil }
        let bytes = Array(text.utf8)
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        var reader = Reader(bytes: bytes)
        if let date = imfFixdate(&reader) { return date }
        reader = Reader(bytes: bytes)
        if let date = rfc850(&reader, now: now) { return date }
        reader = Reader(bytes: bytes)
        return asctime(&reader)
    }

    /// An IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
    private static func imfFixdate(_ reader: inout Reader) -> Date? {
        guard reader.word(from: dayNames) != nil, reader.take(", "), let day = reader.digits(2), reader.take(" "),
            let month = reader.word(from: monthNames), reader.take(" "), let year = reader.digits(4), reader.take(" "),
            let time = reader.time(), reader.take(" GMT"), reader.atEnd
        else { return nil }
        return date(year: year, month: month + 1, day: day, time: time)
    }

    /// An RFC 850 date: `Sunday, 06-Nov-94 08:49:37 GMT`.
    private static func rfc850(_ reader: inout Reader, now: Date) -> Date? {
        guard reader.word(from: longDayNames) != nil, reader.take(", "), let day = reader.digits(2), reader.take("-"),
            let month = reader.word(from: monthNames), reader.take("-"), let twoDigits = reader.digits(2),
            reader.take(" "), let time = reader.time(), reader.take(" GMT"), reader.atEnd
        else { return nil }
        // RFC 9110 §5.6.7: a two-digit year more than 50 years ahead is the latest past year with those digits.
        let thisYear = year(of: now)
        var year = thisYear - (thisYear % 100 + 100) % 100 + twoDigits
        if year > thisYear + 50 { year -= 100 }
        return date(year: year, month: month + 1, day: day, time: time)
    }

    /// An asctime date, `Sun Nov  6 08:49:37 1994`: a one-digit day is padded with a space.
    private static func asctime(_ reader: inout Reader) -> Date? {
        guard reader.word(from: dayNames) != nil, reader.take(" "), let month = reader.word(from: monthNames),
            reader.take(" ")
        else { return nil }
        let day: Int?
        if reader.take(" ") { day = reader.digits(1) } else { day = reader.digits(2) }
        guard let day, reader.take(" "), let time = reader.time(), reader.take(" "), let year = reader.digits(4),
            reader.atEnd
        else { return nil }
        return date(year: year, month: month + 1, day: day, time: time)
    }

    /// The UTC instant, or nil for a day the month does not have or a time out of range (a leap second, :60, only
    /// ends the last minute of a day).
    private static func date(year: Int, month: Int, day: Int, time: (hour: Int, minute: Int, second: Int)) -> Date? {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard day >= 1, day <= lengths[month - 1], time.hour < 24, time.minute < 60,
            time.second < 60 || (time.second == 60 && time.hour == 23 && time.minute == 59)
        else {
            return nil
        }
        // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + time.hour * 3_600 + time.minute * 60 + time.second
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// The UTC year `date` falls in (Howard Hinnant's civil_from_days).
    private static func year(of date: Date) -> Int {
        let interval = date.timeIntervalSince1970
        guard interval.isFinite, abs(interval) < 1e13 else { return 1970 }
        let seconds = Int(interval.rounded(.down))
        let days = (seconds >= 0 ? seconds : seconds - 86_399) / 86_400 + 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        return yearOfEra + era * 400 + (monthIndex >= 10 ? 1 : 0)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        /// Consumes `literal` when the text goes on with it (byte-exact: HTTP-date is case-sensitive).
        mutating func take(_ literal: String) -> Bool {
            let count = literal.utf8.count
            guard bytes.count - index >= count, literal.utf8.elementsEqual(bytes[index..<index + count]) else {
                return false
            }
            index += count
            return true
        }

        /// Consumes one of `words`, returning its position.
        mutating func word(from words: [String]) -> Int? {
            for (position, word) in words.enumerated() {
                let count = word.utf8.count
                if bytes.count - index >= count, word.utf8.elementsEqual(bytes[index..<index + count]) {
                    index += count
                    return position
                }
            }
            return nil
        }

        /// Consumes exactly `count` ASCII digits.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count - index >= count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }

        /// `HH:MM:SS`, two digits each.
        mutating func time() -> (hour: Int, minute: Int, second: Int)? {
            guard let hour = digits(2), take(":"), let minute = digits(2), take(":"), let second = digits(2) else {
                return nil
            }
            return (hour, minute, second)
        }
    }
}
