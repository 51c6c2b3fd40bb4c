import Foundation

/// A Codable type stored as one entity's records.
///
/// Properties map to fields by name; `id` is the record ID. Values convert
/// through their JSON form: `String`, integers, `Double`, `Bool`, `Data`,
/// `UUID`, ``ChronicleDecimal``, ``RecordID`` (for to-one relationships) and
/// `Date` (as microseconds) all work.
///
/// ```swift
/// struct Book: ChronicleRecord {
///     static let entityName = "Book"
///     var id: RecordID
///     var title: String
///     var pages: Int64
/// }
/// ```
public protocol ChronicleRecord: Codable, Sendable {
    /// The entity this type is stored in.
    static var entityName: String { get }
    /// The record's ID.
    var id: RecordID { get }
}

enum RecordCoding {
    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(Timestamp(date).microsecondsSinceEpoch)
        }
        e.dataEncodingStrategy = .base64
        return e
    }()

    static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let c = try decoder.singleValueContainer()
            if let micros = try? c.decode(Int64.self) { return Timestamp(microsecondsSinceEpoch: micros).date }
            let s = try c.decode(String.self)
            guard let t = Timestamp(iso8601: s) else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a date: \(s)")
            }
            return t.date
        }
        return d
    }()

    /// The record's fields as values, `id` excluded.
    static func values<R: ChronicleRecord>(of record: R, entity: Entity) throws -> [String: Value] {
        let data = try encoder.encode(record)
        guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: data) else {
            throw ChronicleError(.typeMismatch, "\(R.self) does not encode as an object")
        }
        var values: [String: Value] = [:]
        for (key, json) in object where key != "id" {
            guard let field = entity.field(named: key) else {
                throw ChronicleError(.unknownAttribute, "\(R.self).\(key) is not a field of \(entity.name)")
            }
            values[key] = try Value(json: json, for: field, path: "\(R.self).\(key)")
        }
        return values
    }

    /// Builds a record from a row's values.
    static func record<R: ChronicleRecord>(_ type: R.Type, id: RecordID, values: [String: Value]) throws -> R {
        var object: [String: JSONValue] = ["id": .string(id.description)]
        for (k, v) in values {
            if case .date(let t) = v {
                object[k] = .int(t.microsecondsSinceEpoch)
            } else if !v.isNull {
                object[k] = v.json
            }
        }
        return try decoder.decode(R.self, from: try JSONEncoder().encode(JSONValue.object(object)))
    }
}
