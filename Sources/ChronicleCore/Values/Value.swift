import Foundation

/// One attribute value, portable across platforms and devices.
///
/// Doubles compare and hash by bit pattern, so NaN payloads, infinities and
/// `-0.0` survive every round trip and equal values always hash equal.
public enum Value: Sendable, Hashable, CustomStringConvertible {
    /// No value (an optional attribute left empty, or a cleared relationship).
    case null
    /// UTF-8 text.
    case string(String)
    /// A 64-bit signed integer.
    case int(Int64)
    /// An IEEE 754 double, kept bit for bit.
    case double(Double)
    /// A Boolean.
    case bool(Bool)
    /// A point in time, exact to the microsecond.
    case date(Timestamp)
    /// Bytes of any size.
    case data(Data)
    /// An exact decimal.
    case decimal(ChronicleDecimal)
    /// A UUID value (not a relationship).
    case uuid(UUID)
    /// An app-defined value with its type name and MIME type.
    case transformable(TransformableValue)
    /// A to-one relationship: the ID of the destination record.
    case reference(RecordID)

    /// Whether this is ``null``.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The attribute type this value belongs to; nil for null and references.
    public var attributeType: AttributeType? {
        switch self {
        case .null, .reference: return nil
        case .string: return .string
        case .int: return .int64
        case .double: return .double
        case .bool: return .bool
        case .date: return .date
        case .data: return .data
        case .decimal: return .decimal
        case .uuid: return .uuid
        case .transformable: return .transformable
        }
    }

    /// Whether two texts are the same bytes. Swift's `String` equality
    /// joins canonically equivalent spellings (a composed and a decomposed
    /// "é"); a value round-trips bit for bit, so an update from one
    /// spelling to the other is a change, as SQLite and the unique keys
    /// see it.
    package static func sameText(_ a: String, _ b: String) -> Bool {
        // Equal bytes are always equal strings: the quick test first.
        guard a == b else { return false }
        var (a, b) = (a, b)
        return a.withUTF8 { x in b.withUTF8 { y in x.count == y.count && (x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0) } }
    }

    public static func == (lhs: Value, rhs: Value) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.string(a), .string(b)): return Self.sameText(a, b)
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern
        case let (.bool(a), .bool(b)): return a == b
        case let (.date(a), .date(b)): return a == b
        case let (.data(a), .data(b)): return a == b
        case let (.decimal(a), .decimal(b)): return a.isIdentical(to: b)
        case let (.uuid(a), .uuid(b)): return a == b
        case let (.transformable(a), .transformable(b)): return a == b
        case let (.reference(a), .reference(b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .string(var v):
            hasher.combine(1)
            v.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            hasher.combine(0xFF as UInt8)
        case .int(let v): hasher.combine(2); hasher.combine(v)
        case .double(let v): hasher.combine(3); hasher.combine(v.bitPattern)
        case .bool(let v): hasher.combine(4); hasher.combine(v)
        case .date(let v): hasher.combine(5); hasher.combine(v)
        case .data(let v): hasher.combine(6); hasher.combine(v)
        case .decimal(let v): hasher.combine(7); hasher.combine(v.isNegative); hasher.combine(v.significand); hasher.combine(v.exponent)
        case .uuid(let v): hasher.combine(8); hasher.combine(v)
        case .transformable(let v): hasher.combine(9); hasher.combine(v)
        case .reference(let v): hasher.combine(10); hasher.combine(v)
        }
    }

    public var description: String {
        switch self {
        case .null: return "null"
        case .string(let v): return String(reflecting: v)
        case .int(let v): return String(v)
        case .double(let v): return v.isNaN ? "nan(0x\(String(v.bitPattern, radix: 16)))" : String(v)
        case .bool(let v): return String(v)
        case .date(let v): return v.description
        case .data(let v): return "<\(v.count) bytes>"
        case .decimal(let v): return v.description
        case .uuid(let v): return v.uuidString.lowercased()
        case .transformable(let v): return "<\(v.typeName) \(v.mimeType) \(v.data.count) bytes>"
        case .reference(let v): return "->\(v)"
        }
    }
}

extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}
