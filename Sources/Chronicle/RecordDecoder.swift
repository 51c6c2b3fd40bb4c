import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// Where a ``RecordDecoder`` reads field values from.
protocol RecordSource {
    /// Whether the field has a value to read (null included).
    func has(_ field: Int) -> Bool
    /// Whether the field's value is null (or absent).
    func isNull(_ field: Int) throws -> Bool
    /// The field's value.
    func value(_ field: Int) throws -> Value
    /// The common kinds read straight from the source, for a field of their
    /// own type; nil (for null too) to take the general path through `value`.
    func string(_ field: Int) -> String?
    func int64(_ field: Int) -> Int64?
    func double(_ field: Int) -> Double?
    func date(_ field: Int) -> Date?
}

extension RecordSource {
    func string(_ field: Int) -> String? { nil }
    func int64(_ field: Int) -> Int64? { nil }
    func double(_ field: Int) -> Double? { nil }
    func date(_ field: Int) -> Date? { nil }
}

/// A row of an entity's table: every field is there.
struct RowSource: RecordSource {
    let row: Row
    /// Per field index, the row's column index.
    let columns: [Int]
    let fields: [Field]

    func has(_ field: Int) -> Bool { true }
    func isNull(_ field: Int) throws -> Bool { row.hasNull(atIndex: columns[field]) }
    func value(_ field: Int) throws -> Value {
        try Value(databaseValue: row[columns[field]], field: fields[field])
    }

    // GRDB reads these straight from the statement's columns.
    func string(_ field: Int) -> String? { row[columns[field]] }
    func int64(_ field: Int) -> Int64? { row[columns[field]] }

    func double(_ field: Int) -> Double? {
        // NaN and -0.0 are stored as 8 bytes (`Value.databaseValue`): not here.
        guard case .double(let d) = (row[columns[field]] as DatabaseValue).storage else { return nil }
        return d
    }

    func date(_ field: Int) -> Date? {
        // A REAL is seconds since 1970: `Date(timeIntervalSince1970:)` of it
        // is exactly `Timestamp.date` (`Value.databaseValue`).
        guard case .double(let seconds) = (row[columns[field]] as DatabaseValue).storage else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }
}

/// Values by field index; nil for a field that has none.
struct ValuesSource: RecordSource {
    let values: [Value?]

    func has(_ field: Int) -> Bool { values[field] != nil }
    func isNull(_ field: Int) -> Bool { values[field]?.isNull ?? true }
    func value(_ field: Int) throws -> Value { values[field] ?? .null }
}

/// The keys a record type read while decoding, and how.
final class KeyReads {
    /// Keys read only if present (`decodeIfPresent`, `contains`, `decodeNil`).
    var optional: Set<String> = []
    /// Keys read as required (`decode`).
    var required: Set<String> = []

    func contains(_ key: String) -> Bool { optional.contains(key) || required.contains(key) }
}

