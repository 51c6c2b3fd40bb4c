import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// A store's visible state as portable JSON, and back: every record of
/// every entity, with its ID and values, in a form another program or
/// platform reads without Chronicle (see `docs/portable-json.md`, which
/// holds its JSON Schema). Dates are exact seconds since 1970, binary
/// data base64 with a MIME type, decimals strings, and doubles carry their
/// IEEE-754 64-bit image beside the number, so NaN payloads, infinities
/// and -0.0 come back bit for bit.
///
/// ```swift
/// let json = try await PortableExport.export(store)
/// let report = try await PortableExport.restore(json, into: emptyStore)
/// // report.stateHash == report.exportedStateHash
/// ```
public enum PortableExport {
    /// The document's `format`.
    public static let format = "chronicle-export"
    /// The document's `version`, this build's.
    public static let version = 1

    /// What ``restore(_:into:)`` did.
    public struct Report: Sendable, Hashable {
        /// Records the store lacked, inserted with their IDs.
        public var inserted = 0
        /// Records the store held with other values, set to the export's.
        public var updated = 0
        /// Records the store already held with the export's values.
        public var unchanged = 0
        /// Records the store holds that the export does not (kept as they are).
        public var notInExport = 0
        /// Records of the export the store holds merged into another record
        /// of the same unique key (two devices made it apart): that record
        /// stands for them, and references to them show it.
        public var mergedIntoOthers = 0
        /// The state hash the export recorded.
        public var exportedStateHash: String
        /// The store's state hash after the restore: the export's when the
        /// store held nothing the export does not.
        public var stateHash: String
    }

