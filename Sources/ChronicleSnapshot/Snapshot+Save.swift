import CSQLite
import ChronicleCore
import Foundation
import GRDB

extension Snapshot {
    /// What a save did.
    package struct SaveResult: Sendable {
        /// The sequence the save got.
        package var sequence: UInt64
        /// Its clock.
        package var clock: HybridTimestamp
        /// What the app sees change.
        package var events: [RecordEvent]
    }

    /// Validates and applies `changes` as one transaction of this device, and
    /// appends its log body to the outbox, all in one SQLite transaction.
    ///
    /// Inserts get the schema's defaults for fields they leave out.
    ///
    /// - Throws: ``ChronicleError`` with ``ChronicleError/Code/typeMismatch``,
    ///   ``ChronicleError/Code/missingValue``, ``ChronicleError/Code/uniqueViolation``,
    ///   ``ChronicleError/Code/recordNotFound``, ``ChronicleError/Code/recordExists``,
    ///   ``ChronicleError/Code/invalidChange``, ``ChronicleError/Code/deleteDenied``,
    ///   ``ChronicleError/Code/unknownEntity`` or ``ChronicleError/Code/unknownAttribute``;
    ///   ``ChronicleError/Code/sizeOverCap`` if the save's log would be larger
    ///   than `maxBodyBytes`, which every reader refuses; nothing is written then.
    ///   A full disk is ``ChronicleError/Code/diskFull``.
    /// - Precondition: `changes` is not empty.
    ///
    /// `progress`, if given, is told how many of the changes are applied
    /// (and of how many) every ``progressInterval`` changes, and once more
    /// when all of them are, before the commit.
    package func save(_ changes: [Change], physicalMilliseconds: UInt64,
                      maxBodyBytes: Int = DecodingLimits.defaultMaxBodyBytes,
                      progress: ((_ applied: Int, _ of: Int) -> Void)? = nil) throws -> SaveResult {
        precondition(!changes.isEmpty, "Snapshot.save needs at least one change")
        return try save(physicalMilliseconds: physicalMilliseconds, maxBodyBytes: maxBodyBytes,
                        building: { _ in (changes, nil) }, progress: progress)!
    }

    /// How many changes a save applies between two reports of its progress.
    package static let progressInterval = 1_024

    /// Like ``save(_:physicalMilliseconds:maxBodyBytes:progress:)``, with the changes
    /// made by `building` inside the save's own SQLite transaction: what it
    /// reads on `db` is what the save applies to, with no other commit in
    /// between (a sync's import included). `finish` runs on `db` after the
    /// changes are applied, before the commit. Returns nil, writing
    /// nothing, when `building` gives no change.
    package func save(physicalMilliseconds: UInt64, maxBodyBytes: Int = DecodingLimits.defaultMaxBodyBytes,
                      building: (Database) throws -> [Change], finish: (Database) throws -> Void = { _ in }) throws -> SaveResult? {
        try save(physicalMilliseconds: physicalMilliseconds, maxBodyBytes: maxBodyBytes,
                 building: { db in (try building(db), nil) }, finish: finish)
    }

