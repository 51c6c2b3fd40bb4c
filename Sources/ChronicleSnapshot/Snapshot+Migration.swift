import ChronicleCore
import Foundation
import GRDB

/// Bringing a snapshot written under an earlier version of its schema to
/// the app's version: in place, in one SQLite transaction, with a copy of
/// the file kept beside it until the transaction commits. See
/// `docs/schema-evolution.md`.
///
/// Every record's merge state is read under the earlier version, its
/// fields renumbered for the later one (a renamed field keeps its values
/// and versions; a field the later version adds has none, so the record
/// reads its default), and applied to freshly made tables as a baseline
/// is: rows, unique keys, references and de-duplication come out exactly
/// as on a device that replayed the same logs under the later version.
/// Pending saves in the outbox are rewritten in the later version's
/// names, so they upload as its logs.
extension Snapshot {
    /// The file kept while a snapshot migrates.
    package static func migrationCopyPath(_ path: String, from version: Int) -> String {
        path + ".schema-v\(version).backup"
    }

    /// The schema the snapshot's tables were made for, and its earlier
    /// versions the snapshot migrated from, as recorded in the file; nil
    /// for a new file.
    static func storedSchemas(_ db: Database, path: String) throws -> (current: Schema, earlier: [Schema])? {
        guard try db.tableExists("_chronicle_identity") else { return nil }
        let values = Dictionary(try Row.fetchAll(db, sql: "SELECT key, value FROM _chronicle_identity")
            .map { ($0[0] as String, $0[1] as DatabaseValue) }, uniquingKeysWith: { a, _ in a })
        guard let json = values["schema"].flatMap(String.fromDatabaseValue),
              let hash = values["schema_hash"].flatMap(String.fromDatabaseValue)
        else {
            throw ChronicleError(.databaseCorrupt, "snapshot \(path) does not record its schema")
        }
        let current: Schema
        do {
            current = try Schema(json: Data(json.utf8))
        } catch {
            throw ChronicleError(.databaseCorrupt, "snapshot \(path) records a schema that does not read: \(error.message)", underlying: error)
        }
        guard current.hashString == hash else {
            throw ChronicleError(.databaseCorrupt, "snapshot \(path) records schema \(hash), but its schema text hashes to \(current.hashString)")
        }
        var earlier: [Schema] = []
        if try db.tableExists("_chronicle_schemas") {
            for row in try Row.fetchAll(db, sql: "SELECT hash, json FROM _chronicle_schemas ORDER BY version") {
                // An earlier version that no longer reads only costs its
                // logs their translation: they wait as a newer one's would.
                if let s = try? Schema(json: Data((row[1] as String).utf8)), s.hashString == (row[0] as String) {
                    earlier.append(s)
                }
            }
        }
        return (current, earlier)
    }

