import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// Converts between Swift property values and field values, for
/// ``RecordEncoder`` and ``RecordDecoder``.
///
/// | field type | Swift types |
/// |---|---|
/// | string | `String` |
/// | int64 | `Int`, `Int8`…`Int64`, `UInt8`…`UInt64` (range-checked) |
/// | double | `Double`, `Float`; integers a double holds exactly |
/// | bool | `Bool` |
/// | date | `Date`, ``Timestamp`` |
/// | data | `Data` |
/// | decimal | `Decimal`, ``ChronicleDecimal``; integers |
/// | uuid | `UUID` |
/// | transformable | ``TransformableValue``, or any other Codable value (stored as its JSON, `application/json`) |
/// | to-one relationship | ``RecordID`` |
///
/// Other types reach a field through their single-value encoding (an enum
/// with a `String` raw value stores in a string field).
enum RecordValueConversion {
    // MARK: Encoding

    /// The value to store for `value` in `field`.
    static func value<T: Encodable>(of value: T, for field: Field, path: String) throws -> Value {
        if case .attribute(.transformable) = field.kind {
            if let t = value as? TransformableValue { return .transformable(t) }
            if let optional = value as? any OptionalValue, optional.isNone { return .null }
            return .transformable(try TransformableValue(encoding: value))
        }
        guard let plain = try plainValue(value, for: field, path: path) else {
            throw ChronicleError(.typeMismatch, "\(path) is \(field.kind.withArticle); got a \(T.self), which is not a single value")
        }
        return try coerce(plain, to: field, path: path)
    }

    /// The value of a Swift value of one of the known types, or what it
    /// encodes into a single-value container; nil if it encodes a keyed or
    /// unkeyed container.
    private static func plainValue<T: Encodable>(_ value: T, for field: Field, path: String) throws -> Value? {
        switch value {
        case let v as String: return .string(v)
        case let v as Bool: return .bool(v)
        case let v as Int: return .int(Int64(v))
        case let v as Int64: return .int(v)
        case let v as Int32: return .int(Int64(v))
        case let v as Int16: return .int(Int64(v))
        case let v as Int8: return .int(Int64(v))
        case let v as UInt8: return .int(Int64(v))
        case let v as UInt16: return .int(Int64(v))
        case let v as UInt32: return .int(Int64(v))
        case let v as UInt64:
            guard let i = Int64(exactly: v) else { throw ChronicleError(.invalidValue, "\(path): \(v) does not fit in an int64") }
            return .int(i)
        case let v as UInt:
            guard let i = Int64(exactly: v) else { throw ChronicleError(.invalidValue, "\(path): \(v) does not fit in an int64") }
            return .int(i)
        case let v as Double: return .double(v)
        case let v as Float: return .double(Double(v))
        case let v as Date: return .date(Timestamp(v))
        case let v as Timestamp: return .date(v)
        case let v as Data: return .data(v)
        case let v as UUID: return .uuid(v)
        case let v as Decimal:
            do { return .decimal(try ChronicleDecimal(v)) } catch { throw ChronicleError(.invalidValue, "\(path): \(error.message)") }
        case let v as ChronicleDecimal: return .decimal(v)
        case let v as RecordID: return .reference(v)
        case let v as TransformableValue: return .transformable(v)
        default:
            let capture = SingleValueCapture(field: field, path: path)
            do {
                try value.encode(to: capture)
            } catch {
                if capture.isComposite { return nil }
                throw error
            }
            return capture.isComposite ? nil : capture.captured
        }
    }

    /// `value` as `field` stores it: its own type, or an exact conversion
    /// (an integer into a double or a decimal field).
    static func coerce(_ value: Value, to field: Field, path: String) throws -> Value {
        switch (field.kind, value) {
        case (_, .null), (.reference, .reference): return value
        case (.attribute(let type), _) where value.attributeType == type: return value
        case (.attribute(.double), .int(let i)):
            if let d = Double(exactly: i) { return .double(d) }
        case (.attribute(.decimal), .int(let i)): return .decimal(ChronicleDecimal(i))
        default: break
        }
        throw ChronicleError(.typeMismatch, "\(path) is \(field.kind.withArticle); got \(value)")
    }

    // MARK: Decoding

