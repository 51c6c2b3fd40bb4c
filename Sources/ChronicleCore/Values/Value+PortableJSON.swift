import Foundation

/// The portable JSON form of values, for exports another program or
/// platform reads (see `docs/portable-json.md`). Every value round-trips
/// exactly:
///
/// | type | JSON |
/// |---|---|
/// | string, uuid, reference | a string (UUIDs and record IDs lowercase) |
/// | int64 | a string of decimal digits (exact where JSON numbers are doubles) |
/// | double | `{"double": n, "ieee754": "<16 hex digits>"}`; `n` is `"NaN"`, `"Infinity"` or `"-Infinity"` when JSON has no number for it; the IEEE-754 64-bit image decides |
/// | bool | `true` or `false` |
/// | date | `{"seconds": "<seconds since 1970, up to 6 decimals>"}` |
/// | data | `{"base64": "…", "mimeType": "application/octet-stream"}` |
/// | transformable | `{"base64": "…", "mimeType": "…", "typeName": "…"}` |
/// | decimal | `{"decimal": "<digits, a point, an exponent>"}` |
/// | null | `null` |
extension Value {
    /// The portable JSON form (see the table above).
    package var portableJSON: JSONValue {
        switch self {
        case .null: return .null
        case .string(let s): return .string(s)
        case .int(let i): return .string(String(i))
        case .double(let d):
            let number: JSONValue
            if d.isNaN {
                number = .string("NaN")
            } else if d.isInfinite {
                number = .string(d < 0 ? "-Infinity" : "Infinity")
            } else {
                number = .double(d)
            }
            return .object(["double": number, "ieee754": .string(d.bitPattern.paddedHex)])
        case .bool(let b): return .bool(b)
        case .date(let t): return .object(["seconds": .string(Self.seconds(t.microsecondsSinceEpoch))])
        case .data(let d): return .object(["base64": .string(d.base64EncodedString()), "mimeType": .string("application/octet-stream")])
        case .decimal(let d): return .object(["decimal": .string(d.description)])
        case .uuid(let u): return .string(u.uuidString.lowercased())
        case .transformable(let t):
            return .object(["base64": .string(t.data.base64EncodedString()), "mimeType": .string(t.mimeType), "typeName": .string(t.typeName)])
        case .reference(let r): return .string(r.description)
        }
    }

    /// Reads a value of `field` from its portable JSON form.
    ///
    /// - Throws: ``ChronicleError/Code/typeMismatch`` naming `path` when the
    ///   JSON is not the form of the field's type.
    package init(portableJSON json: JSONValue, for field: Field, path: String) throws(ChronicleError) {
        switch field.kind {
        case .reference: try self.init(portableJSON: json, type: nil, path: path)
        case .attribute(let type): try self.init(portableJSON: json, type: type, path: path)
        }
    }

    /// The name of the value's type in a portable log export: an
    /// attribute type's name, `"reference"` or `"null"`.
    package var portableTypeName: String {
        switch self {
        case .null: return "null"
        case .reference: return "reference"
        default: return attributeType!.rawValue
        }
    }

    /// Reads a value whose type is named beside it (see
    /// ``portableTypeName``), as a portable log export writes it.
    ///
    /// - Throws: ``ChronicleError/Code/typeMismatch`` naming `path` for an
    ///   unknown type name, or JSON that is not the named type's form.
    package init(portableJSON json: JSONValue, typeName: String, path: String) throws(ChronicleError) {
        switch typeName {
        case "null":
            guard case .null = json else { throw ChronicleError(.typeMismatch, "\(path): a null value is written null, found \(json.kindName)") }
            self = .null
        case "reference":
            try self.init(portableJSON: json, type: nil, path: path)
        default:
            guard let type = AttributeType(rawValue: typeName) else {
                throw ChronicleError(.typeMismatch, "\(path): '\(typeName)' is not a value type (an attribute type, \"reference\" or \"null\")")
            }
            try self.init(portableJSON: json, type: type, path: path)
            if isNull { throw ChronicleError(.typeMismatch, "\(path): a null value's type is \"null\", not \"\(typeName)\"") }
        }
    }

