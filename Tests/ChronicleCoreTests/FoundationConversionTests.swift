import ChronicleCore
import Foundation
import Testing

/// Foundation's `Decimal` and `Date` against Chronicle's exact values.
@Suite struct FoundationConversionTests {
    @Test(arguments: ["0", "7", "-1.5", "19.99", "-123.456", "0.000001", "99999999999999999999999999999999999999",
                      "-12345678901234567890.123456789", "1e127", "1e-128", "5e3", "123456789012345678901234567890123456e-20"])
    func decimalsConvertExactly(_ text: String) throws {
        let chronicle = try #require(ChronicleDecimal(string: text))
        let decimal = chronicle.decimal
        #expect(decimal == Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")))
        #expect(try ChronicleDecimal(decimal) == chronicle)
    }

    @Test func aNaNDecimalIsRefused() {
        #expect(throws: ChronicleError.self) { try ChronicleDecimal(Decimal.nan) }
        #expect(throws: ChronicleError.self) { try Decimal.nan.chronicleValue() }
    }

    @Test func secondsSince1970GiveBackEveryMicrosecondFrom1834To2106() {
        var random = SeededRandom(seed: 42)
        let span = UInt64(4_290_000_000_000_000)  // about 136 years either side of 1970
        var misses: [Int64] = []
        for _ in 0..<200_000 {
            let micros = Int64(random.next() % (2 * span)) - Int64(span)
            let t = Timestamp(microsecondsSinceEpoch: micros)
            if Timestamp(exactlySecondsSince1970: t.secondsSince1970) != t || t.date != Date(timeIntervalSince1970: t.secondsSince1970) {
                misses.append(micros)
            }
        }
        #expect(misses == [])
    }

    @Test func wholeSecondsConvertAtAnyDate() {
        for seconds: Int64 in [64_092_211_200, -62_135_769_600, 253_402_300_799, -9_000_000_000_000] {
            let t = Timestamp(microsecondsSinceEpoch: seconds * 1_000_000)
            #expect(Timestamp(exactlySecondsSince1970: t.secondsSince1970) == t)
        }
    }

    @Test func aDoubleNoTimestampHasIsRefused() {
        // Year 2400 with microseconds: two microseconds share a double there.
        let t = Timestamp(microsecondsSinceEpoch: 13_569_465_600_123_457)
        #expect(Timestamp(exactlySecondsSince1970: t.secondsSince1970) != t)
        #expect(Timestamp(exactlySecondsSince1970: .nan) == nil)
        #expect(Timestamp(exactlySecondsSince1970: 1e300) == nil)
    }
}