    /// Migrates the tables, states and outbox of `migration.source` to
    /// `migration.target`, inside the caller's transaction.
    static func migrate(_ db: Database, _ migration: SchemaMigration) throws {
        let source = migration.source, target = migration.target
        let sourceSQL = EntitySQL.make(source)
        // 1. Every state, renumbered, into a temporary table.
        try db.execute(sql: """
            CREATE TEMP TABLE _chronicle_migrating (
                entity INTEGER NOT NULL, id BLOB NOT NULL, state BLOB NOT NULL, PRIMARY KEY (entity, id)
            ) WITHOUT ROWID
            """)
        defer { try? db.execute(sql: "DROP TABLE IF EXISTS temp._chronicle_migrating") }
        let engine = MergeEngine(db: db, schema: source, sql: sourceSQL, origin: .imported)
        for (o, entity) in source.entities.enumerated() {
            guard let n = migration.entityMap[o] else { continue }
            let table = quoted(SnapshotTables.rows(entity.name))
            let ids = try RecordID.fetchAll(db, sql: """
                SELECT id FROM _chronicle_records WHERE entity = ?
                UNION SELECT id FROM \(table) WHERE \(CompactState.column) IS NOT NULL
                """, arguments: [o])
            for id in ids {
                guard let state = try engine.loadState(o, id) else { continue }
                var moved = RecordState()
                moved.inserted = state.inserted
                moved.deleteVersion = state.deleteVersion
                for entry in state.fields.entries {
                    guard let nf = migration.fieldMap[o][entry.index] else { continue }
                    do {
                        moved.fields[nf] = (try migration.convert(entry.value, entity: n, field: nf), entry.version)
                    } catch {
                        throw ChronicleError(.unsupportedMigration, "migrating \(entity.name) record \(id): \(error.message)", underlying: error)
                    }
                }
                try db.execute(sql: "INSERT INTO temp._chronicle_migrating (entity, id, state) VALUES (?, ?, ?)",
                               arguments: [n, id, Data(moved.encoded())])
            }
        }
        // 2. The earlier version's tables go; the later version's come.
        for entity in source.entities {
            try db.execute(sql: "DROP VIEW IF EXISTS \(quoted(entity.name))")
            try db.execute(sql: "DROP TABLE \(quoted(SnapshotTables.rows(entity.name)))")
        }
        try db.execute(sql: "DELETE FROM _chronicle_records; DELETE FROM _chronicle_keys; DELETE FROM _chronicle_refs")
        for entity in target.entities { try SnapshotTables.createEntity(db, entity) }
        // 3. The states applied as a baseline's would be.
        let targetSQL = EntitySQL.make(target)
        var after: (entity: Int, id: RecordID)?
        let batch = 50_000
        while true {
            let rows = try Row.fetchAll(db, sql: """
                SELECT entity, id, state FROM temp._chronicle_migrating
                WHERE (entity, id) > (?, ?) ORDER BY entity, id LIMIT \(batch)
                """, arguments: [after?.entity ?? -1, after?.id ?? RecordID(high: 0, low: 0)])
            guard !rows.isEmpty else { break }
            var merging = MergeEngine(db: db, schema: target, sql: targetSQL, origin: .imported)
            for row in rows {
                let entity: Int = row[0], id: RecordID = row[1]
                let bytes: Data = row[2]
                try merging.merge(try RecordState(encoded: Array(bytes)), entity: entity, id: id)
                after = (entity, id)
            }
            try merging.settle()
        }
        // 4. Saves not grouped into a log yet are rewritten in the later
        // version's names and upload as its logs. Those in a log (uploaded,
        // or planned, whose bytes must not change) and the saves of earlier
        // IDs this device keeps to put their logs back stay as they were,
        // with the earlier version's hash: a log put back is the log that
        // was there, and readers translate it.
        guard let storeText = try String.fetchOne(db, sql: "SELECT value FROM _chronicle_identity WHERE key = 'store'"),
              let storeID = StoreID(string: storeText),
              let deviceText = try String.fetchOne(db, sql: "SELECT value FROM _chronicle_identity WHERE key = 'device'"),
              let deviceID = DeviceID(string: deviceText)
        else { throw ChronicleError(.databaseCorrupt, "the snapshot's identity does not read") }
        let decoder = LogDecoder(schema: target, limits: DecodingLimits(maxBodyBytes: .max), earlier: [migration])
        for row in try Row.fetchAll(db, sql: "SELECT sequence, clock, body FROM _chronicle_outbox WHERE log_first IS NULL AND schema_hash IS NULL") {
            let sequence: Int64 = row[0], clock: Int64 = row[1], body: Data = row[2]
            let encoded = LogEncoder.EncodedTransaction(sequence: UInt64(sequence), clock: HybridTimestamp(rawValue: UInt64(bitPattern: clock)),
                                                        body: Array(body))
            let bytes = try LogEncoder(storeID: storeID, compresses: false).encode(bodies: [encoded], device: deviceID, schemaHash: source.hash)
            guard let t = try decoder.open(bytes).transactions().first else {
                throw ChronicleError(.databaseCorrupt, "pending save \(sequence) reads as no transaction")
            }
            try db.execute(sql: "UPDATE _chronicle_outbox SET body = ? WHERE sequence = ?", arguments: [Data(LogEncoder.body(of: t)), sequence])
        }
        let earlierHash = Int64(bitPattern: source.hash)
        try db.execute(sql: "UPDATE _chronicle_outbox SET schema_hash = ? WHERE schema_hash IS NULL AND log_first IS NOT NULL", arguments: [earlierHash])
        if try db.tableExists("_chronicle_inherited") {
            try db.execute(sql: "UPDATE _chronicle_inherited SET schema_hash = ? WHERE schema_hash IS NULL", arguments: [earlierHash])
        }
        // 5. The identity names the later version; the earlier one is kept
        // to read its logs.
        try keep(source, db)
        try db.execute(sql: "UPDATE _chronicle_identity SET value = ? WHERE key = 'schema_hash'", arguments: [target.hashString])
        try db.execute(sql: "UPDATE _chronicle_identity SET value = ? WHERE key = 'schema'", arguments: [try Self.json(target)])
        // Logs held for a schema this device did not know are tried again.
        try db.execute(sql: "DELETE FROM _chronicle_failures WHERE code = ?", arguments: [ChronicleError.Code.schemaMismatch.name])
    }

    /// Keeps an earlier version of the schema in the snapshot, to read its
    /// logs after the next open too.
    static func keep(_ earlier: Schema, _ db: Database) throws {
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS _chronicle_schemas (hash TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, json TEXT NOT NULL) WITHOUT ROWID")
        try db.execute(sql: "INSERT OR IGNORE INTO _chronicle_schemas (hash, version, json) VALUES (?, ?, ?)",
                       arguments: [earlier.hashString, earlier.version, try json(earlier)])
    }

    /// A schema's JSON text as the identity table keeps it.
    static func json(_ schema: Schema) throws -> String {
        String(decoding: try JSONEncoder.sorted.encode(schema.jsonValue), as: UTF8.self)
    }
}
