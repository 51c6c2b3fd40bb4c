import ChronicleCore
import GRDB

/// The tables of a snapshot: per entity, a table of its rows
/// (`_chronicle_rows_<name>`) and a view named after it that apps query;
/// and Chronicle's own tables. Everything but the views is prefixed
/// `_chronicle_` (entity names start with a letter, so they cannot
/// collide). See `docs/architecture.md`.
package enum SnapshotTables {
    /// The table that holds an entity's rows and their compact states.
    /// Apps read the view named after the entity, which shows `id` and the
    /// fields only (see `docs/architecture.md`).
    package static func rows(_ entity: String) -> String { rowsPrefix + entity }

    private static let rowsPrefix = "_chronicle_rows_"

    /// The entity whose rows `table` holds, if it is such a table.
    package static func entity(ofRowsTable table: String) -> String? {
        table.hasPrefix(rowsPrefix) ? String(table.dropFirst(rowsPrefix.count)) : nil
    }

    /// Brings a snapshot of an older format up to ``Snapshot/format``.
    /// Returns the indices of the entities whose rows must be recomputed
    /// from their states: those whose unique keys include a date, whose
    /// stored keys format 5 changes.
    static func migrate(_ db: Database, schema: Schema, from format: Int) throws -> [Int] {
        // Format 8 numbers the devices of compact versions; the 24-byte
        // versions of older snapshots stay as they are, and readable.
        try db.execute(sql: DeviceNumbers.createTable)
        if format < 3 {
            // Format 3 adds the compact-state column; every existing state
            // stays in `_chronicle_records`, which format 3 still reads.
            for entity in schema.entities {
                let table = try db.tableExists(rows(entity.name)) ? rows(entity.name) : entity.name
                try db.execute(sql: "ALTER TABLE \(quoted(table)) ADD COLUMN \(CompactState.column) BLOB")
            }
        }
        var recompute: [Int] = []
        if format < 5 {
            // Format 5 moves each entity's rows into `_chronicle_rows_<name>`
            // behind a view without Chronicle's column, and stores dates as
            // seconds since 1970 (see `Value.databaseValue`).
            db.add(function: legacyDate)
            defer { db.remove(function: legacyDate) }
            for (index, entity) in schema.entities.enumerated() where !(try db.tableExists(rows(entity.name))) {
                try createTable(db, entity)
                let columns = entity.fields.map { quoted($0.name) }
                let converted = entity.fields.map { field in
                    if case .attribute(.date) = field.kind { return "\(legacyDate.name)(\(quoted(field.name)))" }
                    return quoted(field.name)
                }
                try db.execute(sql: """
                    INSERT INTO \(quoted(rows(entity.name))) (\((["id"] + columns + [CompactState.column]).joined(separator: ", ")))
                    SELECT \((["id"] + converted + [CompactState.column]).joined(separator: ", ")) FROM \(quoted(entity.name))
                    """)
                try db.execute(sql: "DROP TABLE \(quoted(entity.name))")
                try createIndexesAndView(db, entity)
                let dateKey = entity.uniqueConstraints.joined().contains { name in
                    if case .attribute(.date)? = entity.field(named: name)?.kind { return true } else { return false }
                }
                if dateKey { recompute.append(index) }
            }
        }
        if format < 6 {
            // Format 6: a visible record shows the newer values of the
            // duplicates merged into it (`MergeEngine`).
            for (index, entity) in schema.entities.enumerated() where !entity.uniqueConstraints.isEmpty && !recompute.contains(index) {
                recompute.append(index)
            }
        }
        return recompute
    }

    /// Converts a format 4 date column (integer microseconds) to format 5.
    private static let legacyDate = DatabaseFunction("_chronicle_format4_date", argumentCount: 1, pure: true) { values in
        switch values[0].storage {
        case .int64(let micros): return Value.date(Timestamp(microsecondsSinceEpoch: micros)).databaseValue
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18:
            return Value.date(Timestamp(microsecondsSinceEpoch: Int64(d))).databaseValue
        default: return values[0]
        }
    }

    /// The stored keys of a record are read and replaced at each of its
    /// changes: without this index, each is a scan of every key of the
    /// entity, and saving or importing n records with unique keys takes
    /// time in n². Older snapshots get it when they are opened.
    static let keysByRecordIndex = "CREATE INDEX IF NOT EXISTS _chronicle_keys_by_record ON _chronicle_keys (entity, id)"
    /// The saves not uploaded yet, in sequence order: what every upload
    /// asks for. Partial, so its size is the pending saves', and the
    /// queries for them do not scan a long history of uploaded ones.
    static let outboxPendingIndex = "CREATE INDEX IF NOT EXISTS _chronicle_outbox_pending ON _chronicle_outbox (sequence) WHERE uploaded = 0"
    /// The applied logs of a device by their last sequence: which log a
    /// compaction marker's sequence came from is read at every sync that
    /// sees the marker (`Snapshot.transactionClocks(at:)`), and without it
    /// that is a scan of every log ever applied.
    static let ledgerByDeviceIndex = "CREATE INDEX IF NOT EXISTS _chronicle_ledger_by_device ON _chronicle_ledger (device, last)"

    static func create(_ db: Database, schema: Schema) throws {
        try db.execute(sql: """
            CREATE TABLE _chronicle_identity (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
            CREATE TABLE _chronicle_vector (
                device BLOB PRIMARY KEY NOT NULL, sequence INTEGER NOT NULL, clock INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE _chronicle_records (
                entity INTEGER NOT NULL, id BLOB NOT NULL, state BLOB NOT NULL, PRIMARY KEY (entity, id)
            ) WITHOUT ROWID;
            CREATE TABLE _chronicle_refs (
                target BLOB NOT NULL, entity INTEGER NOT NULL, id BLOB NOT NULL, PRIMARY KEY (target, entity, id)
            ) WITHOUT ROWID;
            CREATE TABLE _chronicle_keys (
                entity INTEGER NOT NULL, constraint_index INTEGER NOT NULL, key BLOB NOT NULL, id BLOB NOT NULL,
                PRIMARY KEY (entity, constraint_index, key, id)
            ) WITHOUT ROWID;
            \(keysByRecordIndex);
            CREATE TABLE _chronicle_outbox (
                sequence INTEGER PRIMARY KEY NOT NULL, clock INTEGER NOT NULL, body BLOB NOT NULL,
                log_first INTEGER, log_last INTEGER, uploaded INTEGER NOT NULL DEFAULT 0, schema_hash INTEGER, uploaded_at INTEGER
            );
            \(outboxPendingIndex);
            CREATE TABLE _chronicle_ledger (
                name TEXT PRIMARY KEY NOT NULL, device BLOB NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
                bytes INTEGER NOT NULL, checksum INTEGER
            ) WITHOUT ROWID;
            \(ledgerByDeviceIndex);
            CREATE TABLE _chronicle_failures (
                name TEXT PRIMARY KEY NOT NULL, code TEXT NOT NULL, message TEXT NOT NULL, attempts INTEGER NOT NULL
            ) WITHOUT ROWID;
            \(DeviceNumbers.createTable);
            """)
        for entity in schema.entities { try createEntity(db, entity) }
    }

    /// An entity's rows table, its indexes and its view.
    static func createEntity(_ db: Database, _ entity: Entity) throws {
        try createTable(db, entity)
        try createIndexesAndView(db, entity)
    }

    private static func createTable(_ db: Database, _ entity: Entity) throws {
        var columns = ["id BLOB PRIMARY KEY NOT NULL"]
        for field in entity.fields {
            columns.append("\(quoted(field.name)) \(field.kind.sqlType)")
        }
        columns.append("\(CompactState.column) BLOB")
        try db.execute(sql: "CREATE TABLE \(quoted(rows(entity.name))) (\(columns.joined(separator: ", ")))")
    }

    /// The indexes of an entity's rows, and the view apps read.
    private static func createIndexesAndView(_ db: Database, _ entity: Entity) throws {
        let table = quoted(rows(entity.name))
        for field in entity.fields {
            if case .reference = field.kind {
                try db.execute(sql: "CREATE INDEX \(quoted("\(entity.name)_\(field.name)_ref")) ON \(table) (\(quoted(field.name)))")
            }
        }
        for (i, key) in entity.uniqueConstraints.enumerated() {
            // Unique among visible records: dedupe guarantees it, the index enforces it.
            try db.execute(sql: "CREATE UNIQUE INDEX \(quoted("\(entity.name)_unique_\(i)")) ON \(table) (\(key.map(quoted).joined(separator: ", ")))")
        }
        for (i, fields) in entity.indexes.enumerated() {
            try db.execute(sql: "CREATE INDEX \(quoted("\(entity.name)_index_\(i)")) ON \(table) (\(fields.map(quoted).joined(separator: ", ")))")
        }
        let columns = (["id"] + entity.fields.map { quoted($0.name) }).joined(separator: ", ")
        try db.execute(sql: "CREATE VIEW \(quoted(entity.name)) AS SELECT \(columns) FROM \(table)")
    }
}

/// Tells GRDB that each entity's view is keyed by `id`, so records typed
/// on it can be fetched by ID (`Note.find(db, id:)`) as on a table.
struct EntityViewKeys: DatabaseSchemaSource {
    /// The entity names, lowercased (SQLite names ignore case).
    let entities: Set<String>

    init(_ schema: Schema) {
        entities = Set(schema.entities.map { $0.name.lowercased() })
    }

    func columnsForPrimaryKey(_ db: Database, inView view: DatabaseObjectID) throws -> [String]? {
        entities.contains(view.name.lowercased()) ? ["id"] : nil
    }
}
