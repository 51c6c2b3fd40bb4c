import CSQLite
import ChronicleCore
import Foundation
import GRDB

/// Reads every record state a snapshot holds, in a fixed order
/// (`_chronicle_records` by entity and ID, then each entity's compact rows
/// by ID), a page of rows per query, resuming where the last call stopped:
/// a baseline export and a comparison of two snapshots read a store of any
/// size in bounded memory.
struct RecordStateScan {
    let schema: Schema
    /// 0 for `_chronicle_records`, then each entity's compact rows (its index + 1).
    private var phase = 0
    private var cursor: (entity: Int, id: RecordID)?
    /// Whether every state was read.
    private(set) var finished = false
    /// Rows read per query.
    static let page = 1024

    init(schema: Schema) {
        self.schema = schema
    }

    /// Hands `visit` each state after the cursor (its entity's index, its
    /// ID, its state) until `visit` returns false, which stops the scan after
    /// that state, or none are left (``finished``).
    ///
    /// - Throws: ``ChronicleError/Code/databaseCorrupt`` for a row that names
    ///   no entity of the schema or has no valid ID; `visit`'s errors;
    ///   SQLite's.
    mutating func read(_ db: Database, _ visit: (Int, RecordID, RecordState) throws -> Bool) throws {
        let devices = DeviceNumbers(db)
        while !finished {
            var read = 0
            if phase == 0 {
                let after = cursor ?? (-1, RecordID(high: 0, low: 0))
                let rows = try Row.fetchCursor(db, sql: """
                    SELECT entity, id, state FROM _chronicle_records WHERE (entity, id) > (?, ?) ORDER BY entity, id LIMIT \(Self.page)
                    """, arguments: [after.entity, after.id])
                while let row = try rows.next() {
                    read += 1
                    let entity: Int = row[0]
                    guard entity >= 0, entity < schema.entities.count else {
                        throw ChronicleError(.databaseCorrupt, "_chronicle_records names entity \(entity); the schema has \(schema.entities.count)")
                    }
                    let id: RecordID = row[1]
                    cursor = (entity, id)
                    if try !visit(entity, id, try RecordState(encoded: [UInt8](row[2] as Data))) { return }
                }
            } else {
                let index = phase - 1
                let entity = schema.entities[index]
                let columns = entity.fields.map { quoted($0.name) + ", " }.joined()
                let statement = try db.cachedStatement(sql: """
                    SELECT \(columns)\(CompactState.column), id FROM \(quoted(SnapshotTables.rows(entity.name)))
                    WHERE \(CompactState.column) IS NOT NULL AND id > ? ORDER BY id LIMIT \(Self.page)
                    """).sqliteStatement
                sqlite3_reset(statement)
                var binder = RawBinder(statement)
                binder.bind(cursor?.id ?? RecordID(high: 0, low: 0))
                defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
                while true {
                    let code = sqlite3_step(statement)
                    if code == SQLITE_DONE { break }
                    guard code == SQLITE_ROW else {
                        throw ChronicleError.sqlite(db.rawError(code, statement), .database, "reading \(entity.name) failed")
                    }
                    read += 1
                    let idBytes = columnBytes(statement, Int32(entity.fields.count + 1))
                    guard idBytes.count == 16 else { throw ChronicleError(.databaseCorrupt, "\(entity.name) has a row whose ID is \(idBytes.count) bytes") }
                    let id = idBytes.withUnsafeBytes { RecordID(bytes: $0) }
                    cursor = (index, id)
                    if try !visit(index, id, try CompactState.read(statement, entity, devices: devices)) { return }
                }
            }
            if read < Self.page {
                phase += 1
                cursor = nil
                if phase > schema.entities.count { finished = true }
            }
        }
    }
}