    /// Like ``save(physicalMilliseconds:maxBodyBytes:building:finish:)``,
    /// where `building` also gives new records of one entity as an
    /// ``InsertBatch``: the same save as with those records as insert
    /// changes before the others (the same log body, the same checks and
    /// errors), made faster for a bulk import. A record of the batch is
    /// stored at once as its compact row when its values are of its
    /// fields' types, it refers to no record, its ID is unknown and no
    /// record holds its unique keys; any other record goes through the
    /// checks and merge of an insert change.
    package func save(physicalMilliseconds: UInt64, maxBodyBytes: Int = DecodingLimits.defaultMaxBodyBytes,
                      building: (Database) throws -> (changes: [Change], inserts: InsertBatch?),
                      finish: (Database) throws -> Void = { _ in },
                      progress: ((_ applied: Int, _ of: Int) -> Void)? = nil) throws -> SaveResult? {
        do {
            return try pool.write { db -> SaveResult? in
                var (changes, batch) = try building(db)
                if batch?.isEmpty ?? false { batch = nil }
                guard !changes.isEmpty || batch != nil else { return nil }
                let own = try vectorEntry(db, deviceID)
                let sequence = own.sequence + 1
                var hlc = HybridClock(last: max(own.clock, try storedClock(db)))
                let clock = hlc.tick(physicalMilliseconds: physicalMilliseconds)
                guard clock.milliseconds <= HybridTimestamp.maxMilliseconds else {
                    throw ChronicleError(.invalidValue, "this device's clock reads \(clock.milliseconds) ms, past \(HybridTimestamp.maxMilliseconds) ms (the year 4199), which no other device would read: set the system clock right")
                }
                let version = Version(clock: clock, device: deviceID)
                var engine = MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .local)
                var normalized: [Change] = []
                // The batch's records stored at once; the others join the
                // changes, ahead of them, as the log lists them.
                var stored: InsertBatch?
                if let batch {
                    let fallback: [Change]
                    (stored, fallback) = try insertAtOnce(batch, freesKeys: freesKeys(changes), engine: &engine, version: version)
                    changes = fallback + changes
                }
                // A reference may name a record this save inserts later (and
                // does not delete).
                let deleted = Set(changes.lazy.filter { $0.kind == .delete }.map { InsertedRecord(entity: $0.entity, id: $0.recordID) })
                let inserted = Set(changes.lazy.filter { $0.kind == .insert }.map { InsertedRecord(entity: $0.entity, id: $0.recordID) })
                    .subtracting(deleted)
                // Records not visible right after their change, checked
                // again once the whole save is applied.
                var invisible: [(Change, Int)] = []
                // A save's changes share one version: its keys must be unique
                // once it is applied, not after each change. An update that
                // moves a unique key is checked then (two records may swap
                // keys in one save), and the records it meets on the way
                // count as visible until then.
                let keyMoves = changes.filter { movesKey($0) }
                // Likewise an insert of a key that a delete or a move later
                // in the save frees.
                let freesKeys = !keyMoves.isEmpty || self.freesKeys(changes)
                let keyed = freesKeys ? keyMoves + changes.filter { change in
                    change.kind == .insert && !(schema.entity(named: change.entity)?.uniqueConstraints.isEmpty ?? true)
                } : []
                // Records that share a key with another only on the way
                // are not that record's duplicates: a delete of it leaves them.
                let passing = Set(keyed.map(\.recordID))
                var visibleBefore: Set<RecordID> = []
                if freesKeys {
                    for change in changes where change.kind != .insert {
                        guard let e = schema.entityIndex(named: change.entity), !schema.entities[e].uniqueConstraints.isEmpty else { continue }
                        if try db.first(entitySQL[e].exists, { $0.bind(change.recordID) }, read: { _ in true }) ?? false { visibleBefore.insert(change.recordID) }
                    }
                }
                for (n, change) in changes.enumerated() {
                    if let progress, n % Self.progressInterval == 0 { progress(n, changes.count) }
                    let (entity, values, complete, keysFree): (Int, [(field: Int, value: Value)], Change, Bool)
                    do {
                        (entity, values, complete, keysFree) = try validate(change, inserted: inserted, db, engine: engine,
                                                                            visibleBefore: visibleBefore,
                                                                            deferUnique: freesKeys && (change.kind == .insert || movesKey(change)))
                    } catch {
                        // The first problem by field name, whatever order the
                        // change lists its fields in (an insert's come unsorted).
                        var sorted = change
                        sorted.values.sort { $0.name < $1.name }
                        _ = try validate(sorted, inserted: inserted, db, engine: engine, visibleBefore: visibleBefore, deferUnique: true)
                        throw error
                    }
                    // A new record whose keys no record holds: most inserts
                    // are stored at once, visible, as their compact row.
                    if keysFree, try engine.insertNewLocal(entity, change.recordID, values: values, version: version) {
                        // Records that referred to it before it existed.
                        try engine.settle()
                        normalized.append(complete)
                        continue
                    }
                    if keysFree { engine.noteKeysFree(entity: entity, id: change.recordID) }
                    // A record and the duplicates merged into it are one
                    // record to the app: a delete or a key change of it is
                    // one of them all, so no duplicate comes back.
                    let duplicates = try appliesToDuplicates(change, entity: entity, values)
                        ? engine.duplicates(entity: entity, of: change.recordID).filter { !passing.contains($0) } : []
                    try engine.apply(change.kind, entity: entity, id: change.recordID, values: values, version: version)
                    // An update that kept the state in the row left the
                    // record visible, as it was: no need to look.
                    let stillVisible = engine.keptInRow
                    for id in duplicates {
                        try engine.apply(change.kind, entity: entity, id: id, values: values, version: version)
                    }
                    try engine.settle()
                    if !stillVisible, try !isVisible(change, entity: entity, db) { invisible.append((change, entity)) }
                    normalized.append(complete)
                    for id in duplicates {
                        normalized.append(Change(change.kind, entity: complete.entity, recordID: id, values: complete.values))
                    }
                }
                progress?(changes.count, changes.count)
                if freesKeys { try checkKeysAfterSave(keyed, deleted: deleted, engine: engine, db) }
                for (change, entity) in invisible where try !isVisible(change, entity: entity, db) {
                    throw ChronicleError(.recordNotFound, "\(schema.entities[entity].name) \(change.recordID) would not be visible after this save (a cascade reference to a missing record?)")
                }
                let body = LogEncoder.body(sequence: sequence, clock: clock, inserts: stored, changes: normalized)
                // Readers refuse a log whose body (compressed or not) is over
                // the cap; a save whose own body is over it could never be
                // imported, and every later save would wait behind it.
                guard Self.fitsInOneLog(body.count, maxBodyBytes: maxBodyBytes) else {
                    throw ChronicleError(.sizeOverCap, "this save's log would be \(body.count) bytes (up to \(body.count + body.count / 255 + 16) once compressed), over the \(maxBodyBytes)-byte limit every device reads; save large values in smaller pieces")
                }
                try db.cachedStatement(sql: "INSERT INTO _chronicle_outbox (sequence, clock, body) VALUES (?, ?, ?)").execute(arguments: [sequence, Int64(bitPattern: clock.rawValue), Data(body)])
                // The save's clock is the clock's new last value: the
                // vector row keeps it (see `lastClock`).
                try setApplied(db, deviceID, sequence: sequence, clock: clock)
                try notifyObservers(of: engine.events, db)
                try finish(db)
                try crashInjector?.check(.saveBeforeCommit)
                return SaveResult(sequence: sequence, clock: clock, events: engine.events)
            }
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw ChronicleError(.uniqueViolation, "the save would give two records one unique key: \(error.message ?? "")", underlying: error)
        } catch {
            throw ChronicleError.sqlite(error, .database, "the save failed; nothing of it was saved")
        }
    }

    /// Whether `changes` may free a unique key for a record the same save
    /// inserts: an update writes a field of a unique key, or a delete
    /// removes a record of an entity with one.
    private func freesKeys(_ changes: [Change]) -> Bool {
        changes.contains { change in
            guard let e = schema.entity(named: change.entity), !e.uniqueConstraints.isEmpty else { return false }
            return change.kind == .delete || movesKey(change)
        }
    }

    /// Stores the records of `batch` that can be stored at once as their
    /// compact rows (see `MergeEngine.insertNewLocal(_:_:row:version:)`)
    /// and returns them, with the others as insert changes for the save's
    /// checks and merge. When the save's other changes may free a key
    /// (`freesKeys`), every record is left to them: their unique check
    /// waits until the whole save is applied.
    private func insertAtOnce(_ batch: InsertBatch, freesKeys: Bool, engine: inout MergeEngine,
                              version: Version) throws -> (stored: InsertBatch?, others: [Change]) {
        guard !freesKeys, let entityIndex = schema.entityIndex(named: batch.entity),
              batch.fieldNames.elementsEqual(schema.entities[entityIndex].fields.lazy.map(\.name)) else {
            return (nil, batch.ids.indices.map(batch.change))
        }
        let entity = schema.entities[entityIndex]
        let fields = entity.fields.count
        let checks = AttributeChecks(entity)
        var left: [Int] = []
        records: for (r, id) in batch.ids.enumerated() {
            for f in 0..<fields where !checks.fits(batch.values[r * fields + f], at: f) {
                left.append(r)
                continue records
            }
            guard try engine.insertNewLocal(entityIndex, id, row: batch.row(r), version: version) else {
                left.append(r)
                continue
            }
            // Records that referred to it before it existed.
            try engine.settle()
        }
        guard !left.isEmpty else { return (batch, []) }
        var stored = InsertBatch(entity: entity, capacity: batch.count - left.count)
        var next = 0
        for r in batch.ids.indices {
            if next < left.count, left[next] == r { next += 1 } else { stored.append(id: batch.ids[r], row: batch.row(r)) }
        }
        return (stored.isEmpty ? nil : stored, left.map(batch.change))
    }

    /// Whether a body of `count` bytes stays under `maxBodyBytes` both as is
    /// and after LZ4, whose output for incompressible data is at most
    /// `count + count / 255 + 16` bytes.
    package static func fitsInOneLog(_ count: Int, maxBodyBytes: Int) -> Bool {
        count <= maxBodyBytes && count + count / 255 + 16 <= maxBodyBytes
    }

    /// The fields a change names, by index: a bit per field.
    private struct FieldSet {
        private var small: UInt64 = 0
        private var large: Set<Int>?

        init(count: Int) {
            if count > 64 { large = [] }
        }

        /// Adds `index`; false if it was there.
        mutating func insert(_ index: Int) -> Bool {
            if large != nil { return large!.insert(index).inserted }
            let bit: UInt64 = 1 << UInt64(index)
            defer { small |= bit }
            return small & bit == 0
        }

        func contains(_ index: Int) -> Bool {
            if let large { return large.contains(index) }
            return small & (1 << UInt64(index)) != 0
        }
    }

    /// Checks one change against the schema and the current state; returns
    /// the entity index, the values by field index, and the change with
    /// defaults filled in.
    private struct InsertedRecord: Hashable {
        let entity: String
        let id: RecordID
    }

    /// The last value says the change is an insert whose unique keys (if
    /// any) no record holds, so the unique check needed no other query.
    private func validate(_ change: Change, inserted: Set<InsertedRecord>, _ db: Database,
                          engine: MergeEngine, visibleBefore: Set<RecordID> = [], deferUnique: Bool = false) throws -> (Int, [(field: Int, value: Value)], Change, Bool) {
        guard let entityIndex = schema.entityIndex(named: change.entity) else {
            throw ChronicleError(.unknownEntity, "no entity named \(change.entity)")
        }
        let entity = schema.entities[entityIndex]
        let visible = try visibleBefore.contains(change.recordID)
            || db.first(entitySQL[entityIndex].exists, { $0.bind(change.recordID) }, read: { _ in true }) ?? false
        var values: [(field: Int, value: Value)] = []
        values.reserveCapacity(change.kind == .insert ? entity.fields.count : change.values.count)
        var seen = FieldSet(count: entity.fields.count)
        for fv in change.values {
            guard let i = entity.fieldIndex(named: fv.name) else {
                throw ChronicleError(.unknownAttribute, "\(entity.name) has no field named \(fv.name)")
            }
            guard seen.insert(i) else {
                throw ChronicleError(.invalidChange, "\(entity.name).\(fv.name) is given twice in one change of \(change.recordID)")
            }
            let field = entity.fields[i]
            guard field.accepts(fv.value) else {
                if fv.value.isNull { throw ChronicleError(.missingValue, "\(entity.name).\(fv.name) is required") }
                throw ChronicleError(.typeMismatch, "\(entity.name).\(fv.name) is \(field.kind.withArticle); got \(fv.value)")
            }
            if case .string(let text) = fv.value, text.holdsNUL {
                // SQLite keeps such text whole, but readers of its text (GRDB's
                // String decoding among them) stop at the first NUL: the app
                // would read back less than it saved.
                throw ChronicleError(.invalidValue, "\(entity.name).\(fv.name) holds the character U+0000, which text read back from SQLite stops at; keep such bytes in a data attribute")
            }
            if case .reference(let destination, _) = field.kind, case .reference(let target) = fv.value {
                let exists = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM \(quoted(destination)) WHERE id = ?"), arguments: [target]) ?? false
                guard exists || inserted.contains(InsertedRecord(entity: destination, id: target)) else {
                    // Why the app does not see it: merged into another of
                    // its unique key, deleted, or unknown.
                    let index = schema.entityIndex(named: destination)
                    let what: String
                    if let index, let survivor = try engine.survivor(entity: index, id: target), survivor != target {
                        what = "which was merged into \(destination) \(survivor), which has the same unique key (two devices made it apart): refer to \(survivor) instead"
                    } else if let index, try engine.loadState(index, target) != nil {
                        what = "which was deleted (or is hidden with a record it refers to, under a cascade rule)"
                    } else {
                        what = "which does not exist"
                    }
                    throw ChronicleError(.recordNotFound, "\(entity.name).\(fv.name) refers to \(destination) \(target), \(what)")
                }
            }
            values.append((i, fv.value))
        }
        var complete = change
        switch change.kind {
        case .insert:
            // A visible record may keep its state in its row (`CompactState`).
            let known = try visible || db.first("SELECT 1 FROM _chronicle_records WHERE entity = ? AND id = ?",
                                                { $0.bind(entityIndex); $0.bind(change.recordID) }, read: { _ in true }) ?? false
            guard !known else {
                throw ChronicleError(.recordExists, "\(entity.name) \(change.recordID) already exists (or existed: record IDs are never reused)")
            }
            for (i, field) in entity.fields.enumerated() where !seen.contains(i) {
                if let d = field.defaultValue {
                    values.append((i, d))
                } else if field.isOptional {
                    values.append((i, .null))
                } else {
                    throw ChronicleError(.missingValue, "\(entity.name).\(field.name) is required")
                }
            }
            values.sort { $0.field < $1.field }
            complete.values = values.map { FieldValue(entity.fields[$0.field].name, $0.value) }
        case .update:
            guard visible else { throw try notVisible(entityIndex, change.recordID, db, engine: engine) }
            guard !values.isEmpty else { throw ChronicleError(.invalidChange, "an update of \(entity.name) \(change.recordID) changes no field") }
        case .delete:
            guard visible else { throw try notVisible(entityIndex, change.recordID, db, engine: engine) }
            guard values.isEmpty else {
                throw ChronicleError(.invalidChange, "a delete of \(entity.name) \(change.recordID) carries values (\(change.values.map(\.name).joined(separator: ", "))); a delete has none")
            }
            try checkDeny(entity, change.recordID, db)
        }
        // An insert whose keys no record holds, visible or not, clashes with none.
        if change.kind == .insert, try entity.uniqueConstraints.isEmpty || engine.keysAreFree(entity: entityIndex, values: values) {
            return (entityIndex, values, complete, true)
        }
        if !deferUnique { try checkUnique(entity, change, values, db) }
        return (entityIndex, values, complete, false)
    }

    /// Whether `change` is an update that writes a field of one of its
    /// entity's unique keys.
    private func movesKey(_ change: Change) -> Bool {
        guard change.kind == .update, let e = schema.entity(named: change.entity), !e.uniqueConstraints.isEmpty else { return false }
        let keyFields = Set(e.uniqueConstraints.joined())
        return change.values.contains { keyFields.contains($0.name) }
    }

    /// After a save with key-moving updates is applied: a record that
    /// would share a unique key with another (one of the two then merged
    /// into the other, as two devices' records are) makes the save a
    /// `uniqueViolation`. The records to look at are those the updates
    /// moved, and any record the save made a duplicate of another (it was
    /// shown before, and is now merged into another record). Duplicates
    /// that a key change carries along (see `appliesToDuplicates`) stay
    /// what they were.
    private func checkKeysAfterSave(_ moves: [Change], deleted: Set<InsertedRecord>, engine: MergeEngine, _ db: Database) throws {
        var suspects: [(entity: Int, id: RecordID)] = []
        for change in moves {
            if let e = schema.entityIndex(named: change.entity) { suspects.append((e, change.recordID)) }
        }
        // Shown before the save: its first event in the save is not an insert.
        var first: [RecordID: RecordEvent.Kind] = [:]
        for event in engine.events where first[event.recordID] == nil { first[event.recordID] = event.kind }
        for event in engine.events where event.kind == .deleted && first[event.recordID] != .inserted {
            guard let e = schema.entityIndex(named: event.entity), !schema.entities[e].uniqueConstraints.isEmpty,
                  !deleted.contains(InsertedRecord(entity: event.entity, id: event.recordID)) else { continue }
            suspects.append((e, event.recordID))
        }
        for (e, id) in suspects {
            if try db.first(entitySQL[e].exists, { $0.bind(id) }, read: { _ in true }) ?? false { continue }
            guard let survivor = try engine.survivor(entity: e, id: id), survivor != id else { continue }
            let entity = schema.entities[e]
            let keys = entity.uniqueConstraints.map { $0.count == 1 ? $0[0] : "(\($0.joined(separator: ", ")))" }.joined(separator: " or ")
            throw ChronicleError(.uniqueViolation, "after this save \(entity.name) \(id) and \(survivor) would have the same \(keys), which is unique: "
                + "a save must leave each key on one record")
        }
    }

    /// The error for a change of a record the app does not see: one merged
    /// into another of the same unique key, deleted or hidden, or unknown.
    private func notVisible(_ entity: Int, _ id: RecordID, _ db: Database, engine: MergeEngine) throws -> ChronicleError {
        let name = schema.entities[entity].name
        if let survivor = try engine.survivor(entity: entity, id: id), survivor != id {
            return ChronicleError(.recordNotFound, "\(name) \(id) was merged into \(name) \(survivor), which has the same unique key (two devices made it apart): change \(survivor) instead")
        }
        if try engine.loadState(entity, id) != nil {
            return ChronicleError(.recordNotFound, "\(name) \(id) was deleted (or is hidden with a record it refers to, under a cascade rule)")
        }
        return ChronicleError(.recordNotFound, "no \(name) with ID \(id)")
    }

    /// Whether a change of a visible record also applies to the duplicates
    /// merged into it: a delete does, and so does an update that writes a
    /// field of a unique key (otherwise the duplicates, keeping the old key,
    /// would come back as a record of their own).
    private func appliesToDuplicates(_ change: Change, entity: Int, _ values: [(field: Int, value: Value)]) -> Bool {
        let e = schema.entities[entity]
        guard !e.uniqueConstraints.isEmpty else { return false }
        switch change.kind {
        case .insert: return false
        case .delete: return true
        case .update:
            let keyFields = Set(e.uniqueConstraints.joined())
            return values.contains { keyFields.contains(e.fields[$0.field].name) }
        }
    }

    /// A `deny` rule refuses to delete a record that visible records point
    /// at; so does a `nullify` rule of a required reference, which the
    /// delete would leave empty.
    private func checkDeny(_ entity: Entity, _ id: RecordID, _ db: Database) throws {
        for other in schema.entities {
            for field in other.fields {
                guard case .reference(let destination, let rule) = field.kind, destination == entity.name,
                      rule == .deny || (rule == .nullify && !field.isOptional) else { continue }
                if try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM \(quoted(other.name)) WHERE \(quoted(field.name)) = ? LIMIT 1"), arguments: [id]) ?? false {
                    let why = rule == .deny ? "whose delete rule is deny"
                        : "which is required: its delete rule, nullify, would leave it empty (delete or change those \(other.name) records first, or make the reference optional)"
                    throw ChronicleError(.deleteDenied, "\(entity.name) \(id) is referred to by \(other.name).\(field.name), \(why)")
                }
            }
        }
    }

    /// A local save may not create a duplicate of a visible record's unique
    /// key. The error names the key's values and the record that has them.
    private func checkUnique(_ entity: Entity, _ change: Change, _ values: [(field: Int, value: Value)], _ db: Database) throws {
        guard change.kind != .delete, !entity.uniqueConstraints.isEmpty else { return }
        // An insert gives every field (defaults filled in) of a record that does not exist.
        let current = change.kind == .insert ? nil
            : try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM \(quoted(entity.name)) WHERE id = ?"), arguments: [change.recordID])
        for key in entity.uniqueConstraints {
            var conditions: [String] = []
            var arguments: [DatabaseValue] = []
            var named: [String] = []
            for name in key {
                let i = entity.fieldIndex(named: name)!
                let given = values.first { $0.field == i }?.value
                let stored = (current?[name] as DatabaseValue?) ?? .null
                let value = given?.databaseValue ?? stored
                if value.isNull { conditions = []; break }
                conditions.append("\(quoted(name)) = ?")
                arguments.append(value)
                named.append("\(name) \(try given ?? Value(databaseValue: stored, field: entity.fields[i]))")
            }
            guard !conditions.isEmpty else { continue }
            arguments.append(change.recordID.databaseValue)
            let sql = "SELECT id FROM \(quoted(entity.name)) WHERE \(conditions.joined(separator: " AND ")) AND id != ? LIMIT 1"
            if let existing = try RecordID.fetchOne(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments)) {
                throw ChronicleError(.uniqueViolation, "\(entity.name) \(existing) already has \(named.joined(separator: " and ")); "
                    + "\(key.count == 1 ? "\(key[0]) is" : "(\(key.joined(separator: ", "))) are") unique, so the \(change.kind == .insert ? "new" : "updated") \(entity.name) \(change.recordID) cannot have it too")
            }
        }
    }

    /// After a local insert or update, the record must be visible (right
    /// after the change, or once the save is applied: a reference to a
    /// record the save inserts later): anything else means the save could
    /// not take effect as asked.
    private func isVisible(_ change: Change, entity: Int, _ db: Database) throws -> Bool {
        guard change.kind != .delete else { return true }
        return try db.first(entitySQL[entity].exists, { $0.bind(change.recordID) }, read: { _ in true }) ?? false
    }

    /// The last value of this snapshot's hybrid clock: the larger of the
    /// clock `_chronicle_identity` keeps (`hlc`) and the clock of this
    /// device's last save, which its vector row keeps. A save writes only
    /// the latter (one page less per commit); whatever else moves the clock
    /// (an import, a baseline, carried saves, `observe`) writes the former.
    /// The snapshot's device never changes, so its row only ever holds a
    /// clock this snapshot saw.
    func lastClock(_ db: Database) throws -> HybridTimestamp {
        max(try vectorEntry(db, deviceID).clock, try storedClock(db))
    }

    /// The clock `_chronicle_identity` keeps (see ``lastClock(_:)``).
    func storedClock(_ db: Database) throws -> HybridTimestamp {
        HybridTimestamp(rawValue: UInt64(bitPattern: try db.first("SELECT value FROM _chronicle_identity WHERE key = 'hlc'", { _ in },
                                                                  read: { sqlite3_column_int64($0, 0) }) ?? 0))
    }

    /// A device's row of the vector: the last sequence applied of it and
    /// that log's clock (zeros before any).
    func vectorEntry(_ db: Database, _ device: DeviceID) throws -> (sequence: UInt64, clock: HybridTimestamp) {
        try db.first("SELECT sequence, clock FROM _chronicle_vector WHERE device = ?", { $0.bind(device.rawValue) }, read: {
            (UInt64(sqlite3_column_int64($0, 0)), HybridTimestamp(rawValue: UInt64(bitPattern: sqlite3_column_int64($0, 1))))
        }) ?? (0, .zero)
    }

    func appliedSequence(_ db: Database, _ device: DeviceID) throws -> UInt64 {
        try vectorEntry(db, device).sequence
    }

    func setApplied(_ db: Database, _ device: DeviceID, sequence: UInt64, clock: HybridTimestamp) throws {
        try db.run(db.cachedStatement(sql: "INSERT OR REPLACE INTO _chronicle_vector (device, sequence, clock) VALUES (?, ?, ?)").sqliteStatement) {
            $0.bind(device.rawValue); $0.bind(Int64(sequence)); $0.bind(Int64(bitPattern: clock.rawValue))
        }
    }
}
