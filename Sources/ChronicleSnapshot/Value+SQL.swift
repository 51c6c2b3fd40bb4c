import ChronicleCore
import Foundation
import GRDB

extension Value {
    /// How a value is stored in a snapshot column. Most map to SQLite's own
    /// types so the `sqlite3` shell, app queries and GRDB's decoding read
    /// them naturally (see `docs/values.md`); the two doubles SQLite cannot
    /// keep exactly (NaN payloads and -0.0) are stored as their 8-byte
    /// big-endian bit pattern instead. A date is a REAL of seconds since
    /// 1970 (``Timestamp/secondsSince1970``, which GRDB's `Date` decoding
    /// reads as exactly ``Timestamp/date``), or, for the rare date whose
    /// microsecond no double holds exactly (a fraction of a second far from
    /// 1970), its microseconds as an 8-byte big-endian BLOB.
    package var databaseValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .string(let s): return s.databaseValue
        case .int(let i): return i.databaseValue
        case .double(let d):
            if d.isNaN || (d == 0 && d.sign == .minus) {
                return Data(withUnsafeBytes(of: d.bitPattern.bigEndian) { Array($0) }).databaseValue
            }
            return d.databaseValue
        case .bool(let b): return (b ? 1 : 0 as Int64).databaseValue
        case .date(let t):
            if let seconds = t.storedSeconds { return seconds.databaseValue }
            return Data(withUnsafeBytes(of: t.microsecondsSinceEpoch.bigEndian) { Array($0) }).databaseValue
        case .data(let d): return d.databaseValue
        case .decimal(let d): return d.description.databaseValue
        case .uuid(let u): return u.uuidString.lowercased().databaseValue
        case .transformable(let t):
            let json = Value.transformable(t).json
            let data = (try? JSONEncoder.sorted.encode(json)) ?? Data()
            return String(decoding: data, as: UTF8.self).databaseValue
        case .reference(let r): return r.databaseValue
        }
    }

    /// Reads a column back, given the field it belongs to.
    package init(databaseValue dbValue: DatabaseValue, field: Field) throws(ChronicleError) {
        if dbValue.isNull {
            self = .null
            return
        }
        func bad() -> ChronicleError {
            ChronicleError(.databaseCorrupt, "column \(field.name) holds \(dbValue), which is not a valid value for \(field.kind.withArticle)")
        }
        switch field.kind {
        case .reference:
            guard let data = Data.fromDatabaseValue(dbValue), data.count == 16 else { throw bad() }
            self = .reference(data.withUnsafeBytes { RecordID(bytes: $0) })
        case .attribute(let type):
            switch type {
            case .string: guard let s = String.fromDatabaseValue(dbValue) else { throw bad() }; self = .string(s)
            case .int64: guard let i = Int64.fromDatabaseValue(dbValue) else { throw bad() }; self = .int(i)
            case .double:
                if case .blob(let data) = dbValue.storage, data.count == 8 {
                    self = .double(Double(bitPattern: data.reduce(0) { $0 << 8 | UInt64($1) }))
                } else {
                    guard let d = Double.fromDatabaseValue(dbValue) else { throw bad() }
                    self = .double(d)
                }
            case .bool: guard let i = Int64.fromDatabaseValue(dbValue) else { throw bad() }; self = .bool(i != 0)
            case .date:
                switch dbValue.storage {
                case .double(let seconds):
                    guard let t = Timestamp(exactlySecondsSince1970: seconds) else { throw bad() }
                    self = .date(t)
                case .int64(let seconds):
                    // What SQLite makes of a whole number of seconds in a
                    // column without REAL affinity.
                    guard let t = Timestamp(exactlySecondsSince1970: Double(seconds)) else { throw bad() }
                    self = .date(t)
                case .blob(let data) where data.count == 8:
                    self = .date(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: data.reduce(0) { $0 << 8 | UInt64($1) })))
                default:
                    throw bad()
                }
            case .data: guard let d = Data.fromDatabaseValue(dbValue) else { throw bad() }; self = .data(d)
            case .decimal:
                guard let s = String.fromDatabaseValue(dbValue), let d = ChronicleDecimal(string: s) else { throw bad() }
                self = .decimal(d)
            case .uuid:
                guard let s = String.fromDatabaseValue(dbValue), let u = UUID(uuidString: s) else { throw bad() }
                self = .uuid(u)
            case .transformable:
                guard let s = String.fromDatabaseValue(dbValue),
                      let json = try? JSONDecoder().decode(JSONValue.self, from: Data(s.utf8))
                else { throw bad() }
                self = try Value(json: json, for: field, path: field.name)
            }
        }
    }
}