    /// Reads a value of an attribute type, or a reference when `type` is nil.
    private init(portableJSON json: JSONValue, type: AttributeType?, path: String) throws(ChronicleError) {
        func mismatch(_ expected: String) -> ChronicleError {
            ChronicleError(.typeMismatch, "\(path): expected \(expected), found \(json.kindName)")
        }
        if case .null = json {
            self = .null
            return
        }
        switch type {
        case nil:
            guard case .string(let s) = json else { throw mismatch("a record ID string") }
            guard let id = RecordID(string: s) else {
                let shown = s.count > 40 ? String(s.prefix(40)) + "…" : s
                throw ChronicleError(.typeMismatch, "\(path): expected a record ID (a UUID such as 018bcfe5-6856-7347-bf2b-7b99f30b60ef), found the string \"\(shown)\"")
            }
            self = .reference(id)
        case let type?:
            switch (type, json) {
            case (.string, .string(let s)): self = .string(s)
            case (.int64, .string(let s)):
                guard let i = Int64(s) else {
                    let digits = s.hasPrefix("-") ? s.dropFirst() : Substring(s)
                    if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) {
                        throw ChronicleError(.typeMismatch, "\(path): \(s) is out of the int64 range (\(Int64.min) to \(Int64.max))")
                    }
                    throw ChronicleError(.typeMismatch, "\(path): expected a string of decimal digits for an int64, found \"\(s.prefix(40))\"")
                }
                self = .int(i)
            case (.double, .object(let o)):
                if let extra = o.keys.sorted().first(where: { $0 != "double" && $0 != "ieee754" }) {
                    throw ChronicleError(.typeMismatch, "\(path): a double is {\"double\", \"ieee754\"}; \"\(extra.prefix(40))\" is not one of its keys")
                }
                let text: Double?
                switch o["double"] {
                case .double(let d)?: text = d
                case .int(let i)?: text = Double(i)
                case .string("NaN")?: text = .nan
                case .string("Infinity")?: text = .infinity
                case .string("-Infinity")?: text = -.infinity
                case nil: text = nil
                default: throw mismatch("{\"double\": a number, \"NaN\", \"Infinity\" or \"-Infinity\", \"ieee754\": 16 hex digits}")
                }
                if let image = o["ieee754"] {
                    guard case .string(let hex) = image, hex.count == 16, let bits = UInt64(hex, radix: 16) else {
                        throw ChronicleError(.typeMismatch, "\(path).ieee754: expected 16 hex digits, the double's IEEE-754 64-bit image")
                    }
                    let d = Double(bitPattern: bits)
                    // The image decides (NaN payloads, -0.0); a number beside
                    // it that reads as another value means one was edited.
                    if let text, !(text.isNaN && d.isNaN), text != d {
                        throw ChronicleError(.typeMismatch, "\(path): \"double\" is \(text) but \"ieee754\" \(hex) is \(d): one of them was changed; give the same number in both, or leave one out")
                    }
                    self = .double(d)
                    return
                }
                guard let text else { throw mismatch("{\"double\": a number, \"NaN\", \"Infinity\" or \"-Infinity\", \"ieee754\": 16 hex digits}") }
                self = .double(text)
            case (.bool, .bool(let b)): self = .bool(b)
            case (.date, .object(let o)):
                guard case .string(let s)? = o["seconds"] else {
                    throw mismatch("{\"seconds\": a decimal string of seconds since 1970, at most 6 decimals}")
                }
                guard let micros = Self.microseconds(s) else {
                    throw ChronicleError(.typeMismatch, "\(path).seconds: \"\(s.prefix(40))\" is not seconds since 1970 with at most 6 decimals (Chronicle keeps microseconds), within the range of dates")
                }
                self = .date(Timestamp(microsecondsSinceEpoch: micros))
            case (.data, .object(let o)):
                guard case .string(let b64)? = o["base64"] else { throw mismatch("{\"base64\": data}") }
                guard let data = Data(base64Encoded: b64) else { throw ChronicleError(.typeMismatch, "\(path).base64: not base64") }
                self = .data(data)
            case (.transformable, .object(let o)):
                guard case .string(let b64)? = o["base64"], let data = Data(base64Encoded: b64), case .string(let typeName)? = o["typeName"] else {
                    throw mismatch("{\"base64\": data, \"mimeType\": type, \"typeName\": name}")
                }
                var mime = "application/octet-stream"
                if case .string(let m)? = o["mimeType"] { mime = m }
                self = .transformable(TransformableValue(typeName: typeName, mimeType: mime, data: data))
            case (.decimal, .object(let o)):
                guard case .string(let s)? = o["decimal"] else { throw mismatch("{\"decimal\": a decimal string of at most 38 digits}") }
                guard let d = ChronicleDecimal(string: s) else {
                    throw ChronicleError(.typeMismatch, "\(path).decimal: \"\(s.prefix(40))\" is not a decimal of at most 38 digits within its exponent range")
                }
                self = .decimal(d)
            case (.uuid, .string(let s)):
                guard let u = UUID(uuidString: s) else { throw mismatch("a UUID string") }
                self = .uuid(u)
            default:
                throw mismatch("the portable form of \(type.rawValue) (docs/portable-json.md)")
            }
        }
    }

    /// Microseconds since 1970 as exact decimal seconds: `-1.5`, `1700000000.000001`.
    static func seconds(_ micros: Int64) -> String {
        let magnitude = micros.magnitude
        let whole = magnitude / 1_000_000, fraction = magnitude % 1_000_000
        var text = (micros < 0 ? "-" : "") + String(whole)
        if fraction != 0 {
            var digits = String(fraction)
            digits = String(repeating: "0", count: 6 - digits.count) + digits
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text
    }

    /// The inverse of ``seconds(_:)``; nil for more than 6 decimals or out of range.
    static func microseconds(_ text: String) -> Int64? {
        var rest = Substring(text)
        let negative = rest.hasPrefix("-")
        if negative { rest = rest.dropFirst() }
        let parts = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].allSatisfy(\.isASCII), let whole = UInt64(parts[0]) else { return nil }
        var fraction: UInt64 = 0
        if parts.count == 2 {
            let digits = parts[1]
            guard (1...6).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }), let f = UInt64(digits) else { return nil }
            fraction = f
            for _ in digits.count..<6 { fraction *= 10 }
        }
        let (scaled, overflow) = whole.multipliedReportingOverflow(by: 1_000_000)
        guard !overflow else { return nil }
        let (total, overflow2) = scaled.addingReportingOverflow(fraction)
        guard !overflow2 else { return nil }
        if negative {
            guard total <= UInt64(Int64.max) + 1 else { return nil }
            return total == UInt64(Int64.max) + 1 ? .min : -Int64(total)
        }
        guard total <= UInt64(Int64.max) else { return nil }
        return Int64(total)
    }
}
