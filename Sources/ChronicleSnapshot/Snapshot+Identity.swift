import ChronicleCore
import Foundation
import GRDB

/// What a snapshot knows about its own place in the container's history,
/// and how a device that must continue under a new ID carries its saves over.
extension Snapshot {
    /// A random number drawn when the snapshot was made (or first asked
    /// for): it tells two snapshots of one device ID apart. The device's
    /// registration in the container records it, so a snapshot that finds
    /// another incarnation registered knows its files are not the ones that
    /// wrote under this ID (a lost or rebuilt snapshot).
    ///
    /// - Parameter candidate: stored and returned if the snapshot has none yet.
    package func incarnation(orStore candidate: UInt64) throws -> UInt64 {
        try pool.write { db in
            if let stored = try String.fetchOne(db, sql: "SELECT value FROM _chronicle_identity WHERE key = 'incarnation'"),
               let value = UInt64(stored, radix: 16) {
                return value
            }
            try db.execute(sql: "INSERT OR REPLACE INTO _chronicle_identity (key, value) VALUES ('incarnation', ?)",
                           arguments: [candidate.paddedHex])
            return candidate
        }
    }

    /// A small value Chronicle keeps in the snapshot under `key`, or nil.
    package func metadata(_ key: String) throws -> String? {
        try pool.read { db in try String.fetchOne(db, sql: "SELECT value FROM _chronicle_identity WHERE key = ?", arguments: ["meta." + key]) }
    }

