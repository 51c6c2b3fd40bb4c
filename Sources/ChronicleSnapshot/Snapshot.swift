import ChronicleCore
import Foundation
import GRDB
import Synchronization

/// A device's SQLite snapshot of one store: one table per entity, which apps
/// query, plus Chronicle's metadata tables, in one WAL-mode database file.
///
/// All writes go through ``save(_:physicalMilliseconds:)`` (local changes) and
/// ``apply(_:name:)`` (imported logs); each runs as one SQLite transaction, so
/// a save and its outbox entry, or a log and the sequence vector, are
/// committed together or not at all. Readers get read-only connections.
@usableFromInline package final class Snapshot: Sendable {
    /// The database file.
    package let path: String
    /// The schema the tables were made for.
    package let schema: Schema
    /// The store this snapshot materializes.
    package let storeID: StoreID
    /// The device that owns it.
    package let deviceID: DeviceID
    let pool: DatabasePool
    /// The snapshot file's format, kept in `PRAGMA user_version`. 2: record
    /// states list each version once. 3: entity tables have a
    /// `_chronicle_version` column for compact states (opening a format 2
    /// snapshot adds it). 4: de-duplication in ID order, each record visible
    /// unless a smaller visible one shares a key with it (opening a format 2
    /// or 3 snapshot recomputes the rows of every entity that has references
    /// or unique keys, so it shows what this rule computes). 5: each
    /// entity's rows are in `_chronicle_rows_<name>`, read through a view
    /// named after the entity that leaves out `_chronicle_version`; dates
    /// are stored as seconds since 1970 (a REAL), which GRDB's `Date`
    /// decoding reads exactly (opening an older snapshot moves the rows and
    /// converts the dates, and recomputes the rows of entities whose unique
    /// keys include a date). Format 6: a visible record shows the newer
    /// values of the duplicates merged into it (opening an older snapshot
    /// recomputes the rows of entities with a unique key). Format 7: records
    /// of entities with unique keys or references may keep a compact state
    /// too, their keys and references then read from their row (nothing to
    /// migrate: a format 6 snapshot has no such states). Format 8: a compact
    /// state's version names its device by a number the snapshot assigns
    /// (`_chronicle_devices`), 9 or 10 bytes where it took 24 (opening an
    /// older snapshot adds the table; its 24-byte versions stay readable).
    /// Format 9: a compact state may hold a version per field, where
    /// updates of attributes in no unique key changed some fields after the
    /// insert (nothing to migrate: a format 8 snapshot holds one version
    /// per compact state, which format 9 reads alike; an older Chronicle
    /// would take the longer versions for damage, so it refuses format 9).
    package static let format = 9
    /// The page cache of the snapshot's writing connection, in KiB.
    package static let writerCacheKiB = 32 * 1024
    /// Each entity's SQL, built once.
    let entitySQL: [EntitySQL]
    /// Where a simulation may make this device crash.
    package let crashInjector: CrashInjector?
    /// Migrations to ``schema`` from its earlier versions that this device
    /// knows (those the app names, those the snapshot migrated from, and
    /// those it learned from the container's schema records), through
    /// which logs and baselines of those versions are read.
    package var earlier: [SchemaMigration] { known.withLock { $0 } }
    private let known: Mutex<[SchemaMigration]>
    /// The store's compression dictionaries this device keeps, read from
    /// `_chronicle_dictionaries` at first use.
    let dictionaryCache = Mutex<DictionaryCache?>(nil)
    /// The app's code for changes between versions.
    let conversions: [SchemaConversion]
    /// The migration this open did, if the file was of an earlier version.
    package let migrated: SchemaMigration?

    /// Opens the snapshot at `path`, creating it if it does not exist.
    ///
    /// - Throws: ``ChronicleError/Code/storeMismatch`` if the file belongs to
    ///   another store, device or schema; ``ChronicleError/Code/databaseCorrupt``
    ///   if it is damaged or not a SQLite database; ``ChronicleError/Code/database``
    ///   (or ``ChronicleError/Code/io``, ``ChronicleError/Code/diskFull``) if
    ///   it cannot be opened otherwise. SQLite's error is the underlying one.
    package init(path: String, schema: Schema, storeID: StoreID, deviceID: DeviceID, durability: Durability = .full,
                earlierSchemas: [Schema] = [], conversions: [SchemaConversion] = [],
                crashInjector: CrashInjector? = nil) throws {
        try Self.requireRegularFiles(path)
        self.crashInjector = crashInjector
        self.conversions = conversions
        let entitySQL = EntitySQL.make(schema)
        self.entitySQL = entitySQL
        self.path = path
        self.schema = schema
        self.storeID = storeID
        self.deviceID = deviceID
        var config = Configuration()
        config.journalMode = .wal
        config.busyMode = .timeout(10)
        config.schemaSource = EntityViewKeys(schema)
        // `PRAGMA synchronous` is per connection, and GRDB's DatabasePool
        // runs its WAL set-up on the writer after `prepareDatabase`, setting
        // NORMAL there. So it is set twice: here, for any connection GRDB
        // opens (no WAL set-up follows one opened later), and on the writer
        // once the pool is open, read back to be sure. Readers do not commit,
        // so their setting does not matter.
        let synchronous = durability.sqliteSynchronous
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        do {
            pool = try DatabasePool(path: path, configuration: config)
            // Outside a transaction: SQLite refuses to change it inside one.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
                let actual = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                guard actual == synchronous else {
                    throw ChronicleError(.database, "cannot open snapshot \(path): PRAGMA synchronous is \(actual.map(String.init) ?? "unknown") on the writing connection, not \(synchronous) (\(durability.rawValue) durability)")
                }
            }
            let stored = try pool.read { db in try Self.storedSchemas(db, path: path) }
            // A snapshot of an earlier version of the schema migrates, with
            // a copy of the file kept until the migration commits.
            var migration: SchemaMigration?
            var copy: String?
            if let stored, stored.current.hash != schema.hash {
                if stored.current.version > schema.version {
                    throw ChronicleError(.schemaMismatch, "snapshot \(path) is of schema version \(stored.current.version), later than this app's version \(schema.version): open it with the newer app")
                }
                let m = try SchemaMigration.through(stored.earlier + earlierSchemas, from: stored.current, to: schema, conversions: conversions)
                try m.requireComplete()
                let backup = Self.migrationCopyPath(path, from: stored.current.version)
                Snapshot.removeFiles(backup)
                do {
                    try pool.backup(to: try DatabaseQueue(path: backup))
                } catch {
                    Snapshot.removeFiles(backup)
                    throw ChronicleError.sqlite(error, .database, "cannot write the copy of snapshot \(path) kept while it migrates, at \(backup)")
                }
                migration = m
                copy = backup
            } else {
                // A copy a migration left when its process died after the
                // commit: the snapshot is whole without it.
                Self.removeMigrationCopies(of: path)
            }
            var known: [UInt64: SchemaMigration] = [:]
            for s in (stored?.earlier ?? []) + (stored.map { [$0.current] } ?? []) + earlierSchemas
            where s.hash != schema.hash && s.version < schema.version && known[s.hash] == nil {
                // An earlier version whose changes Chronicle cannot follow
                // by itself is not known: its logs wait, as a newer one's.
                let versions = (stored?.earlier ?? []) + (stored.map { [$0.current] } ?? []) + earlierSchemas
                if let m = try? SchemaMigration.through(versions, from: s, to: schema, conversions: conversions), m.isComplete { known[s.hash] = m }
            }
            self.known = Mutex(known.values.sorted { $0.source.version < $1.source.version })
            self.migrated = migration
            try pool.write { db in
                // The writer's page cache (a per-connection setting): imports
                // of other devices' records insert all over the B-trees, and
                // SQLite's default 2 MiB cache made a million-record replay
                // re-read pages. Readers keep the default.
                try db.execute(sql: "PRAGMA cache_size = -\(Self.writerCacheKiB)")
                if try db.tableExists("_chronicle_identity") {
                    let format = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                    guard (2...Self.format).contains(format) else {
                        throw ChronicleError(.unsupportedVersion, "snapshot \(path) has format \(format); this Chronicle reads formats 2 to \(Self.format). Upload its pending saves with the Chronicle that wrote it, then delete it: a new snapshot is rebuilt from the container")
                    }
                    let tablesSchema = migration?.source ?? schema
                    try Self.checkIdentity(db, schema: tablesSchema, storeID: storeID, deviceID: deviceID)
                    // Each kept body's schema, when it is an earlier one.
                    try Self.addSchemaHashColumn(db, to: "_chronicle_outbox")
                    try Self.addSchemaHashColumn(db, to: "_chronicle_inherited")
                    // When each save was uploaded (snapshots made before it have no such column).
                    try Self.addUploadedAtColumn(db)
                    // The body checksum of each applied log (ledgers made before it have none).
                    if try db.tableExists("_chronicle_ledger"), try !db.columns(in: "_chronicle_ledger").contains(where: { $0.name == "checksum" }) {
                        try db.execute(sql: "ALTER TABLE _chronicle_ledger ADD COLUMN checksum INTEGER")
                    }
                    // Snapshots made before it lack the index of stored keys by record.
                    try db.execute(sql: SnapshotTables.keysByRecordIndex)
                    // …and of the saves not uploaded yet, and of applied logs by device.
                    try db.execute(sql: SnapshotTables.outboxPendingIndex)
                    if try db.tableExists("_chronicle_ledger") { try db.execute(sql: SnapshotTables.ledgerByDeviceIndex) }
                    if format < Self.format {
                        let recompute = try SnapshotTables.migrate(db, schema: tablesSchema, from: format)
                        var engine = MergeEngine(db: db, schema: tablesSchema, sql: EntitySQL.make(tablesSchema), origin: .imported)
                        if format < 4 {
                            try engine.recomputeView()
                        } else if !recompute.isEmpty {
                            try engine.recomputeView(entities: recompute)
                        }
                        try db.execute(sql: "PRAGMA user_version = \(Self.format)")
                    }
                    if let migration {
                        try Self.migrate(db, migration)
                        try crashInjector?.check(.schemaMigrationBeforeCommit)
                    }
                } else {
                    try SnapshotTables.create(db, schema: schema)
                    try db.execute(sql: "PRAGMA user_version = \(Self.format)")
                    try db.execute(sql: "INSERT INTO _chronicle_identity (key, value) VALUES ('store', ?), ('device', ?), ('schema_hash', ?), ('schema', ?), ('hlc', 0)",
                                   arguments: [storeID.description, deviceID.description, schema.hashString, try Self.json(schema)])
                }
                // The earlier versions it knows stay known, whoever opens it next.
                let kept = Set((stored?.earlier ?? []).map(\.hash))
                for m in known.values where !kept.contains(m.source.hash) && m.source.hash != migration?.source.hash {
                    try Self.keep(m.source, db)
                }
            }
            if let copy { Snapshot.removeFiles(copy) }
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            // A simulated death leaves what a real one would.
            throw error
        } catch {
            // The transaction rolled back: the snapshot is as it was, and
            // the copy is not needed.
            Self.removeMigrationCopies(of: path)
            throw ChronicleError.sqlite(error, .database, "cannot open snapshot \(path)")
        }
    }

    private static func checkIdentity(_ db: Database, schema: Schema, storeID: StoreID, deviceID: DeviceID) throws {
        let values = Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT key, value FROM _chronicle_identity")
            .map { ($0[0] as String, $0[1] as DatabaseValue) })
        func check(_ key: String, _ expected: String, _ what: String, hint: String = "") throws {
            guard let stored = values[key].flatMap(String.fromDatabaseValue), stored == expected else {
                throw ChronicleError(.storeMismatch, "snapshot belongs to \(what) \(values[key].flatMap(String.fromDatabaseValue) ?? "?"), not \(expected)\(hint)")
            }
        }
        try check("store", storeID.description, "store")
        try check("device", deviceID.description, "device",
                  hint: ": the device folder's device.json names another device than the one that wrote this snapshot (a device.json copied from "
                      + "another device's folder?). Put this folder's own device.json back, from a backup; do not remove the snapshot while it "
                      + "may hold saves not yet uploaded")
        try check("schema_hash", schema.hashString, "schema")
    }

    /// Reads the snapshot's identity from an existing file without knowing it.
    package static func identity(at path: String) throws -> (store: StoreID, device: DeviceID, schema: Schema) {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ChronicleError(.notFound, "no snapshot at \(path)")
        }
        try requireRegularFiles(path)
        var config = Configuration()
        config.readonly = true
        do {
            let queue = try DatabaseQueue(path: path, configuration: config)
            return try queue.read { db in
                let values = Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT key, value FROM _chronicle_identity")
                    .map { ($0[0] as String, $0[1] as DatabaseValue) })
                guard let s = values["store"].flatMap(String.fromDatabaseValue).flatMap(StoreID.init(string:)),
                      let d = values["device"].flatMap(String.fromDatabaseValue).flatMap(DeviceID.init(string:)),
                      let json = values["schema"].flatMap(String.fromDatabaseValue)
                else { throw ChronicleError(.database, "\(path) has no valid Chronicle identity") }
                return (s, d, try Schema(json: Data(json.utf8)))
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "\(path) is not a Chronicle snapshot")
        }
    }

    /// A decoder for this snapshot's logs: its schema, and its earlier
    /// versions' logs read through their migrations.
    package func decoder(limits: DecodingLimits, dictionaries: [CompressionDictionary] = []) -> LogDecoder {
        LogDecoder(schema: schema, limits: limits, dictionaries: loadedDictionaries().kept.values.map(\.dictionary) + dictionaries, earlier: earlier)
    }

    /// Learns an earlier version of the schema, from the container's
    /// record of the versions a store's logs use: from now on (and after
    /// the next open) its logs and baselines are read through the
    /// migration. Returns false, learning nothing, for a schema that is not
    /// an earlier version, or whose changes need app code this device was
    /// not given: its logs stay held.
    package func learn(_ earlierSchema: Schema) throws -> Bool {
        if earlier.contains(where: { $0.source.hash == earlierSchema.hash }) { return true }
        guard earlierSchema.version < schema.version,
              let migration = try? SchemaMigration.through(earlier.map(\.source), from: earlierSchema, to: schema, conversions: conversions),
              migration.isComplete
        else { return false }
        do {
            try pool.write { db in try Self.keep(earlierSchema, db) }
        } catch {
            throw ChronicleError.sqlite(error, .database, "keeping schema version \(earlierSchema.version) failed")
        }
        known.withLock { $0.append(migration) }
        return true
    }

    /// The snapshot's database, for ``Store``'s reads and observations
    /// (which go through its read-only connections).
    package var databasePool: DatabasePool { pool }

    /// Tells GRDB's observers (a `ValueObservation` of an entity's view)
    /// that the row tables of the entities in `events` changed. Saves and
    /// imports write those rows through SQLite's C API, which GRDB does not
    /// see; called inside the writing transaction, the notice is delivered
    /// when it commits.
    func notifyObservers(of events: [RecordEvent], _ db: Database) throws {
        guard !events.isEmpty else { return }
        // The distinct entities: a few, among up to a batch's worth of events.
        var entities: [String] = []
        for event in events where !entities.contains(event.entity) { entities.append(event.entity) }
        for entity in entities {
            try db.notifyChanges(in: Table(SnapshotTables.rows(entity)))
        }
    }

    /// Runs `body` on a read-only connection.
    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.read(body)
    }

    /// Runs `body` on a read-only connection, asynchronously.
    package func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await pool.read(body)
    }

    /// The highest applied sequence per device (this device included).
    package func vector() throws -> [DeviceID: UInt64] {
        try pool.read { db in
            var result: [DeviceID: UInt64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT device, sequence FROM _chronicle_vector") {
                result[DeviceID(row[0] as RecordID)] = UInt64(row[1] as Int64)
            }
            return result
        }
    }

    /// For each device in `vector`, the clock of its save at that sequence,
    /// where this snapshot knows it as made: its own saves from the outbox;
    /// another device's when the last save of it applied here is that one,
    /// from a log (a baseline's vector carries no clock per save).
    package func transactionClocks(at vector: [DeviceID: UInt64]) throws -> [DeviceID: UInt64] {
        do {
            return try pool.read { db in
                var clocks: [DeviceID: UInt64] = [:]
                for (device, sequence) in vector where sequence > 0 {
                    if device == deviceID {
                        if let clock = try Int64.fetchOne(db, sql: "SELECT clock FROM _chronicle_outbox WHERE sequence = ?", arguments: [Int64(clamping: sequence)]) {
                            clocks[device] = UInt64(bitPattern: clock)
                        }
                        continue
                    }
                    guard let row = try Row.fetchOne(db, sql: "SELECT sequence, clock FROM _chronicle_vector WHERE device = ?", arguments: [device.rawValue]),
                          UInt64(row[0] as Int64) == sequence,
                          try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_ledger WHERE device = ? AND first <= ? AND last >= ? LIMIT 1",
                                            arguments: [device.rawValue, Int64(clamping: sequence), Int64(clamping: sequence)]) ?? false
                    else { continue }
                    clocks[device] = UInt64(bitPattern: row[1] as Int64)
                }
                return clocks
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "reading the clocks of the saves a vector ends at failed")
        }
    }

    /// What the snapshot knows of a record, visible or not: each field's
    /// version, whether an insert was seen, the newest delete. Simulations
    /// use it to check that a write was applied (or superseded).
    package struct RecordVersions: Sendable, Equatable {
        /// Per field name, the version of the value the snapshot holds.
        package var fields: [String: Version]
        /// Whether an insert was applied.
        package var inserted: Bool
        /// The newest delete applied.
        package var deleteVersion: Version?
    }

    /// For each of `ids` that the snapshot holds as a duplicate merged into
    /// another record (a record of the same unique key), that record.
    package func survivors(of ids: Set<RecordID>) throws -> [RecordID: RecordID] {
        guard !ids.isEmpty else { return [:] }
        do {
            return try pool.read { db in
                let engine = MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .local)
                var result: [RecordID: RecordID] = [:]
                // Only entities with unique keys have duplicates; each lookup
                // is by the table's key (entity, id), not a scan by id.
                let keyed = schema.entities.indices.filter { !schema.entities[$0].uniqueConstraints.isEmpty }
                guard !keyed.isEmpty else { return [:] }
                let statement = try db.cachedStatement(sql: "SELECT 1 FROM _chronicle_records WHERE entity = ? AND id = ?")
                for id in ids {
                    guard let entity = try keyed.first(where: { try Bool.fetchOne(statement, arguments: [$0, id]) ?? false }),
                          let survivor = try engine.survivor(entity: entity, id: id), survivor != id else { continue }
                    result[id] = survivor
                }
                return result
            }
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError.sqlite(error, .database, "reading which records duplicates were merged into failed")
        }
    }

    /// The versions the snapshot holds for a record, or nil if it knows nothing of it.
    package func recordVersions(entity: String, id: RecordID) throws -> RecordVersions? {
        guard let index = schema.entityIndex(named: entity) else { throw ChronicleError(.unknownEntity, "no entity named \(entity)") }
        return try pool.read { db in
            let engine = MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .local)
            guard let state = try engine.loadState(index, id) else { return nil }
            let fields = schema.entities[index].fields
            return RecordVersions(fields: Dictionary(uniqueKeysWithValues: state.fields.entries.map { (fields[$0.index].name, $0.version) }),
                                  inserted: state.inserted, deleteVersion: state.deleteVersion)
        }
    }

    /// Checkpoints the WAL into the main file, then closes the database. The
    /// snapshot cannot be used afterwards; closing it again does nothing.
    ///
    /// After a clean close the main `.sqlite` file holds every save and the
    /// `-wal` file is empty, so the snapshot can be copied or backed up as
    /// that one file. If another connection (another process) is reading at
    /// that moment, the part of the WAL it still needs stays in the `-wal`
    /// file, synced, and the next checkpoint moves it.
    ///
    /// - Throws: ``ChronicleError/Code/database`` if SQLite refuses to close
    ///   the database. A checkpoint that fails (a full disk) is not an error:
    ///   the saves stay in the `-wal`, which the next open reads.
    package func close() throws {
        // TRUNCATE: copy every frame into the main file, sync it, and cut
        // the WAL to zero bytes. SQLite would checkpoint on its own only
        // when the last connection closes, but GRDB closes the writer
        // before the read-only readers, and a reader cannot checkpoint.
        // A checkpoint that fails (a full disk) loses nothing: every commit
        // is in the WAL, which the next open reads, so it is not an error
        // of the close (a save that committed must not be reported failed).
        try? pool.writeWithoutTransaction { db in
            // Closed already (a second close): nothing to do, as before.
            guard db.sqliteConnection != nil else { return }
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
        do {
            try pool.close()
        } catch {
            throw ChronicleError.sqlite(error, .database, "cannot close snapshot \(path)")
        }
    }
}

