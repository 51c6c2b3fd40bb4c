import ChronicleCore
import Foundation
import Testing

/// The strict JSON parser behind schema files and `chronicle save` lines.
@Suite struct JSONParsingTests {
    func parse(_ text: String) throws(ChronicleError) -> JSONValue {
        try JSONValue(parsing: Data(text.utf8))
    }

    func message(_ text: String) -> String {
        do {
            _ = try parse(text)
            return "parsed"
        } catch {
            #expect(error.code == .malformedBody)
            return error.message
        }
    }

    @Test func parsesEveryKindOfValue() throws {
        let value = try parse(#" {"s": "a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "i": -42, "big": 9223372036854775807, "d": 1.5e3, "z": -0.0, "t": true, "f": false, "n": null, "a": [1, [], {}]} "#)
        #expect(value == .object([
            "s": .string("a\"\\/\u{8}\u{c}\n\r\té😀"), "i": .int(-42), "big": .int(.max), "d": .double(1500), "z": .double(-0.0),
            "t": .bool(true), "f": .bool(false), "n": .null, "a": .array([.int(1), .array([]), .object([:])]),
        ]))
        guard case .double(let z) = try parse("-0.0") else { Issue.record("-0.0 is a double"); return }
        #expect(z.sign == .minus)
        #expect(try parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try parse("\u{FEFF}[1]") == .array([.int(1)]))
    }

    /// A key given twice has no single meaning (Foundation keeps one silently).
    @Test func refusesAKeyGivenTwiceNamingBothPlaces() {
        #expect(message("{\"a\": 1,\n \"b\": {\"a\": 2, \"c\": 3},\n \"a\": 4}") == #"line 3, column 2: duplicate key "a" (first at line 1, column 2)"#)
        #expect(message(#"{"x": {"k": 1, "k": 1}}"#) == #"line 1, column 16: duplicate key "k" (first at line 1, column 8)"#)
    }

    @Test(arguments: [
        ("", "line 1, column 1: no JSON value: the text is empty"),
        ("{\"a\": 1", "line 1, column 8: the text ends inside an object: expected ',' or '}'"),
        ("[1, 2,]", "line 1, column 7: trailing comma before ']'"),
        ("{\"a\": 1,}", "line 1, column 9: trailing comma before '}'"),
        ("{\"a\" 1}", "line 1, column 6: expected ':' after key \"a\", found '1'"),
        ("{a: 1}", "line 1, column 2: expected a key in double quotes, found 'a'"),
        ("[tru]", "line 1, column 2: expected a value, found 't'"),
        ("[01]", "line 1, column 2: a number cannot start with 0"),
        ("[1.]", "line 1, column 4: a number needs a digit after '.'"),
        ("[1e400]", "line 1, column 2: the number 1e400 is out of range"),
        ("[\"a\nb\"]", "line 1, column 4: the text ends inside a string (a line break must be written \\n)"),
        ("[\"\\x\"]", "line 1, column 3: unknown escape \\'x'"),
        ("[\"\\ud800\"]", "line 1, column 3: \\u escape of a lone surrogate"),
        ("[1] [2]", "line 1, column 5: unexpected '[' after the JSON value"),
        ("{\n  \"é\": [1,\n  2", "line 3, column 4: the text ends inside an array: expected ',' or ']'"),
        ("[\"é\", x]", "line 1, column 7: expected a value, found 'x'"),
    ])
    func faultsNameTheirLineAndColumn(_ text: String, _ expected: String) {
        #expect(message(text) == expected)
    }

    @Test func refusesInvalidUTF8AndDeepNesting() {
        var bytes = Data("[\"a".utf8)
        bytes.append(contentsOf: [0xC3, 0x28])
        bytes.append(contentsOf: Data("\"]".utf8))
        #expect(throws: ChronicleError.self) { try JSONValue(parsing: bytes) }
        let deep = String(repeating: "[", count: JSONValue.maxParsingDepth + 1) + String(repeating: "]", count: JSONValue.maxParsingDepth + 1)
        #expect(message(deep).contains("nested deeper than \(JSONValue.maxParsingDepth) levels"))
        let deepest = String(repeating: "[", count: JSONValue.maxParsingDepth) + String(repeating: "]", count: JSONValue.maxParsingDepth)
        #expect(message(deepest) == "parsed")
    }

    /// Regression: text that is not UTF-8 was refused naming the string
    /// around the bad byte, or the byte as an unexpected token.
    @Test(arguments: [
        (Data("{\"a\": \"x".utf8) + Data([0xC3, 0x28]) + Data("\"}".utf8), "line 1, column 9: the text is not valid UTF-8 (byte 0xc3)"),
        (Data("[\"é\",\n 1, ".utf8) + Data([0xFF]) + Data("]".utf8), "line 2, column 5: the text is not valid UTF-8 (byte 0xff)"),
        (Data("[\"".utf8) + Data([0xED, 0xA0, 0x80]) + Data("\"]".utf8), "line 1, column 3: the text is not valid UTF-8 (byte 0xed)"),
        (Data("[1".utf8) + Data([0xE2, 0x82]), "line 1, column 3: the text is not valid UTF-8 (byte 0xe2)"),
    ])
    func textThatIsNotUTF8IsRefusedAtItsFirstBadByte(_ bytes: Data, _ expected: String) {
        let error = #expect(throws: ChronicleError.self) { try JSONValue(parsing: bytes) }
        #expect(error?.message == expected)
    }

    /// Regression: `-0` was the integer 0, so a double lost its sign.
    @Test func minusZeroIsNegativeZero() throws {
        guard case .double(let d) = try JSONValue(parsing: Data("-0".utf8)) else { Issue.record("not a double"); return }
        #expect(d == 0 && d.sign == .minus)
        #expect(try JSONValue(parsing: Data("0".utf8)) == .int(0))
    }

    /// A line cut from a larger input names its line in that input.
    @Test func positionsCountFromTheFirstLineGiven() {
        let error = #expect(throws: ChronicleError.self) {
            try JSONValue.parseWithPositions(Data(#"{"a": 1, "a": 2}"#.utf8), code: .malformedBody, firstLine: 7)
        }
        #expect(error?.message == #"line 7, column 10: duplicate key "a" (first at line 7, column 2)"#)
    }

    @Test func theCallerChoosesTheCode() {
        let error = #expect(throws: ChronicleError.self) { try JSONValue(parsing: Data("{".utf8), code: .schemaSyntax) }
        #expect(error?.code == .schemaSyntax)
    }
}