    /// Sets (or with nil, removes) a small value kept in the snapshot.
    package func setMetadata(_ key: String, _ value: String?) throws {
        try pool.write { db in
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO _chronicle_identity (key, value) VALUES (?, ?)", arguments: ["meta." + key, value])
            } else {
                try db.execute(sql: "DELETE FROM _chronicle_identity WHERE key = ?", arguments: ["meta." + key])
            }
        }
    }

    /// The highest sequence this device has saved (0 if none).
    package func ownSequence() throws -> UInt64 {
        try pool.read { db in try appliedSequence(db, deviceID) }
    }

    /// The newest log the outbox knows is in the container, and the log it
    /// planned next but has not seen stored yet (a put that may or may not
    /// have happened before a crash).
    package func uploadFrontier() throws -> (lastUploaded: (first: UInt64, last: UInt64)?, planned: (first: UInt64, last: UInt64)?) {
        try pool.read { db in
            let uploaded = try Row.fetchOne(db, sql: """
                SELECT log_first, log_last FROM _chronicle_outbox
                WHERE uploaded = 1 AND log_first IS NOT NULL ORDER BY sequence DESC LIMIT 1
                """).map { (UInt64($0[0] as Int64), UInt64($0[1] as Int64)) }
            let planned = try Row.fetchOne(db, sql: """
                SELECT log_first, log_last FROM _chronicle_outbox
                WHERE uploaded = 0 AND log_first IS NOT NULL ORDER BY sequence LIMIT 1
                """).map { (UInt64($0[0] as Int64), UInt64($0[1] as Int64)) }
            return (uploaded, planned)
        }
    }

    /// This device's saves `first...last` as transactions, decoded from the
    /// outbox (which keeps every body after the newest compaction; see
    /// ``pruneOutbox(through:)``), or nil if any is missing.
    package func ownTransactions(first: UInt64, last: UInt64) throws -> [Transaction]? {
        guard first <= last, let encoded = try outboxTransactions(first: first, last: last) else { return nil }
        return try transactions(encoded, device: deviceID)
    }

    /// This device's saves with sequences in `first...last` that its outbox
    /// holds, skipping the sequences it does not (logs of its ID it
    /// imported, written by another copy of its files).
    package func ownTransactions(within first: UInt64, _ last: UInt64) throws -> [Transaction] {
        guard first <= last else { return [] }
        return try transactions(try outboxTransactions(presentIn: first, last), device: deviceID)
    }

    /// Decodes pre-encoded bodies of `device` into transactions, in
    /// `schema`'s terms: a body kept as an earlier version wrote it is read
    /// through that version's migration (`earlier`).
    package static func transactions(_ encoded: [LogEncoder.EncodedTransaction], device: DeviceID, schema: Schema,
                                     earlier: [SchemaMigration] = [], storeID: StoreID) throws -> [Transaction] {
        guard !encoded.isEmpty else { return [] }
        // The outbox was written by this snapshot: no cap applies to reading it back.
        let decoder = LogDecoder(schema: schema, limits: DecodingLimits(maxBodyBytes: .max), earlier: earlier)
        var result: [Transaction] = []
        var start = 0
        // Each run of bodies of one schema is one log.
        while start < encoded.count {
            var end = start + 1
            while end < encoded.count, encoded[end].schemaHash == encoded[start].schemaHash,
                  encoded[end].sequence == encoded[end - 1].sequence + 1 { end += 1 }
            let bytes = try LogEncoder(storeID: storeID, compresses: false)
                .encode(bodies: Array(encoded[start..<end]), device: device, schemaHash: schema.hash)
            result += try decoder.open(bytes).transactions()
            start = end
        }
        return result
    }

    /// ``transactions(_:device:schema:earlier:storeID:)`` with this
    /// snapshot's schema and the earlier versions it knows.
    package func transactions(_ encoded: [LogEncoder.EncodedTransaction], device: DeviceID) throws -> [Transaction] {
        try Self.transactions(encoded, device: device, schema: schema, earlier: earlier, storeID: storeID)
    }

    /// Saves `transactions` (another device ID's saves, carried over) as
    /// this device's own, in order, in one SQLite transaction: each keeps
    /// its clock and changes and gets this device's next sequence. Nothing
    /// is validated (the saves were acknowledged once already); they merge
    /// as an import would. Returns each carried save's old and new sequence.
    package func adopt(_ transactions: [Transaction]) throws -> [(old: UInt64, new: UInt64)] {
        guard !transactions.isEmpty else { return [] }
        do {
            return try pool.write { db in
                var mapping: [(old: UInt64, new: UInt64)] = []
                var engine = MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .local)
                var hlc = try lastClock(db)
                for t in transactions {
                    let sequence = try appliedSequence(db, deviceID) + 1
                    let version = Version(clock: t.clock, device: deviceID)
                    for change in t.changes {
                        guard let entity = schema.entityIndex(named: change.entity) else {
                            throw ChronicleError(.unknownEntity, "a carried-over save names entity \(change.entity), which the schema does not have")
                        }
                        var values: [(field: Int, value: Value)] = []
                        for fv in change.values {
                            guard let i = schema.entities[entity].fieldIndex(named: fv.name) else {
                                throw ChronicleError(.unknownAttribute, "a carried-over save names \(change.entity).\(fv.name), which the schema does not have")
                            }
                            values.append((i, fv.value))
                        }
                        try engine.apply(change.kind, entity: entity, id: change.recordID, values: values, version: version)
                    }
                    try engine.settle()
                    let carried = Transaction(deviceID: deviceID, sequence: sequence, clock: t.clock, schemaHash: schema.hash, changes: t.changes)
                    try db.execute(sql: "INSERT INTO _chronicle_outbox (sequence, clock, body) VALUES (?, ?, ?)",
                                   arguments: [Int64(sequence), Int64(bitPattern: t.clock.rawValue), Data(LogEncoder.body(of: carried))])
                    try setApplied(db, deviceID, sequence: sequence, clock: t.clock)
                    if t.clock > hlc { hlc = t.clock }
                    mapping.append((t.sequence, sequence))
                }
                try db.execute(sql: "UPDATE _chronicle_identity SET value = ? WHERE key = 'hlc'", arguments: [Int64(bitPattern: hlc.rawValue)])
                return mapping
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "carrying saves over failed")
        }
    }

    /// Saves in `destination`, as its own (``adopt(_:)``), every write this
    /// snapshot holds and `destination` lacks: a field this snapshot has
    /// from a later clock, an insert or a delete it has not seen. Each keeps
    /// the clock it was made with, so it merges everywhere as the original
    /// would have; the writes of one original save (one clock and device)
    /// go in one save. Memory holds the writes carried, not the snapshot.
    ///
    /// A device that builds its copy of the store again from the container
    /// (``Store``'s move to a new ID) does this from its old copy: the
    /// container may have lost other devices' saves that it had applied (a
    /// container and a device folder both put back from older copies), and
    /// its old copy may then be the only place they are left. Writes the
    /// container still has compare equal and are not saved again.
    ///
    /// - Returns: how many saves it made, and the error that stopped it
    ///   reading this snapshot (a damaged copy, the reason some copies are
    ///   built again), if one did: what it carried until then stays carried.
    /// - Throws: ``ChronicleError/Code/schemaMismatch`` if the snapshots'
    ///   schemas differ; ``ChronicleError/Code/database`` if `destination`
    ///   cannot be read or written.
    package func carryWrites(into destination: Snapshot) throws -> (saves: Int, unreadable: ChronicleError?) {
        guard destination.schema.hash == schema.hash else {
            throw ChronicleError(.schemaMismatch, "carrying writes needs both copies on one schema version")
        }
        var scan = RecordStateScan(schema: schema)
        // Every page's, so that the writes of one original save stay one
        // save: two saves of one version would merge depending on their order.
        var origins: [Version: [Change]] = [:]
        var unreadable: ChronicleError?
        scanning: while !scan.finished {
            var page: [(entity: Int, id: RecordID, state: RecordState)] = []
            do {
                try pool.read { db in
                    try scan.read(db) { entity, id, state in
                        page.append((entity, id, state))
                        return page.count < RecordStateScan.page
                    }
                }
            } catch {
                unreadable = ChronicleError.sqlite(error, .database, "reading the records to carry failed")
                break scanning
            }
            let held: [RecordState?]
            do {
                held = try destination.pool.read { db in
                    let engine = MergeEngine(db: db, schema: destination.schema, sql: destination.entitySQL, origin: .local)
                    return try page.map { try engine.loadState($0.entity, $0.id) }
                }
            } catch {
                throw ChronicleError.sqlite(error, .database, "reading the records of the new copy failed")
            }
            for (record, there) in zip(page, held) {
                writes(of: record.state, schema.entities[record.entity], record.id, lacking: there, into: &origins)
            }
        }
        return (try destination.adopt(Self.saves(origins, schemaHash: schema.hash)).count, unreadable)
    }

    /// The writes of record `id` (its state here `state`) that `there`, the
    /// same record elsewhere (nil: not there at all), lacks, added to
    /// `origins` by the version (the original save) each came with.
    private func writes(of state: RecordState, _ entity: Entity, _ id: RecordID, lacking there: RecordState?, into origins: inout [Version: [Change]]) {
        var writes: [Version: [FieldValue]] = [:]
        for entry in state.fields.entries {
            if let theirs = there?.fields[entry.index], theirs.version.clock >= entry.version.clock { continue }
            writes[entry.version, default: []].append(FieldValue(entity.fields[entry.index].name, entry.value))
        }
        if state.inserted, !(there?.inserted ?? false) {
            // The insert came with the oldest write; it wrote every
            // field, so it carries every field this snapshot has (a
            // value written later is written later again, by its
            // own save, where it is newer than what is there). A
            // record with no field left has only its delete.
            if let version = state.fields.entries.map(\.version).min() ?? state.deleteVersion {
                let first = version
                let values = state.fields.entries.map { FieldValue(entity.fields[$0.index].name, $0.value) }
                origins[first, default: []].append(Change(.insert, entity: entity.name, recordID: id, values: values))
                writes[first] = nil
            }
        }
        for (origin, values) in writes {
            origins[origin, default: []].append(Change(.update, entity: entity.name, recordID: id, values: values))
        }
        if let deleted = state.deleteVersion, there?.deleteVersion.map({ $0.clock < deleted.clock }) ?? true {
            origins[deleted, default: []].append(Change(.delete, entity: entity.name, recordID: id))
        }
    }

    /// Saves that make record `id` of `entity` what it is here, whole (its
    /// insert, later writes and delete), each at the version it came with;
    /// nil for a record this snapshot does not know. For a deleted record
    /// carried into a store that does not know it (see `RecordCopy`).
    package func history(of entity: String, _ id: RecordID) throws -> [Transaction]? {
        guard let index = schema.entityIndex(named: entity) else { throw ChronicleError(.unknownEntity, "no entity named \(entity)") }
        let state = try pool.read { db in
            try MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .local).loadState(index, id)
        }
        guard let state else { return nil }
        var origins: [Version: [Change]] = [:]
        writes(of: state, schema.entities[index], id, lacking: nil, into: &origins)
        return Self.saves(origins, schemaHash: schema.hash)
    }

    /// The deletes this snapshot holds that `destination` lacks, for a
    /// store whose records are merged into another by copying them (the
    /// local or fallback store into the cloud store). A copy carries only
    /// the records its source still shows, so without these a record the
    /// source deleted would stay in the destination: one another copy of
    /// the source (a device folder copied while the cloud was away) had put
    /// there, say, and this one deleted afterwards.
    ///
    /// A record this snapshot holds deleted (by its own delete, not hidden by
    /// a cascade or merged into a record of the same unique key) is
    ///
    /// - in `original`, as saves that keep the delete's clock, when
    ///   `destination` holds only writes older than the delete: it then
    ///   merges there as the delete itself would have;
    /// - in `seen`, when `destination` shows it with writes newer than the
    ///   delete that hold only values this snapshot had when it deleted the
    ///   record (a copy of the record made later, as another copy of this
    ///   store merged it): the delete is made again, as a new save.
    ///
    /// A record an earlier merge found in `destination` under another ID
    /// (`merged`, this snapshot's ID to that one: a record of the same
    /// unique key) is judged, and deleted, as that record.
    ///
    /// A record `destination` shows with a value this snapshot never had,
    /// written after the delete, stays: a write newer than a delete brings
    /// the record back, as a sync would. One `destination` does not know is
    /// left out: it has nothing to delete.
    package func deletes(missingIn destination: Snapshot, mergedInto merged: [RecordID: RecordID] = [:]) throws
        -> (original: [Transaction], seen: [(entity: String, id: RecordID)]) {
        guard destination.schema.hash == schema.hash else {
            throw ChronicleError(.schemaMismatch, "carrying deletes needs both copies on one schema version")
        }
        var origins: [Version: [Change]] = [:]
        var seen: [(entity: String, id: RecordID)] = []
        var cursor: (entity: Int, id: RecordID) = (-1, RecordID(high: 0, low: 0))
        // Every value this store's own saves gave each field of a record
        // (read once, when first needed): a later write there of a value
        // the deleter once had, before it changed it and then deleted the
        // record, is another copy of the same folder merging what it had
        // from before they parted.
        var written: [RecordID: [Int: [Value]]]?
        func everWritten() throws -> [RecordID: [Int: [Value]]] {
            if let written { return written }
            var result: [RecordID: [Int: [Value]]] = [:]
            for t in try ownTransactions(since: .zero) {
                for change in t.changes {
                    guard let e = schema.entityIndex(named: change.entity) else { continue }
                    for fv in change.values {
                        guard let i = schema.entities[e].fieldIndex(named: fv.name) else { continue }
                        result[change.recordID, default: [:]][i, default: []].append(fv.value)
                    }
                }
            }
            written = result
            return result
        }
        while true {
            // A page of this snapshot's deleted records (compact states are
            // never deleted).
            var page: [(entity: Int, id: RecordID, state: RecordState)] = []
            var read = 0
            do {
                try pool.read { db in
                    let rows = try Row.fetchCursor(db, sql: """
                        SELECT entity, id, state FROM _chronicle_records WHERE (entity, id) > (?, ?) ORDER BY entity, id LIMIT \(RecordStateScan.page)
                        """, arguments: [cursor.entity, cursor.id])
                    while let row = try rows.next() {
                        read += 1
                        let entity: Int = row[0]
                        let id: RecordID = row[1]
                        cursor = (entity, id)
                        guard entity >= 0, entity < schema.entities.count else {
                            throw ChronicleError(.databaseCorrupt, "_chronicle_records names entity \(entity); the schema has \(schema.entities.count)")
                        }
                        let state = try RecordState(encoded: [UInt8](row[2] as Data))
                        // Hidden by its own delete: no write after it.
                        guard state.inserted, let deleted = state.deleteVersion, state.newestWrite.map({ $0 < deleted }) ?? true else { continue }
                        page.append((entity, id, state))
                    }
                }
            } catch let error as ChronicleError {
                throw error
            } catch {
                throw ChronicleError.sqlite(error, .database, "reading the deleted records failed")
            }
            if !page.isEmpty {
                let there: [(id: RecordID, state: RecordState?, shown: Bool)]
                do {
                    there = try destination.pool.read { db in
                        let engine = MergeEngine(db: db, schema: destination.schema, sql: destination.entitySQL, origin: .local)
                        return try page.map { record in
                            let table = SnapshotTables.rows(schema.entities[record.entity].name)
                            var id = record.id
                            var state = try engine.loadState(record.entity, id)
                            // Never copied there: an earlier merge found it
                            // under another record's ID, of the same unique key.
                            if state == nil, let other = merged[id] {
                                id = other
                                state = try engine.loadState(record.entity, id)
                            }
                            let shown = try Bool.fetchOne(db, sql: "SELECT 1 FROM \(table.quotedDatabaseIdentifier) WHERE id = ?", arguments: [id]) ?? false
                            return (id, state, shown)
                        }
                    }
                } catch {
                    throw ChronicleError.sqlite(error, .database, "reading the records of the merged store failed")
                }
                for (record, there) in zip(page, there) {
                    let deleted = record.state.deleteVersion!
                    let entity = schema.entities[record.entity].name
                    // One it does not know it never needs deleted.
                    guard let held = there.state else { continue }
                    if let gone = held.deleteVersion, gone.clock >= deleted.clock { continue }
                    let later = held.fields.entries.filter { $0.version.clock > deleted.clock }
                    if later.isEmpty {
                        origins[deleted, default: []]
                            .append(Change(.delete, entity: entity, recordID: there.id))
                    } else if there.shown, try later.allSatisfy({ entry in
                        let mine = record.state.fields[entry.index]?.value
                        if mine == entry.value { return true }
                        let once = try everWritten()[record.id]?[entry.index]
                        if once?.contains(entry.value) == true { return true }
                        // A reference the other copy's merge moved to the
                        // record it matched by unique key.
                        guard case .reference(let theirs)? = Optional(entry.value), case .reference(let ours)? = mine,
                              case .reference(let target, _) = schema.entities[record.entity].fields[entry.index].kind else { return false }
                        return try sameKey(target, ours, theirs, in: destination)
                    }) {
                        seen.append((entity, there.id))
                    }
                }
            }
            if read < RecordStateScan.page { break }
        }
        return (Self.saves(origins, schemaHash: schema.hash), seen)
    }

    /// Whether record `ours` of entity `entity` here and record `theirs`
    /// in `destination` hold the same value of one of the entity's unique
    /// keys: a merge takes them for one record.
    private func sameKey(_ entity: String, _ ours: RecordID, _ theirs: RecordID, in destination: Snapshot) throws -> Bool {
        guard let e = schema.entityIndex(named: entity), !schema.entities[e].uniqueConstraints.isEmpty else { return false }
        let constraints = schema.entities[e].uniqueConstraints
        let columns = Array(Set(constraints.joined())).sorted()
        let sql = "SELECT \(columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")) FROM \(entity.quotedDatabaseIdentifier) WHERE id = ?"
        do {
            guard let mine = try pool.read({ db in try Row.fetchOne(db, sql: sql, arguments: [ours]) }),
                  let other = try destination.pool.read({ db in try Row.fetchOne(db, sql: sql, arguments: [theirs]) }) else { return false }
            return constraints.contains { constraint in
                constraint.allSatisfy { name in
                    let a: DatabaseValue = mine[name], b: DatabaseValue = other[name]
                    return !a.isNull && a == b
                }
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "comparing two records' unique keys failed")
        }
    }

    /// Changes grouped by the version (clock and device) of the save that
    /// made them, as saves to ``adopt(_:)``: one per version, in version
    /// order, so that the writes of one original save stay one save.
    package static func saves(_ changes: [Version: [Change]], schemaHash: UInt64) -> [Transaction] {
        changes.keys.sorted().map { version in
            Transaction(deviceID: version.device, sequence: 0, clock: version.clock, schemaHash: schemaHash, changes: changes[version]!)
        }
    }

    // MARK: Records merged under another ID

    private static let createMerged = """
        CREATE TABLE IF NOT EXISTS _chronicle_merged (
            store BLOB NOT NULL, source BLOB NOT NULL, target BLOB NOT NULL, PRIMARY KEY (store, source)
        ) WITHOUT ROWID
        """

    /// Remembers that a merge of this snapshot's store into `store` found
    /// these records there under other IDs (records of the same unique
    /// key): a later merge carries their deletes to those records
    /// (``deletes(missingIn:mergedInto:)``).
    package func noteMerged(_ pairs: [RecordID: RecordID], into store: StoreID) throws {
        guard !pairs.isEmpty else { return }
        do {
            try pool.write { db in
                try db.execute(sql: Self.createMerged)
                let statement = try db.cachedStatement(sql: "INSERT OR REPLACE INTO _chronicle_merged (store, source, target) VALUES (?, ?, ?)")
                for (source, target) in pairs where source != target {
                    try statement.execute(arguments: [store.rawValue, source, target])
                }
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "keeping the records a merge found under other IDs failed")
        }
    }

    /// The records a merge into `store` found there under other IDs
    /// (``noteMerged(_:into:)``).
    package func merged(into store: StoreID) throws -> [RecordID: RecordID] {
        do {
            return try pool.read { db in
                guard try db.tableExists("_chronicle_merged") else { return [:] }
                var result: [RecordID: RecordID] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT source, target FROM _chronicle_merged WHERE store = ?", arguments: [store.rawValue]) {
                    result[row[0] as RecordID] = row[1] as RecordID
                }
                return result
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "reading the records a merge found under other IDs failed")
        }
    }

    // MARK: Logs of earlier IDs

    private static let createInherited = """
        CREATE TABLE IF NOT EXISTS _chronicle_inherited (
            device BLOB NOT NULL, sequence INTEGER NOT NULL, clock INTEGER NOT NULL, body BLOB NOT NULL,
            log_first INTEGER NOT NULL, log_last INTEGER NOT NULL, schema_hash INTEGER, PRIMARY KEY (device, sequence)
        ) WITHOUT ROWID
        """

    /// Adds the column that keeps a body's schema (when it is not the
    /// snapshot's current one) to an outbox or a table of kept bodies made
    /// before it existed.
    static func addSchemaHashColumn(_ db: Database, to table: String) throws {
        guard try db.tableExists(table), !(try db.columns(in: table).contains { $0.name == "schema_hash" }) else { return }
        try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN schema_hash INTEGER")
    }

    /// Keeps the bodies of `old`'s saves in the logs `groups` (which the
    /// container holds as `old` uploaded them), and whatever `old` itself
    /// inherited, so that this snapshot can put those logs back if the
    /// container loses or damages them: nobody else holds their bodies.
    package func inherit(from old: Snapshot, groups: [(first: UInt64, last: UInt64)]) throws {
        // A body keeps the schema it was uploaded under: `old`'s current
        // one, unless it names an earlier one.
        func hash(_ b: LogEncoder.EncodedTransaction) -> Int64 { Int64(bitPattern: b.schemaHash ?? old.schema.hash) }
        var rows: [(DeviceID, UInt64, Int64, Data, UInt64, UInt64, Int64)] = []
        for group in groups {
            guard let bodies = try old.outboxTransactions(first: group.first, last: group.last) else { continue }
            for b in bodies { rows.append((old.deviceID, b.sequence, Int64(bitPattern: b.clock.rawValue), Data(b.body), group.first, group.last, hash(b))) }
        }
        for device in try old.inheritedDevices() {
            for group in try old.inheritedGroups(of: device) {
                guard let bodies = try old.inheritedTransactions(of: device, first: group.0, last: group.1) else { continue }
                for b in bodies { rows.append((device, b.sequence, Int64(bitPattern: b.clock.rawValue), Data(b.body), group.0, group.1, hash(b))) }
            }
        }
        try pool.write { db in
            try db.execute(sql: Self.createInherited)
            try Self.addSchemaHashColumn(db, to: "_chronicle_inherited")
            for r in rows {
                try db.execute(sql: "INSERT OR REPLACE INTO _chronicle_inherited (device, sequence, clock, body, log_first, log_last, schema_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                               arguments: [r.0.rawValue, Int64(r.1), r.2, r.3, Int64(r.4), Int64(r.5), r.6 == Int64(bitPattern: schema.hash) ? nil : r.6])
            }
        }
    }

    /// Keeps the bodies of logs of `device` (an earlier ID of this device)
    /// that only the container holds: logs its files uploaded and then lost
    /// (a restored folder, a lost `-wal`). Their saves were acknowledged;
    /// once the earlier ID is retired, nobody else would put them back.
    ///
    /// Each log's transactions are as the log holds them, in the terms of
    /// the schema it was written for (`Transaction/schemaHash`), so a log
    /// put back is the log that was there.
    package func inherit(logs: [(first: UInt64, last: UInt64, transactions: [Transaction])], of device: DeviceID) throws {
        guard !logs.isEmpty else { return }
        try pool.write { db in
            try db.execute(sql: Self.createInherited)
            try Self.addSchemaHashColumn(db, to: "_chronicle_inherited")
            for log in logs {
                for t in log.transactions {
                    try db.execute(sql: "INSERT OR REPLACE INTO _chronicle_inherited (device, sequence, clock, body, log_first, log_last, schema_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                   arguments: [device.rawValue, Int64(t.sequence), Int64(bitPattern: t.clock.rawValue), Data(LogEncoder.body(of: t)),
                                               Int64(log.first), Int64(log.last), t.schemaHash == schema.hash ? nil : Int64(bitPattern: t.schemaHash)])
                }
            }
        }
    }

    private func inheritedTableExists(_ db: Database) throws -> Bool {
        try db.tableExists("_chronicle_inherited")
    }

    /// The earlier IDs whose logs this snapshot keeps.
    package func inheritedDevices() throws -> [DeviceID] {
        try pool.read { db in
            guard try inheritedTableExists(db) else { return [] }
            return try RecordID.fetchAll(db, sql: "SELECT DISTINCT device FROM _chronicle_inherited ORDER BY device").map(DeviceID.init)
        }
    }

    /// The logs of `device` this snapshot keeps, as sequence ranges.
    package func inheritedGroups(of device: DeviceID) throws -> [(UInt64, UInt64)] {
        try pool.read { db in
            guard try inheritedTableExists(db) else { return [] }
            return try Row.fetchAll(db, sql: "SELECT DISTINCT log_first, log_last FROM _chronicle_inherited WHERE device = ? ORDER BY log_first",
                                    arguments: [device.rawValue])
                .map { (UInt64($0[0] as Int64), UInt64($0[1] as Int64)) }
        }
    }

    /// The kept bodies of `device`'s saves `first...last`, or nil if any is missing.
    package func inheritedTransactions(of device: DeviceID, first: UInt64, last: UInt64) throws -> [LogEncoder.EncodedTransaction]? {
        try pool.read { db in
            guard try inheritedTableExists(db) else { return nil }
            let rows = try Row.fetchAll(db, sql: """
                SELECT sequence, clock, body, schema_hash FROM _chronicle_inherited WHERE device = ? AND sequence BETWEEN ? AND ? ORDER BY sequence
                """, arguments: [device.rawValue, Int64(first), Int64(last)])
            guard rows.count == Int(last - first + 1) else { return nil }
            return rows.map(Self.encoded)
        }
    }
}