extension Snapshot {
    /// Removes the copies migrations kept beside the snapshot at `path`
    /// (regular files only: anything else there is left for a person).
    static func removeMigrationCopies(of path: String) {
        let folder = (path as NSString).deletingLastPathComponent, base = (path as NSString).lastPathComponent
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name.hasPrefix(base + ".schema-v") {
            let file = (folder as NSString).appendingPathComponent(name)
            var st = stat()
            if lstat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { unlink(file) }
        }
    }

    /// Removes a database file and its companions (`-wal`, `-shm`,
    /// `-journal`), where they are.
    static func removeFiles(_ path: String) {
        for file in [path, path + "-wal", path + "-shm", path + "-journal"] { unlink(file) }
    }

    /// Refuses a snapshot path, or its `-wal` or `-shm`, that is there but
    /// is not a regular file, or a link to one (a FIFO would block SQLite's
    /// open for good, a folder or a device would fail with SQLite's words):
    /// a clear error naming it instead.
    package static func requireRegularFiles(_ path: String) throws {
        for file in [path, path + "-wal", path + "-shm"] {
            var st = stat()
            guard stat(file, &st) == 0 else { continue }
            guard (st.st_mode & S_IFMT) == S_IFREG else {
                throw ChronicleError(.foreignEntry, "\(file) is not a regular file, where the device's snapshot belongs; move it aside")
            }
        }
    }
}
