import ChronicleCore
import GRDB

/// The tables of a snapshot: one per entity (what apps query), and
/// Chronicle's own, all prefixed `_chronicle_` (entity names start with a
/// letter, so they cannot collide). See `docs/architecture.md`.
enum SnapshotTables {
    /// Brings a snapshot of an older format up to ``Snapshot/format``.
    static func migrate(_ db: Database, schema: Schema, from format: Int) throws {
        if format < 3 {
            // Format 3 adds the compact-state column; every existing state
            // stays in `_chronicle_records`, which format 3 still reads.
            for entity in schema.entities {
                try db.execute(sql: "ALTER TABLE \(quoted(entity.name)) ADD COLUMN \(CompactState.column) BLOB")
            }
        }
    }

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
            CREATE TABLE _chronicle_outbox (
                sequence INTEGER PRIMARY KEY NOT NULL, clock INTEGER NOT NULL, body BLOB NOT NULL,
                log_first INTEGER, log_last INTEGER, uploaded INTEGER NOT NULL DEFAULT 0
            );
            CREATE TABLE _chronicle_ledger (
                name TEXT PRIMARY KEY NOT NULL, device BLOB NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
                bytes INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE _chronicle_failures (
                name TEXT PRIMARY KEY NOT NULL, code TEXT NOT NULL, message TEXT NOT NULL, attempts INTEGER NOT NULL
            ) WITHOUT ROWID;
            """)
        for entity in schema.entities {
            var columns = ["id BLOB PRIMARY KEY NOT NULL"]
            for field in entity.fields {
                columns.append("\(quoted(field.name)) \(field.kind.sqlType)")
            }
            columns.append("\(CompactState.column) BLOB")
            try db.execute(sql: "CREATE TABLE \(quoted(entity.name)) (\(columns.joined(separator: ", ")))")
            for field in entity.fields {
                if case .reference = field.kind {
                    try db.execute(sql: "CREATE INDEX \(quoted("\(entity.name)_\(field.name)_ref")) ON \(quoted(entity.name)) (\(quoted(field.name)))")
                }
            }
            for (i, key) in entity.uniqueConstraints.enumerated() {
                // Unique among visible records: dedupe guarantees it, the index enforces it.
                try db.execute(sql: "CREATE UNIQUE INDEX \(quoted("\(entity.name)_unique_\(i)")) ON \(quoted(entity.name)) (\(key.map(quoted).joined(separator: ", ")))")
            }
        }
    }
}