    /// The visible state of `store` as a portable JSON document: its
    /// store ID, schema, state hash and every record, by entity, ordered
    /// by ID (pretty-printed, keys sorted, so equal states give equal bytes).
    public static func export(_ store: Store) async throws -> Data {
        let schema = store.configuration.schema
        let (records, hash) = try await store.read { db -> ([String: JSONValue], String) in
            var records: [String: JSONValue] = [:]
            for entity in schema.entities {
                let columns = (["id"] + entity.fields.map { $0.name.quotedDatabaseIdentifier }).joined(separator: ", ")
                var rows: [JSONValue] = []
                let cursor = try Row.fetchCursor(db, sql: "SELECT \(columns) FROM \(entity.name.quotedDatabaseIdentifier) ORDER BY id")
                while let row = try cursor.next() {
                    var values: [String: JSONValue] = [:]
                    for (i, field) in entity.fields.enumerated() {
                        let value = try Value(databaseValue: row[i + 1], field: field)
                        if !value.isNull { values[field.name] = value.portableJSON }
                    }
                    rows.append(.object(["id": .string((row[0] as RecordID).description), "values": .object(values)]))
                }
                records[entity.name] = .array(rows)
            }
            return (records, try Snapshot.stateHash(db, schema: schema))
        }
        let document: JSONValue = .object([
            "format": .string(format), "version": .int(Int64(version)), "store": .string(store.storeID.description),
            "schema": schema.jsonValue, "schemaHash": .string(schema.hashString), "stateHash": .string(hash), "records": .object(records),
        ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(document)
        } catch {
            throw ChronicleError(.io, "cannot write the export as JSON: \(error)", underlying: error)
        }
    }

    /// Writes the records of an export into `store`, in one transaction
    /// (one log: all of it or nothing): a record the store lacks is
    /// inserted with its ID, one it holds with other values gets the
    /// export's (fields the export leaves out become null), and records the
    /// export does not hold stay as they are. Into an empty store of the
    /// same schema, the store's state hash becomes the export's.
    ///
    /// - Throws: ``ChronicleError/Code/malformedBody`` for a document that is
    ///   not an export (naming where); ``ChronicleError/Code/unsupportedVersion``
    ///   for a later format version; ``ChronicleError/Code/schemaMismatch``
    ///   when its schema is not the store's; ``ChronicleError/Code/typeMismatch``
    ///   for a value not of its field's type; what the save throws (a unique
    ///   key another record holds, say): then nothing is written.
    public static func restore(_ data: Data, into store: Store) async throws -> Report {
        let schema = store.configuration.schema
        let root = try documentRoot(data, format: format, version: version, what: "export")
        guard case .string(let hash)? = root["schemaHash"] else {
            throw ChronicleError(.malformedBody, "the export has no \"schemaHash\" (the hash of the schema it was made with)")
        }
        guard hash == schema.hashString else {
            throw ChronicleError(.schemaMismatch, "the export was made with schema \(hash.prefix(40)), this store's is \(schema.hashString) (version \(schema.version)): restore it into a store of the same schema")
        }
        guard case .string(let exportedHash)? = root["stateHash"] else { throw ChronicleError(.malformedBody, "the export has no \"stateHash\"") }
        guard case .object(let byEntity)? = root["records"] else { throw ChronicleError(.malformedBody, "the export has no \"records\" object") }

        var wanted: [(entity: Entity, id: RecordID, values: [String: Value])] = []
        var seen: Set<String> = []
        for (name, list) in byEntity.sorted(by: { $0.key < $1.key }) {
            guard let entity = schema.entity(named: name) else { throw ChronicleError(.unknownEntity, "records.\(name): no such entity in the schema") }
            guard case .array(let rows) = list else { throw ChronicleError(.malformedBody, "records.\(name): expected an array") }
            for (i, row) in rows.enumerated() {
                let path = "records.\(name)[\(i)]"
                guard case .object(let o) = row, case .string(let idText)? = o["id"], let id = RecordID(string: idText) else {
                    throw ChronicleError(.malformedBody, "\(path): expected {\"id\": a record ID, \"values\": {…}}")
                }
                guard seen.insert("\(name)/\(id)").inserted else {
                    throw ChronicleError(.malformedBody, "\(path).id: \(name) \(id) appears twice in the export")
                }
                var values: [String: Value] = [:]
                if case .object(let given)? = o["values"] {
                    for key in given.keys where entity.field(named: key) == nil {
                        throw ChronicleError(.unknownAttribute, "\(path).values.\(key): no such field in \(name)")
                    }
                    for field in entity.fields {
                        values[field.name] = try Value(portableJSON: given[field.name] ?? .null, for: field, path: "\(path).values.\(field.name)")
                    }
                } else if o["values"] != nil {
                    throw ChronicleError(.malformedBody, "\(path).values: expected an object")
                }
                wanted.append((entity, id, values))
            }
        }

        // What the store holds now, to insert, update or leave each record.
        let present = try await store.read { db -> [String: [RecordID: [String: Value]]] in
            var present: [String: [RecordID: [String: Value]]] = [:]
            for entity in schema.entities {
                let columns = (["id"] + entity.fields.map { $0.name.quotedDatabaseIdentifier }).joined(separator: ", ")
                let cursor = try Row.fetchCursor(db, sql: "SELECT \(columns) FROM \(entity.name.quotedDatabaseIdentifier)")
                while let row = try cursor.next() {
                    var values: [String: Value] = [:]
                    for (i, field) in entity.fields.enumerated() { values[field.name] = try Value(databaseValue: row[i + 1], field: field) }
                    present[entity.name, default: [:]][row[0] as RecordID] = values
                }
            }
            return present
        }
        var report = Report(exportedStateHash: exportedHash, stateHash: "")
        var inserts: [(String, RecordID, [String: Value])] = []
        var updates: [(String, RecordID, [String: Value])] = []
        for (entity, id, values) in wanted {
            if let held = present[entity.name]?[id] {
                // Compared by their stored bytes' meaning: NaN payloads and -0.0 count.
                let differing = values.filter { !Self.same($0.value, held[$0.key] ?? .null) }
                if differing.isEmpty { report.unchanged += 1 } else { updates.append((entity.name, id, differing)); report.updated += 1 }
            } else {
                inserts.append((entity.name, id, values.filter { !$0.value.isNull }))
                report.inserted += 1
            }
        }
        // A record the store holds merged into another of the same unique key
        // is there already, as that record: it is not inserted again.
        let merged = try store.snapshot.survivors(of: Set(inserts.map(\.1)))
        if !merged.isEmpty {
            inserts.removeAll { merged[$0.1] != nil }
            report.inserted -= merged.count
            report.mergedIntoOthers = merged.count
        }
        let exported = Set(wanted.map { "\($0.entity.name)/\($0.id)" })
        report.notInExport = present.reduce(0) { sum, entry in sum + entry.value.keys.filter { !exported.contains("\(entry.key)/\($0)") }.count }
        if !inserts.isEmpty || !updates.isEmpty {
            let (toInsert, toUpdate) = (inserts, updates)
            do {
                _ = try await store.write { tx in
                    for (entity, id, values) in toInsert { _ = tx.insert(entity, values, id: id) }
                    for (entity, id, values) in toUpdate { tx.update(entity, id: id, values) }
                }
            } catch let error as ChronicleError where error.code == .recordExists {
                throw ChronicleError(.recordExists, "\(error.message): this store deleted it, and a deleted record's ID is never used again, so the export cannot bring it back here; nothing was written. Restore the export into a new store (a new device folder on a new container) to get it back",
                                     underlying: error)
            }
        }
        report.stateHash = try await store.stateHash()
        return report
    }

    /// The top-level object of a portable document, once its `format` is
    /// `format` and its `version` one this build reads (1 to `version`).
    static func documentRoot(_ data: Data, format: String, version: Int, what: String) throws(ChronicleError) -> [String: JSONValue] {
        let document = try JSONValue(parsing: data)
        guard case .object(let root) = document else { throw ChronicleError(.malformedBody, "a Chronicle \(what) is a JSON object, not \(document.kindName)") }
        guard case .string(format)? = root["format"] else {
            throw ChronicleError(.malformedBody, "not a Chronicle \(what): its \"format\" is not \"\(format)\"")
        }
        guard case .int(let v)? = root["version"] else { throw ChronicleError(.malformedBody, "the \(what) has no \"version\" number") }
        guard v <= version, v >= 1 else {
            throw ChronicleError(.unsupportedVersion, "the \(what) is format version \(v); this build reads version \(version)")
        }
        return root
    }

    /// Whether two values are the same, doubles by their bits.
    private static func same(_ a: Value, _ b: Value) -> Bool {
        if case .double(let x) = a, case .double(let y) = b { return x.bitPattern == y.bitPattern }
        return a == b
    }
}
