import ChronicleCore
import Foundation
import Testing

@Suite struct ValueTests {
    @Test(arguments: ["0", "1", "-1", "123.45", "-0.001", "1e127", "1e-128", "99999999999999999999999999999999999999",
                      "3.14159265358979323846264338327950288"])
    func decimalRoundTripsThroughItsString(text: String) throws {
        let d = try #require(ChronicleDecimal(string: text))
        let again = try #require(ChronicleDecimal(string: d.description))
        #expect(again.isIdentical(to: d))
    }

    @Test(arguments: ["", "-", "1.2.3", "abc", "1e128", "1e-129", "999999999999999999999999999999999999999", "1e"])
    func decimalRejectsBadStrings(text: String) {
        #expect(ChronicleDecimal(string: text) == nil)
    }

    @Test func decimalEqualityIsByValueIdentityByRepresentation() throws {
        let a = try #require(ChronicleDecimal(string: "1.5"))
        let b = try #require(ChronicleDecimal(string: "1.50"))
        #expect(a == b)
        #expect(!a.isIdentical(to: b))
        #expect(Value.decimal(a) != Value.decimal(b))
    }

    @Test func doublesCompareByBits() {
        #expect(Value.double(.nan) == Value.double(.nan))
        #expect(Value.double(0.0) != Value.double(-0.0))
        #expect(Value.double(Double(bitPattern: 0x7FF8_0000_0000_0001)) != Value.double(.nan))
    }

    @Test func timestampsAreExactToTheMicrosecond() throws {
        let t = Timestamp(microsecondsSinceEpoch: 1_700_000_000_123_456)
        #expect(t.description == "2023-11-14T22:13:20.123456Z")
        #expect(Timestamp(iso8601: t.description) == t)
        #expect(Timestamp(t.date) == t)
        let before1970 = Timestamp(microsecondsSinceEpoch: -1)
        #expect(before1970.description == "1969-12-31T23:59:59.999999Z")
        #expect(Timestamp(iso8601: before1970.description) == before1970)
        #expect(Timestamp(iso8601: "2023-02-30T00:00:00Z") == nil)
        #expect(Timestamp(iso8601: "yesterday") == nil)
    }

    @Test func jsonFormRoundTripsEveryType() throws {
        var rng = SeededRandom(seed: 7)
        for type in AttributeType.allCases {
            let field = Field(name: "f", kind: .attribute(type), isOptional: true, defaultValue: nil)
            for _ in 0..<50 {
                let v = Samples.value(type, &rng)
                #expect(try Value(json: v.json, for: field, path: "f") == v)
            }
        }
    }

    /// Regression: an integer given past the int64 range, or with a
    /// fraction past 2^53, was stored as the nearest double's value
    /// (-9223372036854775809 as -9223372036854775808, 12345678901234567.5
    /// as 12345678901234568). It is refused; what reads exactly is kept.
    @Test func integersThatWouldNotBeStoredAsWrittenAreRefused() throws {
        let field = Field(name: "n", kind: .attribute(.int64), isOptional: false, defaultValue: nil)
        func value(_ text: String) throws -> Value {
            guard case .object(let members) = try JSONValue(parsing: Data(#"{"n": \#(text)}"#.utf8)), let n = members["n"] else {
                throw ChronicleError(.malformedBody, "not an object")
            }
            return try Value(json: n, for: field, path: "n")
        }
        for text in ["-9223372036854775809", "-9223372036854775900", "9223372036854775808", "12345678901234567.5", "1e300", "9007199254740993.0"] {
            #expect(throws: ChronicleError.self, "\(text)") { try value(text) }
        }
        #expect(try value("-9223372036854775808") == .int(.min))
        #expect(try value("9223372036854775807") == .int(.max))
        #expect(try value("412.0") == .int(412))
        #expect(try value("4.12e2") == .int(412))
        #expect(try value("9007199254740991.0") == .int(9_007_199_254_740_991))
    }

    @Test func jsonTypeMismatchNamesThePath() {
        let field = Field(name: "pages", kind: .attribute(.int64), isOptional: false, defaultValue: nil)
        #expect {
            try Value(json: .string("ten"), for: field, path: "line 3: pages")
        } throws: { error in
            let e = error as? ChronicleError
            return e?.code == .typeMismatch && e?.message.contains("line 3: pages") == true
        }
    }
}
