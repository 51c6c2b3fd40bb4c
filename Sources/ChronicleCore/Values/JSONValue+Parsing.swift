import Foundation

/// Where something is in a JSON text: 1-based line and column (columns count
/// characters, not bytes).
package struct JSONPosition: Hashable, Sendable, CustomStringConvertible {
    /// The line, from 1.
    package var line: Int
    /// The character on the line, from 1.
    package var column: Int

    /// "line 3, column 17".
    package var description: String { "line \(line), column \(column)" }
}

extension JSONValue {
    /// The deepest nesting of arrays and objects ``init(parsing:code:)`` accepts.
    package static let maxParsingDepth = 512

    /// Parses JSON text strictly (RFC 8259): one value, nothing after it but
    /// whitespace (a leading UTF-8 byte order mark is skipped), valid UTF-8,
    /// and no key twice in one object, since a repeated key has no single
    /// meaning. A number without a fraction or exponent that fits in 64 bits
    /// is an ``int(_:)``, but for `-0`; any other number is a ``double(_:)``
    /// (`-0` is `-0.0`).
    ///
    /// ```swift
    /// let value = try JSONValue(parsing: Data(#"{"title": "Dune", "pages": 412}"#.utf8))
    /// ```
    ///
    /// - Parameter code: the code of the error thrown for text that is not
    ///   valid JSON.
    /// - Throws: a ``ChronicleError`` with `code` whose message starts with
    ///   the line and column of the fault (`line 2, column 14: duplicate key
    ///   "title" (first at line 1, column 2)`).
    package init(parsing data: Data, code: ChronicleError.Code = .malformedBody) throws(ChronicleError) {
        self = try JSONValue.parse(data, code: code).value
    }

    /// Parses like ``init(parsing:code:)`` and also returns the position of
    /// every value, by path: `(root)` for the whole text, `key` for a
    /// member of the root object, `key[2].name` below it.
    ///
    /// - Parameter firstLine: the line number of the text's first line, for
    ///   text cut from a larger input (a line of a file read one line at a
    ///   time), so that positions name the line in that input.
    package static func parseWithPositions(_ data: Data, code: ChronicleError.Code, firstLine: Int = 1) throws(ChronicleError) -> (value: JSONValue, positions: [String: JSONPosition]) {
        try parse(data, code: code, firstLine: firstLine, recordPositions: true)
    }

    private static func parse(_ data: Data, code: ChronicleError.Code, firstLine: Int = 1, recordPositions: Bool = false) throws(ChronicleError) -> (value: JSONValue, positions: [String: JSONPosition]) {
        var parser = JSONParser(bytes: [UInt8](data), recordPositions: recordPositions, firstLine: firstLine)
        do {
            let value = try parser.parseDocument()
            return (value, parser.positions)
        } catch {
            throw ChronicleError(code, "\(error.position): \(error.reason)")
        }
    }
}

/// A JSON syntax fault and where it is.
struct JSONSyntaxFault: Error {
    var position: JSONPosition
    var reason: String
}

