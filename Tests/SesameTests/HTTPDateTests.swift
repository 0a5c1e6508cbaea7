import Foundation
import Testing

@testable import Sesame

/// HTTP-dates from `Date` and `Retry-After` headers (RFC 9110 §5.6.7): the server's text, read without Foundation's
/// `DateFormatter`, which traps on some non-ASCII input on Linux (the token-response fuzz target found it).
@Suite struct HTTPDateTests {
    /// 2026-12-03T00:00:00Z, for the RFC 850 two-digit year.
    let now = Date(timeIntervalSince1970: 1_796_256_000)

    @Test("The three forms RFC 9110 names read as the same instant")
    func threeForms() {
        let expected = Date(timeIntervalSince1970: 784_111_777)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994", now: now) == expected)
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
    }

    @Test("The bytes that trapped DateFormatter, and other non-ASCII or control text, are nil, not a crash")
    func hostileText() {
        // The fuzz input's Date header: U+0D4A, then a byte that decodes as U+FFFD.
        #expect(HTTPDate.parse("Sun, 15\u{0D4A}\u{FFFD} 202550 :16:40 GMT") == nil)
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT\u{0}", "Sun, 06 Nov 1994 08:49:37 GMT\r\nX: y",
            "Sün, 06 Nov 1994 08:49:37 GMT",
            "Sun, ٠٦ Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT" + String(repeating: " ", count: 100), "",
        ] {
            #expect(HTTPDate.parse(text) == nil, "\(text.debugDescription)")
        }
    }

    @Test("Near misses are rejected: wrong case, whitespace, zone, width, an impossible day or time")
    func nearMisses() {
        for text in [
            "sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 gmt",
            "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000", " Sun, 06 Nov 1994 08:49:37 GMT",
            "Sun,  06 Nov 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 06 Nov 19940 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 30 Feb 2000 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:37 GMT",
            "Sun, 06 Nov 1994 08:49:61 GMT", "Sun, 06 Nov 1994 08:49:37 GMT ", "Sunday, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06-Nov-94 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 94", "1994-11-06T08:49:37Z",
            "784111777",
        ] {
            #expect(HTTPDate.parse(text, now: now) == nil, "\(text)")
        }
    }

    @Test("Leap days are known: 29 February in 2000 and 2024, not in 1900 or 2023; a leap second (:60) only ends a day")
    func calendar() {
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT") == Date(timeIntervalSince1970: 951_782_400))
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 12:00:00 GMT") == Date(timeIntervalSince1970: 1_709_208_000))
        #expect(HTTPDate.parse("Wed, 01 Mar 2023 00:00:00 GMT") != nil)
        #expect(HTTPDate.parse("Wed, 29 Feb 2023 00:00:00 GMT") == nil)
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT") == Date(timeIntervalSince1970: 1_483_228_800))
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:60 GMT") == nil)
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:58:60 GMT") == nil)
    }

    @Test("An RFC 850 two-digit year is never more than 50 years ahead")
    func twoDigitYears() {
        func year(_ twoDigits: String, now: Date) -> Int? {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
            return HTTPDate.parse("Monday, 01-Jan-\(twoDigits) 00:00:00 GMT", now: now).map {
                calendar.component(.year, from: $0)
            }
        }
        #expect(year("26", now: now) == 2026)
        #expect(year("76", now: now) == 2076)
        #expect(year("77", now: now) == 1977)
        #expect(year("94", now: now) == 1994)
        #expect(year("00", now: now) == 2000)
        // The year turns at midnight UTC: one second earlier, 2077 is still more than 50 years ahead.
        let newYear = Date(timeIntervalSince1970: 1_798_761_600)
        #expect(year("77", now: newYear) == 2077)
        #expect(year("77", now: newYear.addingTimeInterval(-1)) == 1977)
        #expect(year("77", now: Date(timeIntervalSince1970: .nan)) != nil)
    }

    @Test("Every second of a pseudo-random sample, written as an IMF-fixdate by Foundation, reads back exactly")
    func roundTrip() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            // 1601 to 2399: four centuries, so every leap rule is crossed.
            let instant = Date(
                timeIntervalSince1970: TimeInterval(
                    Int64.random(in: -11_644_473_600..<13_569_465_600, using: &generator)))
            let text = formatter.string(from: instant)
            #expect(HTTPDate.parse(text) == instant, "\(text)")
        }
    }
}