/// Builds a Codable record straight from field values (no JSON in
/// between): the record's `init(from:)` reads a keyed container whose keys
/// are field names, plus `id`.
///
/// A key that is no field of the entity is absent: `decodeIfPresent` gives
/// nil, `decode` throws ``ChronicleError/Code/unknownAttribute``.
final class RecordDecoder<Source: RecordSource>: Decoder {
    let entity: Entity
    let fieldIndex: [String: Int]
    let source: Source
    let id: RecordID
    /// When set, every key the record reads is noted here.
    let reads: KeyReads?
    /// Per field index, its attribute type (nil for a relationship).
    let kinds: [AttributeType?]

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(entity: Entity, fieldIndex: [String: Int], source: Source, id: RecordID, reads: KeyReads? = nil) {
        self.entity = entity
        self.fieldIndex = fieldIndex
        self.source = source
        self.id = id
        self.reads = reads
        kinds = entity.fields.map { if case .attribute(let type) = $0.kind { type } else { nil } }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Keyed(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw ChronicleError(.typeMismatch, "a \(entity.name) record is read by property name (a keyed container), not as a list")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw ChronicleError(.typeMismatch, "a \(entity.name) record is read by property name (a keyed container), not as one value")
    }

    fileprivate func path(_ key: String) -> String { "\(entity.name).\(key)" }

    fileprivate func decode<T: Decodable>(_ type: T.Type, key: String) throws -> T {
        if let reads, !reads.optional.contains(key) { reads.required.insert(key) }
        if key == "id" {
            if let id = id as? T { return id }
            throw ChronicleError(.typeMismatch, "cannot read \(entity.name).id, a record ID, as \(T.self)")
        }
        guard let i = fieldIndex[key] else {
            throw ChronicleError(.unknownAttribute, "\(path(key)) is not a field of \(entity.name), and the record type requires it; keep the property in memory only by leaving it out of the type's CodingKeys, or by decoding it with decodeIfPresent")
        }
        guard source.has(i) else {
            throw ChronicleError(.missingValue, "\(path(key)) has no value, and the record type requires one")
        }
        return try RecordValueConversion.decode(T.self, from: try source.value(i), field: entity.fields[i], path: path(key))
    }

    /// The index of a field of type `type` that the source reads
    /// directly, when no key reads are being noted.
    @inline(__always)
    fileprivate func direct(_ key: String, _ type: AttributeType) -> Int? {
        guard reads == nil, let i = fieldIndex[key], kinds[i] == type else { return nil }
        return i
    }

    fileprivate func contains(_ key: String) -> Bool {
        reads?.optional.insert(key)
        if key == "id" { return true }
        guard let i = fieldIndex[key] else { return false }
        return source.has(i)
    }

    fileprivate func decodeNil(_ key: String) throws -> Bool {
        reads?.optional.insert(key)
        if key == "id" { return false }
        guard let i = fieldIndex[key] else { return true }
        return try source.isNull(i)
    }

    private struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: RecordDecoder
        var codingPath: [any CodingKey] { [] }

        var allKeys: [Key] {
            (["id"] + decoder.entity.fields.indices.filter { decoder.source.has($0) }.map { decoder.entity.fields[$0].name })
                .compactMap { Key(stringValue: $0) }
        }

        func contains(_ key: Key) -> Bool { decoder.contains(key.stringValue) }
        func decodeNil(forKey key: Key) throws -> Bool { try decoder.decodeNil(key.stringValue) }

        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
            if let i = decoder.direct(key.stringValue, .bool), let v = decoder.source.int64(i) { return v != 0 }
            return try decoder.decode(type, key: key.stringValue)
        }
        func decode(_ type: String.Type, forKey key: Key) throws -> String {
            if let i = decoder.direct(key.stringValue, .string), let v = decoder.source.string(i) { return v }
            return try decoder.decode(type, key: key.stringValue)
        }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
            if let i = decoder.direct(key.stringValue, .double), let v = decoder.source.double(i) { return v }
            return try decoder.decode(type, key: key.stringValue)
        }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
            if let i = decoder.direct(key.stringValue, .int64), let v = decoder.source.int64(i) { return Int(v) }
            return try decoder.decode(type, key: key.stringValue)
        }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
            if let i = decoder.direct(key.stringValue, .int64), let v = decoder.source.int64(i) { return v }
            return try decoder.decode(type, key: key.stringValue)
        }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.decode(type, key: key.stringValue) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.decode(type, key: key.stringValue) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            if T.self == Date.self, let i = decoder.direct(key.stringValue, .date), let v = decoder.source.date(i) { return v as! T }
            return try decoder.decode(type, key: key.stringValue)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            throw nested(key)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw nested(key) }
        func superDecoder() throws -> any Decoder { throw ChronicleError(.typeMismatch, "a record cannot decode a superclass") }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw nested(key) }

        private func nested(_ key: Key) -> ChronicleError {
            ChronicleError(.typeMismatch, "\(decoder.path(key.stringValue)) must be decoded as one value (decode(_:forKey:)), not as a nested container")
        }
    }
}