/// A recursive-descent JSON parser over bytes that keeps track of lines and
/// columns for its messages.
struct JSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    /// The byte index where the current line starts.
    private var lineStart = 0
    private var depth = 0
    private let recordPositions: Bool
    /// Positions of values by path, when `recordPositions`.
    private(set) var positions: [String: JSONPosition] = [:]
    /// The column reached at a byte index of the current line, so that
    /// recording positions in order reads each line once (a schema kept on
    /// one line would otherwise be read again from its start for each value).
    private var columnMark = (index: 0, column: 1)

    init(bytes: [UInt8], recordPositions: Bool, firstLine: Int = 1) {
        self.bytes = bytes
        self.recordPositions = recordPositions
        self.line = firstLine
    }

    mutating func parseDocument() throws(JSONSyntaxFault) -> JSONValue {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3; lineStart = 3 }
        try checkUTF8()
        skipWhitespace()
        guard index < bytes.count else { throw fault("no JSON value: the text is empty") }
        let value = try parseValue(path: "(root)")
        skipWhitespace()
        guard index == bytes.count else { throw fault("unexpected \(describeCurrent()) after the JSON value") }
        return value
    }

    /// Refuses text that is not UTF-8, naming the first byte where it stops
    /// being UTF-8 (rather than the string or token around it).
    private func checkUTF8() throws(JSONSyntaxFault) {
        guard let bad = bytes.withUnsafeBytes({ UTF8Check.firstInvalidOffset(UnsafeRawBufferPointer(rebasing: $0[index...])) }) else { return }
        var located = self
        located.index = index + bad
        for i in index..<located.index where bytes[i] == 0x0A {
            located.line += 1
            located.lineStart = i + 1
        }
        throw located.fault("the text is not valid UTF-8 (byte 0x\(String(bytes[located.index], radix: 16)))")
    }

    // MARK: Positions

    private func position(at byteIndex: Int) -> JSONPosition {
        // Columns count characters: UTF-8 continuation bytes do not start one.
        var column = 1
        var i = lineStart
        while i < byteIndex && i < bytes.count {
            if bytes[i] & 0xC0 != 0x80 { column += 1 }
            i += 1
        }
        return JSONPosition(line: line, column: column)
    }

    /// ``position(at:)`` for positions recorded in order: goes on from the
    /// last one on the same line.
    private mutating func recordedPosition(at byteIndex: Int) -> JSONPosition {
        var (i, column) = columnMark.index >= lineStart && columnMark.index <= byteIndex ? columnMark : (lineStart, 1)
        while i < byteIndex && i < bytes.count {
            if bytes[i] & 0xC0 != 0x80 { column += 1 }
            i += 1
        }
        columnMark = (i, column)
        return JSONPosition(line: line, column: column)
    }

    private func fault(_ reason: String, at byteIndex: Int? = nil) -> JSONSyntaxFault {
        JSONSyntaxFault(position: position(at: byteIndex ?? index), reason: reason)
    }

    private func describeCurrent() -> String {
        guard index < bytes.count else { return "end of text" }
        let b = bytes[index]
        if b >= 0x20 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
        return "byte 0x" + String(b, radix: 16)
    }

    // MARK: Grammar

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0D: index += 1
            case 0x0A:
                index += 1
                line += 1
                lineStart = index
            default: return
            }
        }
    }

    private mutating func parseValue(path: String) throws(JSONSyntaxFault) -> JSONValue {
        guard index < bytes.count else { throw fault("the text ends where a value should be") }
        if recordPositions { positions[path] = recordedPosition(at: index) }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(path: path)
        case UInt8(ascii: "["): return try parseArray(path: path)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fault("expected a value, found \(describeCurrent())")
        }
    }

    private mutating func literal(_ word: String) throws(JSONSyntaxFault) {
        let w = Array(word.utf8)
        guard bytes.count - index >= w.count, Array(bytes[index..<(index + w.count)]) == w else {
            throw fault("expected a value, found \(describeCurrent())")
        }
        index += w.count
    }

    private mutating func enter() throws(JSONSyntaxFault) {
        depth += 1
        guard depth <= JSONValue.maxParsingDepth else {
            throw fault("arrays and objects nested deeper than \(JSONValue.maxParsingDepth) levels")
        }
    }

    /// Steps into an array or object at its opening bracket; true if it is
    /// closed at once (empty).
    private mutating func open(closedBy close: UInt8) throws(JSONSyntaxFault) -> Bool {
        try enter()
        index += 1
        skipWhitespace()
        guard index < bytes.count && bytes[index] == close else { return false }
        index += 1
        return true
    }

    /// After a member or element: true at the closing bracket, false at a
    /// comma (both consumed).
    private mutating func next(closedBy close: UInt8, in container: String) throws(JSONSyntaxFault) -> Bool {
        skipWhitespace()
        let expected = "',' or '\(Character(Unicode.Scalar(close)))'"
        guard index < bytes.count else { throw fault("the text ends inside \(container): expected \(expected)") }
        switch bytes[index] {
        case UInt8(ascii: ","):
            index += 1
            return false
        case close:
            index += 1
            return true
        default: throw fault("expected \(expected) in \(container), found \(describeCurrent())")
        }
    }

    private mutating func parseObject(path: String) throws(JSONSyntaxFault) -> JSONValue {
        defer { depth -= 1 }
        var members: [String: JSONValue] = [:]
        var keyPositions: [String: JSONPosition] = [:]
        if try open(closedBy: UInt8(ascii: "}")) { return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw fault("the text ends inside an object: expected a key") }
            guard bytes[index] == UInt8(ascii: "\"") else {
                if bytes[index] == UInt8(ascii: "}") { throw fault("trailing comma before '}'") }
                throw fault("expected a key in double quotes, found \(describeCurrent())")
            }
            let keyPosition = recordedPosition(at: index)
            let key = try parseString()
            if let first = keyPositions[key] {
                throw JSONSyntaxFault(position: keyPosition, reason: "duplicate key \"\(key)\" (first at \(first))")
            }
            keyPositions[key] = keyPosition
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw fault("expected ':' after key \"\(key)\", found \(describeCurrent())")
            }
            index += 1
            skipWhitespace()
            members[key] = try parseValue(path: path == "(root)" ? key : "\(path).\(key)")
            if try next(closedBy: UInt8(ascii: "}"), in: "an object") { return .object(members) }
        }
    }

    private mutating func parseArray(path: String) throws(JSONSyntaxFault) -> JSONValue {
        defer { depth -= 1 }
        var elements: [JSONValue] = []
        if try open(closedBy: UInt8(ascii: "]")) { return .array(elements) }
        while true {
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "]") { throw fault("trailing comma before ']'") }
            elements.append(try parseValue(path: "\(path == "(root)" ? "" : path)[\(elements.count)]"))
            if try next(closedBy: UInt8(ascii: "]"), in: "an array") { return .array(elements) }
        }
    }

    private mutating func parseString() throws(JSONSyntaxFault) -> String {
        let start = index
        index += 1
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw fault("the text ends inside a string that starts at \(position(at: start))") }
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                guard let s = out.withUnsafeBytes({ UTF8Check.isValid($0) ? String(decoding: $0, as: UTF8.self) : nil }) else {
                    throw fault("the string that starts here is not valid UTF-8", at: start)
                }
                return s
            case UInt8(ascii: "\\"):
                try parseEscape(into: &out)
            case 0..<0x20:
                throw fault(b == 0x0A ? "the text ends inside a string (a line break must be written \\n)" : "control character 0x\(String(b, radix: 16)) in a string (escape it)")
            default:
                out.append(b)
                index += 1
            }
        }
    }

    private mutating func parseEscape(into out: inout [UInt8]) throws(JSONSyntaxFault) {
        let escape = index
        index += 1
        guard index < bytes.count else { throw fault("the text ends inside an escape") }
        let simple: [UInt8: UInt8] = [0x22: 0x22, 0x5C: 0x5C, 0x2F: 0x2F, 0x62: 0x08, 0x66: 0x0C, 0x6E: 0x0A, 0x72: 0x0D, 0x74: 0x09]
        if let byte = simple[bytes[index]] {
            out.append(byte)
            index += 1
            return
        }
        guard bytes[index] == UInt8(ascii: "u") else { throw fault("unknown escape \\\(describeCurrent())", at: escape) }
        index += 1
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard bytes.count - index >= 6, bytes[index] == 0x5C, bytes[index + 1] == UInt8(ascii: "u") else {
                throw fault("\\u escape of a lone surrogate", at: escape)
            }
            index += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw fault("\\u escape of a lone surrogate", at: escape) }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw fault("\\u escape of a lone surrogate", at: escape)
        }
        out.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
    }

    private mutating func hex4() throws(JSONSyntaxFault) -> UInt32 {
        guard bytes.count - index >= 4 else { throw fault("a \\u escape needs four hex digits") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Character(Unicode.Scalar(bytes[index])).hexDigitValue else {
                throw fault("a \\u escape needs four hex digits, found \(describeCurrent())")
            }
            v = v * 16 + UInt32(digit)
            index += 1
        }
        return v
    }

    private mutating func parseNumber() throws(JSONSyntaxFault) -> JSONValue {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            return index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 else {
            throw fault("a number needs a digit after '-'")
        }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { throw fault("a number cannot start with 0", at: start) }
        } else {
            _ = digits()
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard digits() > 0 else { throw fault("a number needs a digit after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw fault("a number needs a digit in its exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        // "-0" is negative zero: a double, so that the sign survives (an
        // int64 field still takes it, as 0).
        if integral, text != "-0", let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else { throw fault("the number \(text) is out of range", at: start) }
        return .double(d)
    }
}