extension RecordID: DatabaseValueConvertible {
    /// Record IDs are stored as 16-byte blobs: compact keys, and `hex(id)` in
    /// the `sqlite3` shell shows them.
    public var databaseValue: DatabaseValue { Data(bytes).databaseValue }

    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> RecordID? {
        guard case .blob(let data) = dbValue.storage, data.count == 16 else { return nil }
        return data.withUnsafeBytes { RecordID(bytes: $0) }
    }
}

extension Timestamp {
    /// The REAL a snapshot column stores for this date: its seconds since
    /// 1970, when they give back this very microsecond; nil otherwise.
    var storedSeconds: Double? {
        let seconds = secondsSince1970
        return Timestamp(exactlySecondsSince1970: seconds) == self ? seconds : nil
    }
}

extension Timestamp: DatabaseValueConvertible {
    /// A timestamp as a snapshot stores it (see `Value.databaseValue`).
    public var databaseValue: DatabaseValue { Value.date(self).databaseValue }

    /// Reads a date column exactly: seconds since 1970, or 8 bytes of
    /// microseconds.
    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> Timestamp? {
        guard case .date(let t)? = try? Value(databaseValue: dbValue, field: Field(name: "date", kind: .attribute(.date), isOptional: false, defaultValue: nil)) else { return nil }
        return t
    }
}

extension ChronicleDecimal: DatabaseValueConvertible {
    /// A decimal as a snapshot stores it: its exact text.
    public var databaseValue: DatabaseValue { description.databaseValue }

    /// Reads a decimal column exactly, representation included (`1.50`).
    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> ChronicleDecimal? {
        String.fromDatabaseValue(dbValue).flatMap(ChronicleDecimal.init(string:))
    }
}

extension TransformableValue: DatabaseValueConvertible {
    /// A transformable value as a snapshot stores it: JSON text with its
    /// type name, MIME type and base64 bytes.
    public var databaseValue: DatabaseValue { Value.transformable(self).databaseValue }

    /// Reads a transformable column, so a GRDB record can declare a
    /// `TransformableValue` property and call ``TransformableValue/decoded(as:)``.
    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> TransformableValue? {
        let field = Field(name: "value", kind: .attribute(.transformable), isOptional: false, defaultValue: nil)
        guard case .transformable(let t)? = try? Value(databaseValue: dbValue, field: field) else { return nil }
        return t
    }
}

extension JSONEncoder {
    static var sorted: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }
}

extension Field.Kind {
    /// The declared SQLite column type.
    var sqlType: String {
        switch self {
        case .reference: return "BLOB"
        case .attribute(let t):
            switch t {
            case .string, .decimal, .uuid, .transformable: return "TEXT"
            case .int64, .bool: return "INTEGER"
            case .double, .date: return "REAL"
            case .data: return "BLOB"
            }
        }
    }
}

