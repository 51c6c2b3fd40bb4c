import ChronicleCore
import Foundation
import GRDB

extension Snapshot {
    /// A hash of everything the app can see: every entity table, rows in ID
    /// order, every column in its canonical encoding. Equal hashes mean equal
    /// visible state, whatever order logs were applied in; Chronicle's own
    /// metadata is not included.
    package func stateHash() throws -> String {
        try pool.read { db in try Self.stateHash(db, schema: schema) }
    }

    package static func stateHash(_ db: Database, schema: Schema) throws -> String {
        var hash: UInt64 = 0x6368_726F_6E69_636C  // "chronicl"
        for entity in schema.entities.sorted(by: { $0.name < $1.name }) {
            var header = ByteWriter()
            header.writeString(entity.name)
            hash = header.withUnsafeBytes { XXH64.hash($0, seed: hash) }
            let columns = (["id"] + entity.fields.map { quoted($0.name) }).joined(separator: ", ")
            let cursor = try Row.fetchCursor(db, sql: "SELECT \(columns) FROM \(quoted(entity.name)) ORDER BY id")
            while let row = try cursor.next() {
                var w = ByteWriter(capacity: 128)
                w.writeRecordID(row[0] as RecordID)
                for (i, field) in entity.fields.enumerated() {
                    w.writeValue(try Value(databaseValue: row[i + 1], field: field))
                }
                hash = w.withUnsafeBytes { XXH64.hash($0, seed: hash) }
            }
        }
        return hash.paddedHex
    }

    /// The number of visible records per entity.
    package func recordCounts() throws -> [String: Int] {
        try pool.read { db in try Self.recordCounts(db, schema: schema) }
    }

    /// The number of visible records per entity of `schema` in `db`.
    package static func recordCounts(_ db: Database, schema: Schema) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for e in schema.entities {
            counts[e.name] = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(quoted(e.name))") ?? 0
        }
        return counts
    }
}