extension Snapshot {
    /// The newest clock this snapshot has seen: its saves', and those of
    /// every log and baseline it applied.
    package func latestClock() throws -> HybridTimestamp {
        do {
            return try pool.read { db in try lastClock(db) }
        } catch {
            throw ChronicleError.sqlite(error, .database, "reading the snapshot's clock failed")
        }
    }

    /// Moves this snapshot's clock to at least `clock`, as a log from
    /// another device would: records copied here from another store are
    /// then saved after everything that store had seen, never tied with it.
    package func observe(_ clock: HybridTimestamp) throws {
        do {
            try pool.write { db in
                try db.execute(sql: "UPDATE _chronicle_identity SET value = max(value, ?) WHERE key = 'hlc'", arguments: [Int64(bitPattern: clock.adoptable.rawValue)])
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "moving the snapshot's clock failed")
        }
    }
}

extension Snapshot {
    /// The container folder of the baseline this snapshot holds content
    /// from: the one it started from, or the newest it published since.
    package func heldBaseline() throws -> String? {
        do {
            return try pool.read { db in
                try Data.fetchOne(db, sql: "SELECT value FROM _chronicle_identity WHERE key = 'held_baseline'").flatMap { String(data: $0, encoding: .utf8) }
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "reading the snapshot's baseline failed")
        }
    }

    /// Records the baseline this snapshot holds content from (see ``heldBaseline()``).
    package func setHeldBaseline(_ prefix: String) throws {
        do {
            try pool.write { db in
                try db.execute(sql: "INSERT OR REPLACE INTO _chronicle_identity (key, value) VALUES ('held_baseline', ?)", arguments: [Data(prefix.utf8)])
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "recording the snapshot's baseline failed")
        }
    }
}

extension Snapshot {
    /// Every save whose log body this snapshot keeps for another device ID
    /// (a seeding device, an earlier ID of this device), oldest first.
    package func inheritedSaves() throws -> [Transaction] {
        var saves: [Transaction] = []
        for device in try inheritedDevices() {
            for (first, last) in try inheritedGroups(of: device) {
                guard let encoded = try inheritedTransactions(of: device, first: first, last: last) else { continue }
                saves += try transactions(encoded, device: device)
            }
        }
        return saves.sorted { $0.clock < $1.clock }
    }
}
