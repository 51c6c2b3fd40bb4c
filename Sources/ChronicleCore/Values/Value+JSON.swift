import Foundation

extension Value {
    /// Reads a value of a field from its JSON form (see `docs/values.md`):
    /// strings for text, decimals, UUIDs, record IDs and base64 data; numbers
    /// for integers and doubles (doubles also accept `"nan"`, `"inf"`, `"-inf"`,
    /// `"-0.0"` and a `"0x…"` bit pattern); ISO 8601 with up to six fractional
    /// digits, or integer microseconds, for dates; `{"type", "mime", "base64"}`
    /// for transformables.
    ///
    /// - Throws: ``ChronicleError/Code/typeMismatch`` naming `path` when the
    ///   JSON does not fit.
    public init(json: JSONValue, for field: Field, path: String) throws(ChronicleError) {
        func mismatch(_ expected: String) -> ChronicleError {
            ChronicleError(.typeMismatch, "\(path): expected \(expected), found \(json.kindName)")
        }
        if case .null = json {
            self = .null
            return
        }
        switch field.kind {
        case .reference:
            guard case .string(let s) = json, let id = RecordID(string: s) else { throw mismatch("a record ID string") }
            self = .reference(id)
        case .attribute(let type):
            switch (type, json) {
            case (.string, .string(let s)): self = .string(s)
            case (.int64, .int(let i)): self = .int(i)
            case (.double, .int(let i)): self = .double(Double(i))
            case (.double, .double(let d)): self = .double(d)
            case (.double, .string(let s)):
                guard let d = Value.parseSpecialDouble(s) else { throw mismatch("a number, nan, inf, -inf, -0.0 or 0x bits") }
                self = .double(d)
            case (.bool, .bool(let b)): self = .bool(b)
            case (.date, .int(let micros)): self = .date(Timestamp(microsecondsSinceEpoch: micros))
            case (.date, .string(let s)):
                guard let t = Timestamp(iso8601: s) else { throw mismatch("an ISO 8601 date like 2026-01-31T12:00:00.123456Z") }
                self = .date(t)
            case (.data, .string(let s)):
                guard let d = Data(base64Encoded: s) else { throw mismatch("base64 data") }
                self = .data(d)
            case (.decimal, .string(let s)):
                guard let d = ChronicleDecimal(string: s) else { throw mismatch("a decimal string of at most 38 digits") }
                self = .decimal(d)
            case (.decimal, .int(let i)): self = .decimal(ChronicleDecimal(i))
            case (.uuid, .string(let s)):
                guard let u = UUID(uuidString: s) else { throw mismatch("a UUID string") }
                self = .uuid(u)
            case (.transformable, .object(let o)):
                guard case .string(let typeName)? = o["type"], case .string(let b64)? = o["base64"],
                      let data = Data(base64Encoded: b64)
                else { throw mismatch("an object with \"type\" and \"base64\"") }
                var mime = "application/octet-stream"
                if case .string(let m)? = o["mime"] { mime = m }
                self = .transformable(TransformableValue(typeName: typeName, mimeType: mime, data: data))
            default:
                throw mismatch(type.rawValue)
            }
        }
    }

    /// The JSON form of the value, readable by ``init(json:for:path:)``.
    public var json: JSONValue {
        switch self {
        case .null: return .null
        case .string(let s): return .string(s)
        case .int(let i): return .int(i)
        case .double(let d):
            if d.isNaN || d.isInfinite || (d == 0 && d.sign == .minus) { return .string(Value.specialDoubleString(d)) }
            return .double(d)
        case .bool(let b): return .bool(b)
        case .date(let t): return .string(t.description)
        case .data(let d): return .string(d.base64EncodedString())
        case .decimal(let d): return .string(d.description)
        case .uuid(let u): return .string(u.uuidString.lowercased())
        case .transformable(let t):
            return .object(["type": .string(t.typeName), "mime": .string(t.mimeType), "base64": .string(t.data.base64EncodedString())])
        case .reference(let r): return .string(r.description)
        }
    }

    static func specialDoubleString(_ d: Double) -> String {
        if d.isNaN {
            return d.bitPattern == Double.nan.bitPattern ? "nan" : "0x" + String(d.bitPattern, radix: 16)
        }
        if d.isInfinite { return d < 0 ? "-inf" : "inf" }
        return "-0.0"
    }

    static func parseSpecialDouble(_ s: String) -> Double? {
        switch s {
        case "nan": return .nan
        case "inf": return .infinity
        case "-inf": return -.infinity
        case "-0.0", "-0": return -0.0
        default:
            if s.hasPrefix("0x"), let bits = UInt64(s.dropFirst(2), radix: 16) { return Double(bitPattern: bits) }
            return Double(s)
        }
    }
}

extension Timestamp {
    /// Parses `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` (UTC, up to six fractional digits).
    public init?(iso8601 string: String) {
        let u = Array(string.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= u.count else { return nil }
            var v = 0
            for c in u[range] {
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int(c - 48)
            }
            return v
        }
        guard u.count >= 20, u[4] == 45, u[7] == 45, u[10] == 84 || u[10] == 32, u[13] == 58, u[16] == 58,
              u.last == 90,
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var micros = 0
        if u.count > 20 {
            guard u[19] == 46, u.count - 21 >= 1, u.count - 21 <= 6, let f = number(20..<(u.count - 1)) else { return nil }
            var scale = 1
            for _ in 0..<(6 - (u.count - 21)) { scale *= 10 }
            micros = f * scale
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: DateComponents(year: year, month: month, day: day,
                                                              hour: hour, minute: minute, second: second)),
              calendar.component(.day, from: date) == day
        else { return nil }
        let seconds = Int64(date.timeIntervalSince1970.rounded())
        self.init(microsecondsSinceEpoch: seconds * 1_000_000 + Int64(micros))
    }
}
