import ChronicleCore
import Foundation
import Testing

/// ISO 8601 dates with `Z` or an offset, read exactly to the microsecond.
@Suite struct TimestampISO8601Tests {
    @Test(arguments: [
        ("2026-01-31T12:00:00Z", Int64(1_769_860_800_000_000)),
        ("2026-01-31T14:00:00.123456+02:00", 1_769_860_800_123_456),
        ("2026-01-31T06:30:00.5-0530", 1_769_860_800_500_000),
        ("2026-01-31T13:00:00+01", 1_769_860_800_000_000),
        ("2026-01-31t12:00:00.000001z", 1_769_860_800_000_001),
        ("2026-01-31 12:00:00,25Z", 1_769_860_800_250_000),
        ("2026-01-31T12:00:00.123456000-00:00", 1_769_860_800_123_456),
        ("2026-01-01T00:30:00+01:00", 1_767_223_800_000_000),
        ("2024-02-29T23:59:59.999999-00:30", 1_709_252_999_999_999),
        ("1969-12-31T23:59:59.999999Z", -1),
        ("0001-01-01T00:00:00Z", -62_135_596_800_000_000),
        ("9999-12-31T23:59:59.999999Z", 253_402_300_799_999_999),
        ("2016-12-31T23:59:60Z", 1_483_228_800_000_000),
    ])
    func readsOffsetsExactly(_ text: String, _ micros: Int64) {
        #expect(Timestamp(iso8601: text)?.microsecondsSinceEpoch == micros, "\(text)")
    }

    @Test(arguments: [
        "2026-01-31T12:00:00", "2026-01-31", "2026-01-31T12:00Z", "2026-01-31T12:00:00.1234567Z", "2026-01-31T12:00:00.Z",
        "2026-01-31T12:00:00+24:00", "2026-01-31T12:00:00+02:60", "2026-01-31T12:00:00+2", "2026-01-31T12:00:00+02:", "2026-02-29T12:00:00Z",
        "2100-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-31T24:00:00Z", "2026-01-31T12:00:00Zjunk", "+2026-01-31T12:00:00Z", "-0000-01-01T00:00:00Z", "+09999-12-31T00:00:00Z", "yesterday", "",
    ])
    func refusesWhatIsNotAnExactInstant(_ text: String) {
        #expect(Timestamp(iso8601: text) == nil, "\(text)")
    }

    /// Printing uses the same calendar as reading: proleptic Gregorian, also
    /// before 1582 (where Foundation's `Calendar` turns Julian).
    @Test func printsTheProlepticGregorianCalendar() {
        #expect(Timestamp(microsecondsSinceEpoch: -62_135_596_800_000_000).description == "0001-01-01T00:00:00.000000Z")
        #expect(Timestamp(microsecondsSinceEpoch: -12_219_292_800_000_001).description == "1582-10-14T23:59:59.999999Z")
        #expect(Timestamp(microsecondsSinceEpoch: 253_402_300_799_999_999).description == "9999-12-31T23:59:59.999999Z")
    }

    /// Every timestamp prints, to the extremes, and what prints reads back:
    /// years outside 0000...9999 in the expanded form (a sign, more digits).
    @Test func extremeTimestampsPrintAndReadBack() {
        for micros: Int64 in [.min, .min + 1, .max, .max - 1, -100_000_000_000_000_000, 300_000_000_000_000_000, -62_135_596_800_000_001] {
            let t = Timestamp(microsecondsSinceEpoch: micros)
            #expect(Timestamp(iso8601: t.description) == t, "\(micros): \(t)")
        }
        #expect(Timestamp(microsecondsSinceEpoch: .max).description == "+294247-01-10T04:00:54.775807Z")
        #expect(Timestamp(microsecondsSinceEpoch: -100_000_000_000_000_000).description.hasPrefix("-1199-"))
        #expect(Timestamp(iso8601: "+294247-01-10T04:00:54.775808Z") == nil, "past the last timestamp")
        #expect(Timestamp(iso8601: "+123-01-01T00:00:00Z") == nil, "an expanded year has four digits or more")
    }

    @Test func everyPrintedTimestampReadsBack() {
        var rng = SeededRandom(seed: 8601)
        for _ in 0..<2_000 {
            let t = Timestamp(microsecondsSinceEpoch: Int64(bitPattern: rng.next() % 253_402_300_800_000_000) - 62_135_596_800_000_000 / 2)
            #expect(Timestamp(iso8601: t.description) == t, "\(t)")
        }
    }
}
