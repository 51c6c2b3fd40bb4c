import Foundation

extension Value {
    /// Reads a value of a field from its JSON form (see `docs/values.md`):
    /// strings for text, decimals, UUIDs, record IDs and base64 data; numbers
    /// for integers and doubles (doubles also accept `"nan"`, `"inf"`, `"-inf"`,
    /// `"-0.0"` and a `"0x…"` bit pattern); ISO 8601 with up to six fractional
    /// digits and `Z` or an offset (see ``Timestamp/init(iso8601:)``), or
    /// integer microseconds, for dates; `{"type", "mime", "base64"}`
    /// for transformables.
    ///
    /// - Throws: ``ChronicleError/Code/typeMismatch`` naming `path` when the
    ///   JSON does not fit.
    package init(json: JSONValue, for field: Field, path: String) throws(ChronicleError) {
        var json = json
        // The parser reads -0 as -0.0, so that a double keeps its sign; for
        // every other type it is the integer 0.
        if case .double(let d) = json, d == 0, d.sign == .minus, case .attribute(let type) = field.kind, type != .double {
            json = .int(0)
        }
        func mismatch(_ expected: String) -> ChronicleError {
            ChronicleError(.typeMismatch, "\(path): expected \(expected), found \(json.kindName)")
        }
        if case .null = json {
            self = .null
            return
        }
        switch field.kind {
        case .reference:
            guard case .string(let s) = json else { throw mismatch("a record ID string") }
            guard let id = RecordID(string: s) else {
                let shown = s.count > 40 ? String(s.prefix(40)) + "…" : s
                throw ChronicleError(.typeMismatch, "\(path): expected a record ID (a UUID such as 018bcfe5-6856-7347-bf2b-7b99f30b60ef), found the string \"\(shown)\"")
            }
            self = .reference(id)
        case .attribute(let type):
            switch (type, json) {
            case (.string, .string(let s)): self = .string(s)
            case (.int64, .int(let i)): self = .int(i)
            case (.int64, .double(let d)):
                // 412.0 is the integer 412; 412.5 is not an integer. Past
                // 2^53 a number read as a double may not be the one written
                // (-9223372036854775809 reads as -2^63, 12345678901234567.5
                // as ...568): such integers are written as digits alone,
                // which read exactly.
                if d.isFinite, d.magnitude >= 9_007_199_254_740_992 {
                    throw ChronicleError(.typeMismatch, "\(path): expected an integer, found a number of magnitude 2^53 or more with a fraction or an exponent, or past the int64 range (-9223372036854775808 to 9223372036854775807), which would not be stored as written; write such an integer as digits alone")
                }
                guard let i = Int64(exactly: d) else {
                    if d == d.rounded(), d.isFinite {
                        throw ChronicleError(.typeMismatch, "\(path): expected an integer, found \(d), past the int64 range (-9223372036854775808 to 9223372036854775807)")
                    }
                    throw mismatch("an integer")
                }
                self = .int(i)
            case (.double, .int(let i)): self = .double(Double(i))
            case (.double, .double(let d)): self = .double(d)
            case (.double, .string(let s)):
                guard let d = Value.parseSpecialDouble(s) else { throw mismatch("a number, nan, inf, -inf, -0.0 or 0x bits") }
                self = .double(d)
            case (.bool, .bool(let b)): self = .bool(b)
            case (.date, .int(let micros)): self = .date(Timestamp(microsecondsSinceEpoch: micros))
            case (.date, .string(let s)):
                guard let t = Timestamp(iso8601: s) else {
                    throw mismatch("an ISO 8601 date like 2026-01-31T12:00:00.123456Z or 2026-01-31T14:00:00+02:00 (at most 6 fractional digits that are not 0)")
                }
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
            case (.transformable, _):
                throw mismatch("transformable: an object {\"type\": name, \"mime\": type, \"base64\": bytes} (see docs/values.md)")
            default:
                throw mismatch(type.rawValue)
            }
        }
    }

    /// The JSON form of the value, readable by ``init(json:for:path:)``.
    package var json: JSONValue {
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
