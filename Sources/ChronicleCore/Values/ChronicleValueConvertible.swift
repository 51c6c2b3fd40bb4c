import Foundation

/// A Swift value that converts to a Chronicle ``Value``, so dynamic writes
/// take plain values:
///
/// ```swift
/// tx.insert("Note", ["title": "Groceries", "pinned": true, "created": Date(), "folder": nil])
/// ```
///
/// `String`, the integer types up to 64 bits (`UInt64` and `UInt` must fit
/// in `Int64`), `Double`, `Float`, `Bool`, `Date`, `Data`, `UUID`,
/// Foundation's `Decimal`, ``Timestamp``, ``ChronicleDecimal``,
/// ``TransformableValue``, ``RecordID`` (a to-one relationship), `Value`
/// itself, arrays of `Encodable` elements (a transformable value holding
/// their JSON, as a ``ChronicleRecord``'s array property stores it), and
/// optionals of them (`nil` is ``Value/null``) conform.
public protocol ChronicleValueConvertible {
    /// The value to store.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` if it has no Chronicle
    ///   value (a `UInt64` over `Int64.max`, a NaN `Decimal`).
    func chronicleValue() throws(ChronicleError) -> Value
}

extension Value: ChronicleValueConvertible {
    public func chronicleValue() -> Value { self }
}

extension String: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .string(self) }
}

extension Bool: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .bool(self) }
}

extension Double: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .double(self) }
}

extension Float: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .double(Double(self)) }
}

extension Int: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(Int64(self)) }
}

extension Int64: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(self) }
}

extension Int32: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(Int64(self)) }
}

extension Int16: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(Int64(self)) }
}

extension Int8: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(Int64(self)) }
}

extension UInt32: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(Int64(self)) }
}

extension UInt16: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(Int64(self)) }
}

extension UInt8: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .int(Int64(self)) }
}

extension UInt64: ChronicleValueConvertible {
    public func chronicleValue() throws(ChronicleError) -> Value {
        guard let v = Int64(exactly: self) else { throw ChronicleError(.invalidValue, "\(self) does not fit in an int64") }
        return .int(v)
    }
}

extension UInt: ChronicleValueConvertible {
    public func chronicleValue() throws(ChronicleError) -> Value { try UInt64(self).chronicleValue() }
}

extension Date: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .date(Timestamp(self)) }
}

extension Timestamp: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .date(self) }
}

extension Data: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .data(self) }
}

extension UUID: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .uuid(self) }
}

extension Decimal: ChronicleValueConvertible {
    public func chronicleValue() throws(ChronicleError) -> Value { .decimal(try ChronicleDecimal(self)) }
}

extension ChronicleDecimal: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .decimal(self) }
}

extension TransformableValue: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .transformable(self) }
}

extension RecordID: ChronicleValueConvertible {
    public func chronicleValue() -> Value { .reference(self) }
}

extension Optional: ChronicleValueConvertible where Wrapped: ChronicleValueConvertible {
    public func chronicleValue() throws(ChronicleError) -> Value {
        guard let self else { return .null }
        return try self.chronicleValue()
    }
}

extension Array: ChronicleValueConvertible where Element: Encodable {
    /// A transformable value holding the array's JSON, named after its type
    /// (as a ``ChronicleRecord``'s array property is stored).
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` if JSON cannot hold
    ///   an element (a NaN `Double`, say).
    public func chronicleValue() throws(ChronicleError) -> Value {
        do {
            return .transformable(try TransformableValue(encoding: self))
        } catch {
            throw ChronicleError(.invalidValue, "an array of \(Element.self) cannot be stored as JSON", underlying: error)
        }
    }
}