/// Quotes an identifier for SQL. Schema names are already restricted to
/// letters, digits and underscores; quoting keeps SQL keywords usable as names.
func quoted(_ identifier: String) -> String {
    if !identifier.utf8.contains(UInt8(ascii: "\"")) { return "\"" + identifier + "\"" }
    return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

/// The SQL the merge engine runs per entity, built once per snapshot.
struct EntitySQL: Sendable {
    /// The row's columns, then whether it holds a compact state.
    let selectRow: String
    let deleteRow: String
    let insertRow: String
    let exists: String
    /// Inserts a new record with its compact state (see `CompactState`)
    /// unless `_chronicle_records` has a state for it.
    let insertCompact: String
    /// Inserts a new record with its compact state, for an ID that no state
    /// in `_chronicle_records` can have (see `MergeEngine.largestStateID`).
    let insertCompactFresh: String
    /// Reads a row's values and its compact state's version, if it has one.
    let selectCompact: String
    /// Forgets a row's compact state once `_chronicle_records` holds its state.
    let clearCompact: String
    /// Writes a row with its compact state (a record of an entity with
    /// unique keys or references, whose refresh found it could be compact).
    /// Not `OR IGNORE`: a clash with a unique index must fail, not vanish.
    let insertRowCompact: String
    /// The largest ID of any row.
    let largestRowID: String
    /// Per unique constraint: the compact rows holding a key (whose keys
    /// are not in `_chronicle_keys`).
    let compactKeyGroup: [String]
    /// Per unique constraint: the visible records holding a key, but one.
    let clashing: [String]
    /// Per unique constraint: the field indices of its fields.
    let constraintFields: [[Int]]
    /// Per reference field of any entity pointing at this one: the
    /// referring entity's index, and the query for its compact rows
    /// pointing at a record (whose references are not in `_chronicle_refs`).
    let compactReferrers: [(entity: Int, sql: String)]
    /// Whether any to-one relationship points at this entity.
    let isReferenced: Bool
    /// Whether a record's row is exactly its field values: the entity has no
    /// references, no unique constraints, and nothing refers to it, so no
    /// other record changes its row and it changes no other record's.
    let isIndependent: Bool

    static func make(_ schema: Schema) -> [EntitySQL] {
        schema.entities.map { e in
            // Chronicle writes and reads rows in their own table, not the
            // view apps read (see `SnapshotTables`).
            let table = quoted(SnapshotTables.rows(e.name))
            let columns = e.fields.map { quoted($0.name) }.joined(separator: ", ")
            let referenced = schema.entities.contains { other in
                other.fields.contains { if case .reference(let d, _) = $0.kind { return d == e.name } else { return false } }
            }
            let compactHead = "INSERT OR IGNORE INTO \(table) (id, \(columns.isEmpty ? "" : columns + ", ")\(CompactState.column))"
            let compactValues = Array(repeating: "?", count: e.fields.count + 2).joined(separator: ", ")
            return EntitySQL(
                selectRow: "SELECT \(columns.isEmpty ? "" : columns + ", ")\(CompactState.column) IS NOT NULL FROM \(table) WHERE id = ?",
                deleteRow: "DELETE FROM \(table) WHERE id = ?",
                insertRow: "INSERT INTO \(table) (id\(columns.isEmpty ? "" : ", " + columns)) VALUES (\(Array(repeating: "?", count: e.fields.count + 1).joined(separator: ", ")))",
                exists: "SELECT 1 FROM \(table) WHERE id = ?",
                insertCompact: "\(compactHead) SELECT \(compactValues) WHERE NOT EXISTS (SELECT 1 FROM _chronicle_records WHERE entity = ? AND id = ?)",
                insertCompactFresh: "\(compactHead) VALUES (\(compactValues))",
                selectCompact: "SELECT \(columns.isEmpty ? "" : columns + ", ")\(CompactState.column) FROM \(table) WHERE id = ? AND \(CompactState.column) IS NOT NULL",
                clearCompact: "UPDATE \(table) SET \(CompactState.column) = NULL WHERE id = ? AND \(CompactState.column) IS NOT NULL",
                insertRowCompact: "INSERT INTO \(table) (id, \(columns.isEmpty ? "" : columns + ", ")\(CompactState.column)) VALUES (\(compactValues))",
                largestRowID: "SELECT max(id) FROM \(table)",
                compactKeyGroup: e.uniqueConstraints.map { key in
                    "SELECT id FROM \(table) WHERE \(key.map { "\(quoted($0)) = ?" }.joined(separator: " AND ")) AND \(CompactState.column) IS NOT NULL"
                },
                clashing: e.uniqueConstraints.map { key in
                    "SELECT id FROM \(table) WHERE \(key.map { "\(quoted($0)) = ?" }.joined(separator: " AND ")) AND id != ?"
                },
                constraintFields: e.uniqueConstraints.map { key in key.map { e.fieldIndex(named: $0)! } },
                compactReferrers: schema.entities.enumerated().flatMap { index, other in
                    other.fields.compactMap { field -> (entity: Int, sql: String)? in
                        guard case .reference(let destination, _) = field.kind, destination == e.name else { return nil }
                        return (index, "SELECT id FROM \(quoted(SnapshotTables.rows(other.name))) WHERE \(quoted(field.name)) = ? AND \(CompactState.column) IS NOT NULL")
                    }
                },
                isReferenced: referenced,
                isIndependent: !referenced && e.uniqueConstraints.isEmpty
                    && !e.fields.contains { if case .reference = $0.kind { true } else { false } })
        }
    }
}