    /// The Swift value of type `T` for a field's value.
    static func decode<T: Decodable>(_ type: T.Type, from value: Value, field: Field, path: String) throws -> T {
        if let leaf = try leaf(T.self, from: value, field: field, path: path) { return leaf }
        if case .transformable(let t) = value {
            guard t.mimeType == "application/json" else {
                throw mismatch(T.self, value, field, path)
            }
            do {
                return try JSONDecoder().decode(T.self, from: t.data)
            } catch {
                throw ChronicleError(.typeMismatch, "cannot read \(path), a \(t.typeName) stored as JSON, as \(T.self): \(error)")
            }
        }
        return try T(from: SingleValueReader(value: value, field: field, path: path))
    }

    /// The known leaf types; nil if `T` is none of them.
    private static func leaf<T>(_ type: T.Type, from value: Value, field: Field, path: String) throws -> T? {
        func get<U>(_ u: U?) throws -> T {
            guard let u else {
                if value.isNull { throw ChronicleError(.missingValue, "\(path) is empty, and \(T.self) is not optional") }
                throw mismatch(T.self, value, field, path)
            }
            return u as! T
        }
        switch type {
        case is String.Type:
            if case .string(let s) = value { return s as? T }
            return try get(nil as String?)
        case is Bool.Type:
            if case .bool(let b) = value { return b as? T }
            return try get(nil as Bool?)
        case is Int.Type: return try get(integer(value).flatMap { Int(exactly: $0) })
        case is Int64.Type: return try get(integer(value))
        case is Int32.Type: return try get(integer(value).flatMap { Int32(exactly: $0) })
        case is Int16.Type: return try get(integer(value).flatMap { Int16(exactly: $0) })
        case is Int8.Type: return try get(integer(value).flatMap { Int8(exactly: $0) })
        case is UInt.Type: return try get(integer(value).flatMap { UInt(exactly: $0) })
        case is UInt64.Type: return try get(integer(value).flatMap { UInt64(exactly: $0) })
        case is UInt32.Type: return try get(integer(value).flatMap { UInt32(exactly: $0) })
        case is UInt16.Type: return try get(integer(value).flatMap { UInt16(exactly: $0) })
        case is UInt8.Type: return try get(integer(value).flatMap { UInt8(exactly: $0) })
        case is Double.Type:
            if case .double(let d) = value { return d as? T }
            return try get(nil as Double?)
        case is Float.Type:
            if case .double(let d) = value { return Float(d) as? T }
            return try get(nil as Float?)
        case is Date.Type:
            if case .date(let t) = value { return t.date as? T }
            return try get(nil as Date?)
        case is Timestamp.Type:
            if case .date(let t) = value { return t as? T }
            return try get(nil as Timestamp?)
        case is Data.Type:
            if case .data(let d) = value { return d as? T }
            return try get(nil as Data?)
        case is UUID.Type:
            if case .uuid(let u) = value { return u as? T }
            return try get(nil as UUID?)
        case is Decimal.Type:
            if case .decimal(let d) = value { return d.decimal as? T }
            return try get(nil as Decimal?)
        case is ChronicleDecimal.Type:
            if case .decimal(let d) = value { return d as? T }
            return try get(nil as ChronicleDecimal?)
        case is RecordID.Type:
            if case .reference(let r) = value { return r as? T }
            return try get(nil as RecordID?)
        case is TransformableValue.Type:
            if case .transformable(let t) = value { return t as? T }
            return try get(nil as TransformableValue?)
        default:
            return nil
        }
    }

    private static func integer(_ value: Value) -> Int64? {
        if case .int(let i) = value { return i }
        return nil
    }

    static func mismatch<T>(_ type: T.Type, _ value: Value, _ field: Field, _ path: String) -> ChronicleError {
        ChronicleError(.typeMismatch, "cannot read \(path), \(field.kind.withArticle) holding \(value), as \(T.self)")
    }
}

/// Hands one field value to a type's `init(from:)` through a single-value
/// container: how enums with raw values and wrapper types read a field.
struct SingleValueReader: Decoder, SingleValueDecodingContainer {
    let value: Value
    let field: Field
    let path: String

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw ChronicleError(.typeMismatch, "cannot read \(path), \(field.kind.withArticle), as a keyed value")
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw ChronicleError(.typeMismatch, "cannot read \(path), \(field.kind.withArticle), as a list")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value.isNull }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try RecordValueConversion.decode(T.self, from: value, field: field, path: path)
    }
}

/// Lets the conversion see an optional's `nil` through a generic value.
private protocol OptionalValue {
    var isNone: Bool { get }
}

extension Optional: OptionalValue {
    var isNone: Bool { self == nil }
}
