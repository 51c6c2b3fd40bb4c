import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// Turns a Codable record into field values, straight from its `encode(to:)`
/// (no JSON in between).
///
/// The record must encode as a keyed container whose keys are field names.
/// `id` is skipped (the record ID comes from ``ChronicleRecord/id``); every
/// other key names a field, or is collected in ``unknownKeys`` for
/// ``RecordCoding`` to judge. Each value is converted for its field's type
/// (see ``RecordValueConversion``).
final class RecordEncoder: Encoder {
    let entity: Entity
    private let fieldIndex: [String: Int]
    /// Per field index, the value encoded for it, if any (`.null` for `encodeNil`).
    private(set) var values: [Value?]
    /// Keys that are not fields of the entity, with whether their value was non-nil.
    private(set) var unknownKeys: [String: Bool] = [:]
    /// Set when the record asked for another container than a keyed one.
    private(set) var refusal: String?

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(entity: Entity, fieldIndex: [String: Int]) {
        self.entity = entity
        self.fieldIndex = fieldIndex
        values = Array(repeating: nil, count: entity.fields.count)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(Keyed(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        refusal = notKeyed
        return RefusingEncodingContainer<AnyKey>(message: notKeyed)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        refusal = notKeyed
        return RefusingEncodingContainer<AnyKey>(message: notKeyed)
    }

    private var notKeyed: String {
        "a \(entity.name) record must encode its properties by name (a keyed container)"
    }

    fileprivate func set<T: Encodable>(_ value: T, key: String) throws {
        if key == "id" { return }
        guard let i = fieldIndex[key] else {
            unknownKeys[key] = true
            return
        }
        values[i] = try RecordValueConversion.value(of: value, for: entity.fields[i], path: "\(entity.name).\(key)")
    }

    fileprivate func setNil(key: String) {
        if key == "id" { return }
        guard let i = fieldIndex[key] else {
            if unknownKeys[key] == nil { unknownKeys[key] = false }
            return
        }
        values[i] = .null
    }

    private struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: RecordEncoder
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws { encoder.setNil(key: key.stringValue) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: String, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: Double, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: Float, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: Int, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try encoder.set(value, key: key.stringValue) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(RefusingEncodingContainer<NestedKey>(message: nested(key)))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            RefusingEncodingContainer<AnyKey>(message: nested(key))
        }

        mutating func superEncoder() -> any Encoder { RefusingEncoder(message: "a record cannot encode a superclass") }
        mutating func superEncoder(forKey key: Key) -> any Encoder { RefusingEncoder(message: nested(key)) }

        private func nested(_ key: Key) -> String {
            "\(encoder.entity.name).\(key.stringValue) must be encoded as one value (encode(_:forKey:)), not as a nested container"
        }
    }
}

/// Captures what a value's `encode(to:)` writes into a single-value
/// container: how enums with raw values and wrapper types reach a field.
final class SingleValueCapture: Encoder, SingleValueEncodingContainer {
    private(set) var captured: Value?
    /// Set when the value wrote a keyed or unkeyed container instead.
    private(set) var isComposite = false
    private let field: Field
    private let path: String

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(field: Field, path: String) {
        self.field = field
        self.path = path
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        isComposite = true
        return KeyedEncodingContainer(RefusingEncodingContainer<Key>(message: "composite"))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        isComposite = true
        return RefusingEncodingContainer<AnyKey>(message: "composite")
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { captured = .null }
    func encode<T: Encodable>(_ value: T) throws {
        captured = try RecordValueConversion.value(of: value, for: field, path: path)
    }
}

/// A container that refuses every write: what a record gets for a shape
/// Chronicle cannot store. The refusal is thrown by the first write.
struct RefusingEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol, UnkeyedEncodingContainer, SingleValueEncodingContainer {
    let message: String
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }

    private func refuse() -> ChronicleError { ChronicleError(.typeMismatch, message) }

    init(message: String) { self.message = message }

    mutating func encodeNil(forKey key: Key) throws { throw refuse() }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw refuse() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(RefusingEncodingContainer<NestedKey>(message: message))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { RefusingEncoder(message: message) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { RefusingEncoder(message: message) }

    mutating func encodeNil() throws { throw refuse() }
    mutating func encode<T: Encodable>(_ value: T) throws { throw refuse() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(RefusingEncodingContainer<NestedKey>(message: message))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
}

/// An encoder whose every container refuses writes.
struct RefusingEncoder: Encoder {
    let message: String
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RefusingEncodingContainer<Key>(message: message))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { RefusingEncodingContainer<AnyKey>(message: message) }
    func singleValueContainer() -> any SingleValueEncodingContainer { RefusingEncodingContainer<AnyKey>(message: message) }
}

/// A coding key of any name.
struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
