import CSQLite
import ChronicleCore
import Foundation
import GRDB

/// Applies changes to a snapshot inside one SQLite transaction.
///
/// Every change is first merged into the record's ``RecordState`` (kept in
/// `_chronicle_records`); what the entity tables show is then recomputed as a
/// pure function of those states (see `docs/merge.md`):
///
/// 1. A record is **live** if an insert was seen and some write is newer than
///    its newest delete.
/// 2. A reference **resolves** to its target if the target is visible (or to
///    the survivor the target was merged into), otherwise to nothing: a
///    `cascade` reference then hides the record, `nullify` and `deny` ones
///    show NULL.
/// 3. Records that are otherwise visible and share a unique key are
///    **de-duplicated**, in ID order: a record is visible unless a smaller
///    visible record shares one of its keys; then it is a duplicate, and
///    references to it resolve to its survivor, the smallest visible record
///    sharing a key with it.
///
/// Because each state is a join of everything applied and the view is a
/// function of the states, any order of the same logs gives the same tables.
/// What makes the incremental recomputation reach that function: a record's
/// row and resolution read only its own state, what its references resolve
/// to, and the keys and visibility of the records sharing a key with it. So
/// whenever a record's keys or visibility change, everything that read them
/// is scheduled: the records sharing an old or a new key with it, the
/// records referring to any of those (found by raw target in
/// `_chronicle_refs`, hidden targets included), and its own referrers.
struct MergeEngine {
    let db: Database
    let schema: Schema
    let origin: RecordEvent.Origin
    private(set) var events: [RecordEvent] = []
    private var pending: [(Int, RecordID)] = []
    private var pendingSet: Set<RecordKey> = []
    /// States written in this transaction, so a refresh does not read them back.
    private var stateCache: [RecordKey: RecordState] = [:]
    /// Records that had no state (so no row) before this transaction.
    private var created: Set<RecordKey> = []
    /// Created records not refreshed yet: no row, no stored keys.
    private var untouched: Set<RecordKey> = []
    /// New records whose keys no other record held when a save checked them.
    private var alone: Set<RecordKey> = []
    /// Per entity, the largest record ID `_chronicle_records` held a state
    /// for when this engine first looked (zero if none). Record IDs are
    /// time-ordered, so a new record's ID is almost always larger, and its
    /// compact insert can skip looking for a state. States this engine
    /// writes need no bound: `apply` finds them in `stateCache` first.
    private var largestStateID: [RecordID?]
    /// Per entity, the largest ID of any row when this engine first looked,
    /// raised by the compact rows it writes: with `largestStateID`, what
    /// tells that a record of an entity with keys or references is new
    /// without looking it up.
    private var largestRowID: [RecordID?]
    /// New records of entities with keys or references whose state is in
    /// `stateCache` only: their first refresh stores it, compact in their
    /// row when it can be (see `refresh`), in `_chronicle_records` otherwise.
    private var deferred: Set<RecordKey> = []
    /// Per entity, whether `_chronicle_keys` held keys of it when this
    /// engine first looked (see `mayHoldStoredKeys`).
    private var storedKeysByEntity: [Int: Bool] = [:]
    /// Set once this engine stores a key in `_chronicle_keys`.
    private let keysStored = Flag()
    /// The devices' numbers that compact versions hold, as this
    /// transaction knows them.
    private let devices: DeviceNumbers
    /// The statements of `updateCompact`, by entity and fields set.
    private var updateStatements: [UpdateKey: Statement] = [:]
    /// Whether the last `apply` was an update that kept the record's state
    /// in its row (`updateCompact`): the record is as visible as before.
    private(set) var keptInRow = false

    /// A flag a non-mutating method can set.
    private final class Flag {
        var value = false
    }

    /// The most records one apply may recompute: a bound, not an expectation.
    static let maxRefreshes = 10_000_000

    struct RecordKey: Hashable {
        let entity: Int
        let id: RecordID
    }

    let sql: [EntitySQL]
    private let statements: StatementSlots

    init(db: Database, schema: Schema, sql: [EntitySQL], origin: RecordEvent.Origin) {
        self.db = db
        self.schema = schema
        self.sql = sql
        self.origin = origin
        var next = Slot.entityBase + Slot.perEntity * sql.count
        var keyGroupSlot: [Int] = [], clashSlot: [Int] = [], referrerSlot: [Int] = []
        for entity in sql {
            keyGroupSlot.append(next)
            next += entity.compactKeyGroup.count
            clashSlot.append(next)
            next += entity.clashing.count
            referrerSlot.append(next)
            next += entity.compactReferrers.count
        }
        self.keyGroupSlot = keyGroupSlot
        self.clashSlot = clashSlot
        self.referrerSlot = referrerSlot
        self.plainFields = schema.entities.map { e in
            let keyFields = Set(e.uniqueConstraints.joined().compactMap { e.fieldIndex(named: $0) })
            return e.fields.indices.filter { i in
                if keyFields.contains(i) { return false }
                if case .reference = e.fields[i].kind { return false }
                return true
            }
        }
        self.referenceTargets = schema.entities.map { e in
            e.fields.map { field -> Int? in
                if case .reference(let destination, _) = field.kind { return schema.entityIndex(named: destination) } else { return nil }
            }
        }
        // An entity is on a cycle if its references lead back to it.
        let edges = referenceTargets.map { $0.compactMap { $0 } }
        self.onCycle = schema.entities.indices.map { start in
            var seen = Set<Int>(), stack = edges[start]
            while let next = stack.popLast() {
                if next == start { return true }
                if seen.insert(next).inserted { stack += edges[next] }
            }
            return false
        }
        self.statements = StatementSlots(count: next)
        devices = DeviceNumbers(db)
        largestStateID = Array(repeating: nil, count: sql.count)
        largestRowID = Array(repeating: nil, count: sql.count)
    }

    /// Per entity, the first slot of its `compactKeyGroup`, `clashing` and
    /// `compactReferrers` statements.
    private let keyGroupSlot: [Int]
    private let clashSlot: [Int]
    private let referrerSlot: [Int]
    /// Per entity, whether its references can lead back to it. What a
    /// reference to a record of such an entity resolves to depends on the
    /// record the resolution started from (a reference back into it
    /// resolves to nothing), so `resolve` takes no shortcut for them.
    private let onCycle: [Bool]
    /// Per entity, per field: the entity a reference field points at.
    private let referenceTargets: [[Int?]]
    /// Per entity, the fields that are neither references nor part of a
    /// unique key: those a survivor shows the newest value of among its
    /// duplicates.
    private let plainFields: [[Int]]

    /// Statement slots: the fixed ones, then ten per entity, then each
    /// entity's per-constraint and per-referrer ones.
    private enum Slot {
        static let selectState = 0, knownState = 1, replaceState = 2, deleteRef = 3, insertRef = 4, largestStateID = 5
        static let keyGroup = 6, storedKeys = 7, insertKey = 8, deleteKeys = 9, referrers = 10, anyStoredKey = 11
        static let entityBase = 12, perEntity = 10
        static func selectRow(_ entity: Int) -> Int { entityBase + perEntity * entity }
        static func deleteRow(_ entity: Int) -> Int { entityBase + perEntity * entity + 1 }
        static func insertRow(_ entity: Int) -> Int { entityBase + perEntity * entity + 2 }
        static func insertCompact(_ entity: Int) -> Int { entityBase + perEntity * entity + 3 }
        static func selectCompact(_ entity: Int) -> Int { entityBase + perEntity * entity + 4 }
        static func clearCompact(_ entity: Int) -> Int { entityBase + perEntity * entity + 5 }
        static func insertCompactFresh(_ entity: Int) -> Int { entityBase + perEntity * entity + 6 }
        static func exists(_ entity: Int) -> Int { entityBase + perEntity * entity + 7 }
        static func insertRowCompact(_ entity: Int) -> Int { entityBase + perEntity * entity + 8 }
        static func largestRowID(_ entity: Int) -> Int { entityBase + perEntity * entity + 9 }
    }

    private func statement(_ slot: Int, _ sql: @autoclosure () -> String) throws -> OpaquePointer {
        try statements.get(slot, db, sql())
    }

    // MARK: Merging

    /// Merges one change with `version` into its record's state and schedules
    /// the record for recomputation.
    mutating func apply(_ kind: ChangeKind, entity: Int, id: RecordID, values: [(field: Int, value: Value)], version: Version) throws {
        keptInRow = false
        let key = RecordKey(entity: entity, id: id)
        func merged(_ state: RecordState) -> RecordState {
            var state = state
            switch kind {
            case .insert:
                state.inserted = true
                if state.fields.count == 0 { state.fields.reserveCapacity(values.count) }
                for v in values { state.write(field: v.field, v.value, version) }
            case .update:
                for v in values { state.write(field: v.field, v.value, version) }
            case .delete:
                state.delete(version)
            }
            return state
        }
        var loaded = stateCache[key]
        if let state = loaded, deferred.contains(key) {
            // A new record whose state is still only in memory: its
            // refresh, still pending, stores what it ends as.
            stateCache[key] = merged(state)
            schedule(entity, id)
            return
        }
        if loaded == nil && kind == .insert {
            if sql[entity].isIndependent {
                // An independent record's row is its values: a new record
                // whose every field this insert wrote is stored as its row
                // plus the one version (see `CompactState`), one B-tree write
                // instead of a state and a row.
                if CompactState.holds(insert: values, schema.entities[entity]),
                   try insertCompact(entity, id, version, { binder in for v in values { binder.bind(v.value) } }) {
                    return
                }
            } else if try isNew(entity, id) {
                // An insert almost always creates its record (IDs are
                // time-ordered, so no lookup tells): its refresh decides
                // where its state goes.
                deferNew(entity, id, merged(RecordState()))
                return
            }
        }
        if loaded == nil, kind == .update, try updateCompact(entity, id, values: values, version: version) {
            keptInRow = true
            return
        }
        var wasCompact = false
        if loaded == nil { (loaded, wasCompact) = try loadStateAndForm(entity, id) }
        if loaded == nil {
            if !sql[entity].isIndependent {
                let state = merged(RecordState())
                if state != RecordState() { deferNew(entity, id, state) }
                return
            }
            created.insert(key)
            untouched.insert(key)
        }
        let before = loaded ?? RecordState()
        let state = merged(before)
        guard state != before else { return }
        if wasCompact { try expandIndexes(entity, id, before, row: nil) }
        try saveState(entity, id, state, previous: before)
        stateCache[key] = state
        schedule(entity, id)
    }

    /// Applies an update of attributes that are in no unique key (and are no
    /// references) to a record whose state is compact and which shares no
    /// key with another record, keeping the state in the row: its row shows
    /// the state's values before and after, now with the version each field
    /// has (`CompactState.writeVersions`). Its keys, references and
    /// visibility stay as they were, and nothing else reads the values that
    /// changed (see `refresh`), so no record needs a refresh, its own
    /// included. Returns false, having written nothing, when the update or
    /// the record is not of that kind: the general path applies it then.
    private mutating func updateCompact(_ entity: Int, _ id: RecordID, values: [(field: Int, value: Value)], version: Version) throws -> Bool {
        let e = schema.entities[entity]
        for v in values {
            guard plainFields[entity].contains(v.field), CompactState.readsBackExactly(v.value, e.fields[v.field]) else { return false }
        }
        // A record sharing a key with others shows their newer values too
        // (`takeNewerValuesOfDuplicates`): the general path decides its row.
        // Only records whose keys `_chronicle_keys` holds can share this
        // one's: a compact row is visible, and the unique index lets one
        // visible row hold a key.
        let checkKeys = try !e.uniqueConstraints.isEmpty && mayHoldStoredKeys(entity)
        let count = Int32(e.fields.count)
        guard let (before, old, row) = try db.first(statement(Slot.selectCompact(entity), sql[entity].selectCompact), { $0.bind(id) }, read: { statement in
            let (base, others) = try columnBytes(statement, count).withUnsafeBytes { try CompactState.versions($0, e, devices: devices) }
            var versions = Array(repeating: base, count: e.fields.count)
            for other in others { versions[other.field] = other.version }
            return (versions, values.map { columnValue(statement, Int32($0.field)) },
                    checkKeys ? (0..<count).map { columnValue(statement, $0) } : [])
        }) else { return false }
        if checkKeys {
            for (c, key) in keys(of: entity, row: row) {
                let shared = try db.first(statement(Slot.keyGroup, "SELECT id FROM _chronicle_keys WHERE entity = ? AND constraint_index = ? AND key = ?"),
                                          { $0.bind(entity); $0.bind(c); $0.bind(key) }, read: { _ in true }) ?? false
                if shared { return false }
            }
        }
        // Each field keeps the newer of its version and the update's (as
        // `RecordState.write`).
        var versions = before
        var changed: [(field: Int, value: Value)] = []
        var rowChanges = false
        for (i, v) in values.enumerated() where versions[v.field] < version {
            versions[v.field] = version
            if let at = changed.firstIndex(where: { $0.field == v.field }) { changed[at].value = v.value } else { changed.append(v) }
            if !Self.identical([old[i]], [v.value.databaseValue]) { rowChanges = true }
        }
        guard !changed.isEmpty else { return true }
        changed.sort { $0.field < $1.field }
        // The version most fields have is the blob's base; the others follow it.
        var tally: [(version: Version, fields: Int)] = []
        for v in versions {
            if let i = tally.firstIndex(where: { $0.version == v }) { tally[i].fields += 1 } else { tally.append((v, 1)) }
        }
        let base = tally.max { $0.fields < $1.fields }!.version
        let blob: [UInt8]
        if tally.count == 1 {
            blob = Array(try compactVersionBytes(base))
        } else {
            var others: [(field: Int, version: Version, number: Int64)] = []
            for (field, v) in versions.enumerated() where v != base { others.append((field, v, try devices.number(of: v.device))) }
            blob = CompactState.writeVersions(base: (base, try devices.number(of: base.device)), others: others)
        }
        let key = UpdateKey(entity: entity, fields: changed.map(\.field))
        let update: Statement
        if let known = updateStatements[key] {
            update = known
        } else {
            let table = quoted(SnapshotTables.rows(e.name))
            update = try db.cachedStatement(sql: "UPDATE \(table) SET \(changed.map { "\(quoted(e.fields[$0.field].name)) = ?" }.joined(separator: ", ")), \(CompactState.column) = ? WHERE id = ?")
            updateStatements[key] = update
        }
        try db.run(update.sqliteStatement) { binder in
            for v in changed { binder.bind(v.value) }
            binder.bind(blob)
            binder.bind(id)
        }
        guard sqlite3_changes(db.sqliteConnection) == 1 else {
            throw ChronicleError(.databaseCorrupt, "\(e.name) \(id): its compact row could not be updated")
        }
        if rowChanges { events.append(RecordEvent(entity: e.name, recordID: id, kind: .updated, origin: origin)) }
        return true
    }

    /// An entity and the fields an update statement of `updateCompact` sets.
    private struct UpdateKey: Hashable {
        let entity: Int
        let fields: [Int]
    }

    /// Keeps a new record's state in memory until its refresh (see `deferred`).
    private mutating func deferNew(_ entity: Int, _ id: RecordID, _ state: RecordState) {
        let key = RecordKey(entity: entity, id: id)
        created.insert(key)
        untouched.insert(key)
        deferred.insert(key)
        stateCache[key] = state
        schedule(entity, id)
    }

    /// Whether no record of `entity` has `id` yet (the caller checked
    /// `stateCache`): it is above every ID holding a state and every row's
    /// (IDs are time-ordered: most new records' are), or neither
    /// `_chronicle_records` nor the entity's rows hold it.
    private mutating func isNew(_ entity: Int, _ id: RecordID) throws -> Bool {
        let largest: RecordID
        if let known = largestRowID[entity] {
            largest = known
        } else {
            largest = try largestID(statement(Slot.largestRowID(entity), sql[entity].largestRowID), bind: { _ in })
            largestRowID[entity] = largest
        }
        if try id > largestStateID(entity), id > largest { return true }
        let hasState = try db.first(statement(Slot.selectState, "SELECT state FROM _chronicle_records WHERE entity = ? AND id = ?"),
                                    { $0.bind(entity); $0.bind(id) }, read: { _ in true }) ?? false
        return try !hasState && !isVisible(entity, id)
    }

    /// Joins a whole record state (a baseline's) into the record's state and
    /// schedules the record for recomputation. A new record of an
    /// independent entity whose one version wrote every field is stored
    /// compact, as its insert would have been.
    mutating func merge(_ incoming: RecordState, entity: Int, id: RecordID) throws {
        let key = RecordKey(entity: entity, id: id)
        var loaded = stateCache[key]
        if var state = loaded, deferred.contains(key) {
            state.join(incoming)
            stateCache[key] = state
            schedule(entity, id)
            return
        }
        if loaded == nil, sql[entity].isIndependent, let version = incoming.soleVersion {
            let values = incoming.fields.entries.map { (field: $0.index, value: $0.value) }
            if CompactState.holds(insert: values, schema.entities[entity]),
               try insertCompact(entity, id, version, { binder in for v in values { binder.bind(v.value) } }) {
                return
            }
        }
        var wasCompact = false
        if loaded == nil { (loaded, wasCompact) = try loadStateAndForm(entity, id) }
        if loaded == nil {
            if !sql[entity].isIndependent {
                var state = RecordState()
                state.join(incoming)
                if state != RecordState() { deferNew(entity, id, state) }
                return
            }
            created.insert(key)
            untouched.insert(key)
        }
        let before = loaded ?? RecordState()
        var state = before
        state.join(incoming)
        guard state != before else { return }
        if wasCompact { try expandIndexes(entity, id, before, row: nil) }
        try saveState(entity, id, state, previous: before)
        stateCache[key] = state
        schedule(entity, id)
    }

    /// Stores an insert that is still in its log body's encoding as a new
    /// record in compact form (see `CompactState`), binding its values
    /// straight from the body: most changes of a replay take this path, and
    /// building `Value`s and a state for them cost more than SQLite's insert.
    /// Returns false, writing nothing, if the record has a state or the
    /// insert has no compact form: then `apply` it.
    mutating func insertCompact(entity: Int, id: RecordID, raw: [(field: Int, value: RawValue)], version: Version) throws -> Bool {
        // (Most replays of independent records write no state at all.)
        guard stateCache.isEmpty || stateCache[RecordKey(entity: entity, id: id)] == nil else { return false }
        guard sql[entity].isIndependent else { return try insertNew(entity, id, raw: raw, version) }
        guard CompactState.holds(insert: raw, schema.entities[entity]) else { return false }
        return try insertCompact(entity, id, version) { binder in for v in raw { binder.bind(v.value) } }
    }

    /// `insertCompact` for an entity with unique keys or references: the
    /// first refresh of a new record done at once, from the log body,
    /// in the case nearly every insert of a replay is in. The record is new
    /// (its ID above every stored one), the insert writes every field with
    /// values their columns give back exactly, each reference points at a
    /// record that has a row (visible: `resolve`'s shortcut; its entity on
    /// no reference cycle), and no record holds any of its keys. Then its
    /// row shows exactly its values and is its state (compact), and only
    /// the records that referred to it before it existed need a refresh.
    /// Anything else returns false, writing nothing: then `apply` it.
    ///
    /// Done before the log's other changes settle, this is a refresh in
    /// another order: what it read (rows, keys) is what a refresh reads,
    /// and whoever changes those later schedules the records that read them.
    private mutating func insertNew(_ entity: Int, _ id: RecordID, raw: [(field: Int, value: RawValue)], _ version: Version) throws -> Bool {
        let targets = referenceTargets[entity]
        guard raw.count == targets.count, try isNew(entity, id) else { return false }
        for (i, v) in raw.enumerated() {
            guard v.field == i else { return false }
            switch v.value.tag {
            case 8, 10: return false  // decimals and transformables are stored as text
            case 11:
                guard let target = targets[i], !onCycle[target], v.value.payload.count == 16,
                      try isVisible(target, RecordID(bytes: v.value.payload)) else { return false }
            default: break
            }
        }
        for (c, fields) in sql[entity].constraintFields.enumerated() {
            let values = fields.map { raw[$0].value.value.databaseValue }
            guard !values.contains(where: \.isNull) else { continue }
            guard try keyGroup(entity, c, keyBytes(values), values: values).isEmpty else { return false }
        }
        try insertRowCompact(entity, id, version) { binder in for v in raw { binder.bind(v.value) } }
        return true
    }

    /// `insertNew` for a local save's insert, which the save found new (no
    /// row and no state hold its ID) with keys no record holds
    /// (``keysAreFree(entity:values:)``): stored at once as its compact row,
    /// as a replayed insert is, when it gives every field in order with
    /// values their columns give back exactly, and each reference points at
    /// a record that has a row (its entity on no reference cycle). Returns
    /// false, writing nothing, otherwise: then `apply` it. Independent
    /// entities take `apply`'s own compact path.
    mutating func insertNewLocal(_ entity: Int, _ id: RecordID, values: [(field: Int, value: Value)], version: Version) throws -> Bool {
        guard !sql[entity].isIndependent, stateCache[RecordKey(entity: entity, id: id)] == nil,
              CompactState.holds(insert: values, schema.entities[entity]) else { return false }
        let targets = referenceTargets[entity]
        for (i, v) in values.enumerated() {
            guard case .reference(let target) = v.value else { continue }
            guard let t = targets[i], !onCycle[t], try isVisible(t, target) else { return false }
        }
        try insertRowCompact(entity, id, version) { binder in for v in values { binder.bind(v.value) } }
        return true
    }

    /// ``insertNewLocal(_:_:values:version:)`` for a record given as one
    /// value per field, in field order (an ``InsertBatch`` row), whose
    /// fields hold no reference: stores it at once as its compact row
    /// when its ID is unknown (neither visible nor holding a state) and no
    /// record holds any of its unique keys. Returns false, having changed
    /// nothing, when any of that does not hold: the save then applies
    /// the record as an insert change, which says why it cannot be saved
    /// or stores it with its full state.
    mutating func insertNewLocal(_ entity: Int, _ id: RecordID, row: ArraySlice<Value>, version: Version) throws -> Bool {
        let e = schema.entities[entity]
        guard !sql[entity].isIndependent, row.count == e.fields.count,
              stateCache[RecordKey(entity: entity, id: id)] == nil else { return false }
        for (i, value) in zip(e.fields.indices, row) {
            guard referenceTargets[entity][i] == nil, CompactState.readsBackExactly(value, e.fields[i]) else { return false }
        }
        // No state: IDs are time-ordered, so a new one is almost always
        // past the largest state's, and only the others are looked up.
        guard try id > largestStateID(entity)
                || db.first(statement(Slot.knownState, "SELECT 1 FROM _chronicle_records WHERE entity = ? AND id = ?"),
                            { $0.bind(entity); $0.bind(id) }, read: { _ in true }) == nil
        else { return false }
        // Keys held by records with a full state are in `_chronicle_keys`
        // (looked up only when the entity has any there); those a row shows
        // are the row table's unique indexes', which the insert meets.
        if try mayHoldStoredKeys(entity) {
            for (c, fields) in sql[entity].constraintFields.enumerated() {
                var values: [DatabaseValue] = []
                values.reserveCapacity(fields.count)
                for f in fields { values.append(row[row.startIndex + f].databaseValue) }
                guard !values.contains(where: \.isNull) else { continue }
                guard try db.first(statement(Slot.keyGroup, "SELECT id FROM _chronicle_keys WHERE entity = ? AND constraint_index = ? AND key = ?"),
                                   { $0.bind(entity); $0.bind(c); $0.bind(keyBytes(values)) }, read: { _ in true }) == nil
                else { return false }
            }
        }
        // A row with its ID (a visible record) or one of its keys makes
        // the insert do nothing.
        let versionBytes = try compactVersionBytes(version)
        try db.run(statement(Slot.insertCompactFresh(entity), sql[entity].insertCompactFresh)) { binder in
            binder.bind(id)
            for value in row { binder.bind(value) }
            binder.bindInPlace(versionBytes)
        }
        guard sqlite3_changes(db.sqliteConnection) == 1 else { return false }
        if let largest = largestRowID[entity], id > largest { largestRowID[entity] = id }
        events.append(RecordEvent(entity: e.name, recordID: id, kind: .inserted, origin: origin))
        if sql[entity].isReferenced { try scheduleReferrers(entity, id) }
        return true
    }

    /// Whether `_chronicle_keys` may hold keys of `entity`: looked up once
    /// per engine, and true from the first key this engine stores.
    private mutating func mayHoldStoredKeys(_ entity: Int) throws -> Bool {
        if keysStored.value { return true }
        if let known = storedKeysByEntity[entity] { return known }
        let held = try db.first(statement(Slot.anyStoredKey, "SELECT 1 FROM _chronicle_keys WHERE entity = ? LIMIT 1"),
                                { $0.bind(entity) }, read: { _ in true }) ?? false
        storedKeysByEntity[entity] = held
        return held
    }

    /// Recomputes every scheduled record and what depends on it.
    mutating func settle() throws {
        var refreshes = 0
        while let (entity, id) = pending.popLast() {
            pendingSet.remove(RecordKey(entity: entity, id: id))
            refreshes += 1
            guard refreshes <= Self.maxRefreshes else {
                throw ChronicleError(.applyFailed, "recomputing the view touched more than \(Self.maxRefreshes) records")
            }
            try refresh(entity, id)
        }
    }

    /// Recomputes the row of every record of `entities` (by default, every
    /// entity that is not independent: those keep every state in
    /// `_chronicle_records`), a batch at a time: brings a snapshot whose
    /// view an older rule or format computed to what this version computes
    /// from the same states.
    mutating func recomputeView(entities: [Int]? = nil, batch: Int = 100_000) throws {
        for entity in entities ?? sql.indices.filter({ !sql[$0].isIndependent }) {
            let ids = try RecordID.fetchAll(db.cachedStatement(sql: """
                SELECT id FROM _chronicle_records WHERE entity = ?
                UNION SELECT id FROM \(quoted(SnapshotTables.rows(schema.entities[entity].name))) WHERE \(CompactState.column) IS NOT NULL
                ORDER BY id
                """), arguments: [entity])
            for start in stride(from: 0, to: ids.count, by: batch) {
                for id in ids[start..<min(ids.count, start + batch)] { schedule(entity, id) }
                try settle()
                events.removeAll()
            }
        }
    }

    private mutating func schedule(_ entity: Int, _ id: RecordID) {
        if pendingSet.insert(RecordKey(entity: entity, id: id)).inserted {
            pending.append((entity, id))
        }
    }

    // MARK: The view

    /// Recomputes one record's row and keys; if its keys or its visibility
    /// changed, schedules what read them.
    private mutating func refresh(_ entity: Int, _ id: RecordID) throws {
        let e = schema.entities[entity]
        var visiting: Set<RecordKey> = []
        // The row before de-duplication; visible if this record survives it.
        let pre = try preShadowRow(entity, id, &visiting)
        let key = RecordKey(entity: entity, id: id)
        // A record new in this transaction, refreshed for the first time,
        // has no row and no stored keys. If no other record holds any of its
        // keys, it is visible, clashes with nothing, and nothing reads its
        // keys yet: store its keys and row, and only its referrers (records
        // that named it before it existed) need a refresh. Most inserts take
        // this path: one lookup per key instead of a lookup, a clash check
        // and a dependents scan.
        let first = untouched.remove(key) != nil
        let checked = alone.remove(key) != nil
        let isDeferred = deferred.remove(key) != nil
        // The records holding each of its keys now, read once for the
        // checks below (nothing this refresh writes before them changes them).
        let newKeys = pre.map { keys(of: entity, row: $0) } ?? [:]
        var groups: [Int: [RecordID]]?
        if first, let pre {
            var alone = true
            if !checked {
                let found = try keyGroups(entity, newKeys, row: pre)
                alone = found.values.allSatisfy(\.isEmpty)
                groups = found
            }
            if alone {
                // A row that shows exactly what one insert wrote (every
                // reference resolving to its own target) is the state: keep
                // it there, with the version, and write nothing else. Its
                // keys and references are read from the row (`keyGroup`,
                // `scheduleReferrers`) until a change moves the state out.
                if isDeferred, let version = compactVersion(entity, stateCache[key]!, row: pre) {
                    // The row holds the state now; later reads find it there.
                    stateCache[key] = nil
                    created.remove(key)
                    try insertRowCompact(entity, id, version) { binder in for value in pre { binder.bind(value) } }
                    return
                }
                if isDeferred { try storeDeferred(entity, id) }
                for (c, k) in newKeys {
                    try insertKey(entity, c, k, id)
                }
                try write(entity, id, pre, replacing: false)
                created.remove(key)
                events.append(RecordEvent(entity: e.name, recordID: id, kind: .inserted, origin: origin))
                if sql[entity].isReferenced { try scheduleReferrers(entity, id) }
                return
            }
        }
        if isDeferred { try storeDeferred(entity, id) }
        let members = try pre.map { try groups ?? keyGroups(entity, newKeys, row: $0) } ?? [:]
        var desired = try pre.flatMap { try survivor(entity, id, groups: members) == id ? $0 : nil }
        if var row = desired, !e.uniqueConstraints.isEmpty {
            try takeNewerValuesOfDuplicates(entity, id, groups: members, into: &row)
            desired = row
        } else if pre != nil, desired == nil {
            // A duplicate: its survivor shows its newer values, so its
            // survivor (a visible record of its key groups) reads its state.
            for group in members.values {
                for other in group where other < id {
                    if try isVisible(entity, other) { schedule(entity, other) }
                }
            }
        }
        // A record first seen in this transaction has no row yet, unless an
        // earlier refresh in it wrote one.
        let stored = created.contains(key) ? nil : try currentRow(entity, id)
        let current = stored?.row
        // A compact state's keys are its row's.
        let oldKeys = first ? [:] : stored?.compact == true ? keys(of: entity, row: current!) : try keysInTable(entity, id)
        let rowChanges = !Self.identical(desired, current)
        if let current, stored?.compact == true, newKeys != oldKeys || rowChanges {
            // The row is about to stop showing exactly the state: move the
            // state out of it first.
            try materialize(entity, id, row: current)
        }
        if newKeys != oldKeys {
            try db.run(statement(Slot.deleteKeys, "DELETE FROM _chronicle_keys WHERE entity = ? AND id = ?")) { $0.bind(entity); $0.bind(id) }
            for (c, key) in newKeys {
                try insertKey(entity, c, key, id)
            }
        }
        if rowChanges {
            if let desired, !e.uniqueConstraints.isEmpty { try evictClashes(entity, id, row: desired, current: current) }
            try write(entity, id, desired, replacing: current != nil)
            if desired != nil { created.remove(key) }
            let kind: RecordEvent.Kind = desired == nil ? .deleted : (current == nil ? .inserted : .updated)
            events.append(RecordEvent(entity: e.name, recordID: id, kind: kind, origin: origin))
        }
        // Other values of a row are read by nothing else: referrers show the
        // ID a reference resolves to, which only keys and visibility decide.
        guard newKeys != oldKeys || (desired == nil) != (current == nil) else {
            // Hidden before and after, with no row: but a referrer refreshed
            // earlier in this transaction may have read it visible from its
            // state then (before a change that hides it, such as its
            // folder's delete, was applied), and no row change tells it.
            if desired == nil, current == nil, sql[entity].isReferenced { try scheduleReferrers(entity, id) }
            return
        }
        // Both the groups it left and the groups it joined (a changed key
        // of one constraint is in both).
        var touched = oldKeys.map { ($0.key, $0.value) }
        for (c, key) in newKeys where oldKeys[c] != key { touched.append((c, key)) }
        try scheduleDependents(entity, id, groups: touched)
    }

    /// A visible record and the duplicates merged into it are one record to
    /// the app: for each field that is neither a reference nor part of a
    /// unique key, the row shows the newest value any of them holds (by
    /// version, as the merge of one record's writes does). So an update
    /// made to a record on a device that had not seen its duplicate is not
    /// hidden when the two meet. Key fields stay the survivor's (they
    /// decide the groups), and references too (what they resolve to is read
    /// by others).
    private func takeNewerValuesOfDuplicates(_ entity: Int, _ id: RecordID, groups: [Int: [RecordID]], into row: inout [DatabaseValue]) throws {
        let plain = plainFields[entity]
        guard !plain.isEmpty else { return }
        // Only larger records can be merged into this one: a record's
        // survivor is the smallest visible record sharing a key with it.
        var members = Set<RecordID>()
        for group in groups.values {
            for other in group where other > id { members.insert(other) }
        }
        guard !members.isEmpty, let own = try loadState(entity, id) else { return }
        var newest = plain.map { own.fields[$0]?.version }
        for other in members.sorted() {
            var visiting: Set<RecordKey> = []
            guard try resolve(entity, other, &visiting) == id, let state = try loadState(entity, other) else { continue }
            for (n, i) in plain.enumerated() {
                guard let field = state.fields[i], newest[n].map({ field.version > $0 }) ?? true else { continue }
                newest[n] = field.version
                row[i] = field.value.databaseValue
            }
        }
    }

    /// Schedules what reads a record's keys and visibility: the records
    /// in any of its key `groups` (their visibility and survivor), the
    /// records referring to those (hidden ones included: `_chronicle_refs`
    /// holds raw targets), and the record's own referrers.
    private mutating func scheduleDependents(_ entity: Int, _ id: RecordID, groups: [(Int, [UInt8])]) throws {
        for (c, key) in groups {
            for other in try keyGroup(entity, c, key) where other != id {
                schedule(entity, other)
                if sql[entity].isReferenced { try scheduleReferrers(entity, other) }
            }
        }
        if sql[entity].isReferenced { try scheduleReferrers(entity, id) }
    }

    /// Removes visible rows that share a unique key with the row about to be
    /// written. They can only be records with larger IDs whose own refresh is
    /// still pending (a smaller visible one would have hidden this record),
    /// so they are duplicates now: hide them, so the unique index never sees
    /// two of them, and schedule them and what read their visibility.
    /// `current` is the record's row now: a key it shows already clashes
    /// with nothing (the unique index holds it).
    private mutating func evictClashes(_ entity: Int, _ id: RecordID, row: [DatabaseValue], current: [DatabaseValue]?) throws {
        let e = schema.entities[entity]
        for (c, fields) in sql[entity].constraintFields.enumerated() {
            guard !fields.contains(where: { row[$0].isNull }) else { continue }
            if let current, fields.allSatisfy({ row[$0] == current[$0] }) { continue }
            let clashing = try db.all(statement(clashSlot[entity] + c, sql[entity].clashing[c]), { binder in
                for i in fields { binder.bind(row[i]) }
                binder.bind(id)
            }) { try columnRecordID($0, 0) }
            for other in clashing {
                if let stored = try currentRow(entity, other), stored.compact { try materialize(entity, other, row: stored.row) }
                try db.run(statement(Slot.deleteRow(entity), sql[entity].deleteRow)) { $0.bind(other) }
                events.append(RecordEvent(entity: e.name, recordID: other, kind: .deleted, origin: origin))
                schedule(entity, other)
                try scheduleDependents(entity, other, groups: try storedKeys(entity, other).map { ($0.key, $0.value) })
            }
        }
    }

    /// Schedules the records referring to `id` (a record of `entity`):
    /// those whose references `_chronicle_refs` holds, and compact ones,
    /// whose row shows their raw target.
    private mutating func scheduleReferrers(_ entity: Int, _ id: RecordID) throws {
        let rows = try db.all(statement(Slot.referrers, "SELECT entity, id FROM _chronicle_refs WHERE target = ?"), { $0.bind(id) }) { statement in
            (Int(sqlite3_column_int64(statement, 0)), try columnRecordID(statement, 1))
        }
        for (entity, referrer) in rows {
            schedule(entity, referrer)
        }
        for (i, referrers) in sql[entity].compactReferrers.enumerated() {
            for referrer in try db.all(statement(referrerSlot[entity] + i, referrers.sql), { $0.bind(id) }, read: { try columnRecordID($0, 0) }) {
                schedule(referrers.entity, referrer)
            }
        }
    }

    /// The row if the record is live and its cascade references resolve,
    /// before de-duplication.
    private func preShadowRow(_ entity: Int, _ id: RecordID, _ visiting: inout Set<RecordKey>) throws -> [DatabaseValue]? {
        let key = RecordKey(entity: entity, id: id)
        guard visiting.insert(key).inserted else { return nil }
        defer { visiting.remove(key) }
        guard let state = try loadState(entity, id), state.isLive else { return nil }
        let e = schema.entities[entity]
        if sql[entity].isIndependent { return row(of: state, e) }
        var row: [DatabaseValue] = []
        row.reserveCapacity(e.fields.count)
        for (i, field) in e.fields.enumerated() {
            let value = state.fields[i]?.value ?? field.defaultValue ?? .null
            guard case .reference(let destination, let rule) = field.kind, case .reference(let target) = value else {
                row.append(value.databaseValue)
                continue
            }
            let targetEntity = schema.entityIndex(named: destination)!
            if let resolved = try resolve(targetEntity, target, &visiting) {
                row.append(resolved.databaseValue)
            } else if rule == .cascade {
                return nil
            } else {
                row.append(.null)
            }
        }
        return row
    }

    /// The row of a live record of an independent entity: its values, with
    /// defaults for fields never written.
    private func row(of state: RecordState, _ e: Entity) -> [DatabaseValue] {
        e.fields.indices.map { i in (state.fields[i]?.value ?? e.fields[i].defaultValue ?? .null).databaseValue }
    }

    /// What a reference to `id` points at: the record itself if visible, the
    /// survivor it was merged into if it is a duplicate, or nil.
    ///
    /// A record with a row is visible, so its own survivor: its row tells,
    /// without recomputing it. A row still to be refreshed may be out of
    /// date, but only until its refresh, which schedules every record that
    /// read its visibility if that changes (so the fixpoint is the same).
    /// Not for entities on a reference cycle (see `onCycle`).
    private func resolve(_ entity: Int, _ id: RecordID, _ visiting: inout Set<RecordKey>) throws -> RecordID? {
        if !onCycle[entity], try isVisible(entity, id) { return id }
        guard let row = try preShadowRow(entity, id, &visiting) else { return nil }
        return try survivor(entity, id, row: row)
    }

    /// The smallest visible record sharing a unique key with this row, if
    /// smaller than `id`; otherwise `id` (the record is visible). Key groups
    /// come from the stored keys, visibility from the entity table: both
    /// what earlier refreshes wrote, and whoever changes them schedules
    /// this record again.
    private func survivor(_ entity: Int, _ id: RecordID, row: [DatabaseValue]) throws -> RecordID {
        guard !sql[entity].constraintFields.isEmpty else { return id }
        return try survivor(entity, id, groups: keyGroups(entity, keys(of: entity, row: row), row: row))
    }

    /// `survivor(_:_:row:)` given the records holding each key of the row.
    private func survivor(_ entity: Int, _ id: RecordID, groups: [Int: [RecordID]]) throws -> RecordID {
        var best = id
        for group in groups.values {
            for other in group where other < best {
                if try isVisible(entity, other) { best = other }
            }
        }
        return best
    }

    /// The records holding each of `keys`, the keys of `row`.
    private func keyGroups(_ entity: Int, _ keys: [Int: [UInt8]], row: [DatabaseValue]) throws -> [Int: [RecordID]] {
        var groups: [Int: [RecordID]] = [:]
        for (c, key) in keys {
            groups[c] = try keyGroup(entity, c, key, values: sql[entity].constraintFields[c].map { row[$0] })
        }
        return groups
    }

    private func isVisible(_ entity: Int, _ id: RecordID) throws -> Bool {
        try db.first(statement(Slot.exists(entity), sql[entity].exists), { $0.bind(id) }, read: { _ in true }) ?? false
    }

    /// What a reference to `id` of `entity` points at now: the record if
    /// visible, the record it was merged into if it is a duplicate, or nil.
    func survivor(entity: Int, id: RecordID) throws -> RecordID? {
        var visiting: Set<RecordKey> = []
        return try resolve(entity, id, &visiting)
    }

    /// The duplicates merged into a visible record: the records sharing a
    /// unique key with it whose references resolve to it. A local delete or
    /// key change of the record applies to them too (see `Snapshot.save`).
    func duplicates(entity: Int, of id: RecordID) throws -> [RecordID] {
        var result: Set<RecordID> = []
        for (c, key) in try storedKeys(entity, id) {
            for other in try keyGroup(entity, c, key) where other > id && !result.contains(other) {
                var visiting: Set<RecordKey> = []
                if try resolve(entity, other, &visiting) == id { result.insert(other) }
            }
        }
        return result.sorted()
    }

    /// Unique-key values per constraint; constraints with a NULL are skipped
    /// (as SQL does).
    private func keys(of entity: Int, row: [DatabaseValue]) -> [Int: [UInt8]] {
        var result: [Int: [UInt8]] = [:]
        for (c, fields) in sql[entity].constraintFields.enumerated() {
            guard !fields.contains(where: { row[$0].isNull }) else { continue }
            result[c] = keyBytes(fields.lazy.map { row[$0] })
        }
        return result
    }

    /// A key's stored form: each value's kind and bytes (`keyValues`
    /// reads it back).
    private func keyBytes(_ values: some Sequence<DatabaseValue>) -> [UInt8] {
        var w = ByteWriter()
        for value in values {
            switch value.storage {
            case .int64(let i): w.writeUInt8(1); w.writeSignedVarint(i)
            case .double(let d): w.writeUInt8(2); w.writeUInt64(d.bitPattern)
            case .string(let s): w.writeUInt8(3); w.writeString(s)
            case .blob(let b): w.writeUInt8(4); w.writeLengthPrefixed(b)
            case .null: break
            }
        }
        return w.bytes
    }

    /// Whether no record holds any unique key of a new record with these
    /// values (every field given, in field order, as an insert's are once
    /// its defaults are filled in): then no visible record has them either.
    func keysAreFree(entity: Int, values: [(field: Int, value: Value)]) throws -> Bool {
        let e = schema.entities[entity]
        guard values.count == e.fields.count else { return false }
        for (c, k) in keys(of: entity, row: values.map(\.value.databaseValue)) where !(try keyGroup(entity, c, k).isEmpty) {
            return false
        }
        return true
    }

    /// Notes that a save found the keys of a record it inserts free
    /// (``keysAreFree(entity:values:)``), just before applying the insert:
    /// its refresh need not look again.
    mutating func noteKeysFree(entity: Int, id: RecordID) {
        alone.insert(RecordKey(entity: entity, id: id))
    }

    /// The records holding a key: those whose keys `_chronicle_keys` holds,
    /// and compact ones, whose keys are their row's.
    private func keyGroup(_ entity: Int, _ constraint: Int, _ key: [UInt8], values known: [DatabaseValue]? = nil) throws -> [RecordID] {
        var ids = try db.all(statement(Slot.keyGroup, "SELECT id FROM _chronicle_keys WHERE entity = ? AND constraint_index = ? AND key = ?"),
                             { $0.bind(entity); $0.bind(constraint); $0.bind(key) }) { try columnRecordID($0, 0) }
        let values = try known ?? keyValues(key)
        ids += try db.all(statement(keyGroupSlot[entity] + constraint, sql[entity].compactKeyGroup[constraint]),
                          { binder in for value in values { binder.bind(value) } }) { try columnRecordID($0, 0) }
        return ids
    }

    /// The column values a key was made of (`keys(of:row:)`).
    private func keyValues(_ key: [UInt8]) throws -> [DatabaseValue] {
        try key.withBytes { raw throws(ChronicleError) -> [DatabaseValue] in
            var r = ByteReader(raw, errorCode: .databaseCorrupt, context: "stored unique key")
            var values: [DatabaseValue] = []
            while !r.isAtEnd {
                switch try r.readUInt8() {
                case 1: values.append(try r.readSignedVarint().databaseValue)
                case 2: values.append(Double(bitPattern: try r.readUInt64()).databaseValue)
                case 3: values.append(try r.readString(max: raw.count, "text").databaseValue)
                case 4: values.append(Data(try r.readLengthPrefixed(max: raw.count, "bytes")).databaseValue)
                case let tag: throw ChronicleError(.databaseCorrupt, "a stored unique key holds a value of unknown kind \(tag)")
                }
            }
            return values
        }
    }

    /// A record's keys as its last refresh stored them: in
    /// `_chronicle_keys`, or, for a compact state, its row's.
    private func storedKeys(_ entity: Int, _ id: RecordID) throws -> [Int: [UInt8]] {
        let result = try keysInTable(entity, id)
        guard result.isEmpty, !schema.entities[entity].uniqueConstraints.isEmpty,
              let stored = try currentRow(entity, id), stored.compact else { return result }
        return keys(of: entity, row: stored.row)
    }

    /// The keys `_chronicle_keys` holds for a record.
    private func keysInTable(_ entity: Int, _ id: RecordID) throws -> [Int: [UInt8]] {
        var result: [Int: [UInt8]] = [:]
        guard !schema.entities[entity].uniqueConstraints.isEmpty else { return result }
        let rows = try db.all(statement(Slot.storedKeys, "SELECT constraint_index, key FROM _chronicle_keys WHERE entity = ? AND id = ?"),
                              { $0.bind(entity); $0.bind(id) }) { (Int(sqlite3_column_int64($0, 0)), columnBytes($0, 1)) }
        for (constraint, key) in rows { result[constraint] = key }
        return result
    }

    private func insertKey(_ entity: Int, _ constraint: Int, _ key: [UInt8], _ id: RecordID) throws {
        keysStored.value = true
        try db.run(statement(Slot.insertKey, "INSERT INTO _chronicle_keys (entity, constraint_index, key, id) VALUES (?, ?, ?, ?)")) {
            $0.bind(entity); $0.bind(constraint); $0.bind(key); $0.bind(id)
        }
    }

    // MARK: Storage

    /// The record's state: written in this transaction, kept in
    /// `_chronicle_records`, or compact in its row.
    func loadState(_ entity: Int, _ id: RecordID) throws -> RecordState? {
        try loadStateAndForm(entity, id).state
    }

    /// The record's state, and whether it was read from a compact row.
    private func loadStateAndForm(_ entity: Int, _ id: RecordID) throws -> (state: RecordState?, compact: Bool) {
        if let cached = stateCache[RecordKey(entity: entity, id: id)] { return (cached, false) }
        if let bytes = try db.first(statement(Slot.selectState, "SELECT state FROM _chronicle_records WHERE entity = ? AND id = ?"),
                                    { $0.bind(entity); $0.bind(id) }, read: { columnBytes($0, 0) }) {
            return (try RecordState(encoded: bytes), false)
        }
        let e = schema.entities[entity]
        let state = try db.first(statement(Slot.selectCompact(entity), sql[entity].selectCompact), { $0.bind(id) }) { statement in
            try CompactState.read(statement, e, devices: devices)
        }
        return (state, state != nil)
    }

    /// The version of the compact state a new record's `row` can hold: one
    /// insert wrote every field, each with a value its column gives back
    /// exactly, and the row shows each reference's raw target. Nil if the
    /// state must go to `_chronicle_records`.
    private func compactVersion(_ entity: Int, _ state: RecordState, row: [DatabaseValue]) -> Version? {
        let e = schema.entities[entity]
        guard state.fields.count == e.fields.count, let version = state.soleVersion else { return nil }
        for entry in state.fields.entries {
            let field = e.fields[entry.index]
            guard CompactState.readsBackExactly(entry.value, field) else { return nil }
            if case .reference = field.kind, row[entry.index] != entry.value.databaseValue { return nil }
        }
        return version
    }

    /// Writes a new record's row with its compact state.
    /// Then notes the row among the largest, reports the insert, and
    /// schedules the records that named the record before it existed.
    private mutating func insertRowCompact(_ entity: Int, _ id: RecordID, _ version: Version, _ bindValues: (inout RawBinder) -> Void) throws {
        let versionBytes = try compactVersionBytes(version)
        try db.run(statement(Slot.insertRowCompact(entity), sql[entity].insertRowCompact)) { binder in
            binder.bind(id)
            bindValues(&binder)
            binder.bindInPlace(versionBytes)
        }
        if let largest = largestRowID[entity], id > largest { largestRowID[entity] = id }
        events.append(RecordEvent(entity: schema.entities[entity].name, recordID: id, kind: .inserted, origin: origin))
        if sql[entity].isReferenced { try scheduleReferrers(entity, id) }
    }

    /// Stores the state of a new record that `deferred` kept in memory.
    private func storeDeferred(_ entity: Int, _ id: RecordID) throws {
        let state = stateCache[RecordKey(entity: entity, id: id)]!
        try writeState(entity, id, state)
        try updateReferences(entity, id, state, previous: RecordState())
    }

    /// Moves a compact state out of its row (`row`, what it shows) into
    /// `_chronicle_records`, with its keys and references.
    private func materialize(_ entity: Int, _ id: RecordID, row: [DatabaseValue]) throws {
        guard let state = try loadState(entity, id) else {
            throw ChronicleError(.databaseCorrupt, "\(schema.entities[entity].name) \(id) has a compact state that does not read")
        }
        try writeState(entity, id, state)
        try expandIndexes(entity, id, state, row: row)
    }

    /// Writes what a compact state keeps implicit (its keys, from its row,
    /// to `_chronicle_keys`; its references to `_chronicle_refs`) and clears
    /// the row's version: the caller writes the state to
    /// `_chronicle_records` in the same transaction.
    private func expandIndexes(_ entity: Int, _ id: RecordID, _ state: RecordState, row: [DatabaseValue]?) throws {
        try updateReferences(entity, id, state, previous: RecordState())
        let e = schema.entities[entity]
        if !e.uniqueConstraints.isEmpty, let row = try row ?? currentRow(entity, id)?.row {
            for (c, k) in keys(of: entity, row: row) { try insertKey(entity, c, k, id) }
        }
        try db.run(statement(Slot.clearCompact(entity), sql[entity].clearCompact)) { $0.bind(id) }
    }

    /// Writes a new record as its row and version, unless the record has a
    /// state already (in `_chronicle_records`, or a row). Returns whether it
    /// wrote.
    private mutating func insertCompact(_ entity: Int, _ id: RecordID, _ version: Version, _ bindValues: (inout RawBinder) -> Void) throws -> Bool {
        let fresh = try id > largestStateID(entity)
        let statement = fresh ? try statement(Slot.insertCompactFresh(entity), sql[entity].insertCompactFresh)
                              : try statement(Slot.insertCompact(entity), sql[entity].insertCompact)
        // The ID and the version are bound in place, from the scratch bytes.
        let idBytes = UnsafeMutableRawBufferPointer(rebasing: statements.scratch[0..<16])
        idBytes.storeBytes(of: id.high.bigEndian, toByteOffset: 0, as: UInt64.self)
        idBytes.storeBytes(of: id.low.bigEndian, toByteOffset: 8, as: UInt64.self)
        let versionBytes = try compactVersionBytes(version)
        try db.run(statement) { binder in
            binder.bindInPlace(UnsafeRawBufferPointer(idBytes))
            bindValues(&binder)
            binder.bindInPlace(versionBytes)
            if !fresh {
                binder.bind(entity)
                binder.bindInPlace(UnsafeRawBufferPointer(idBytes))
            }
        }
        guard sqlite3_changes(db.sqliteConnection) == 1 else { return false }
        events.append(RecordEvent(entity: schema.entities[entity].name, recordID: id, kind: .inserted, origin: origin))
        return true
    }

    /// A compact version's blob (see `CompactState.write`), in the scratch
    /// bytes after the record ID's: bound in place, valid until the next call.
    private func compactVersionBytes(_ version: Version) throws -> UnsafeRawBufferPointer {
        let bytes = UnsafeMutableRawBufferPointer(rebasing: statements.scratch[16..<40])
        let count = CompactState.write(version, number: try devices.number(of: version.device), to: bytes)
        return UnsafeRawBufferPointer(rebasing: bytes[0..<count])
    }

    private mutating func largestStateID(_ entity: Int) throws -> RecordID {
        if let id = largestStateID[entity] { return id }
        let largest = try largestID(statement(Slot.largestStateID, "SELECT max(id) FROM _chronicle_records WHERE entity = ?"), bind: { $0.bind(entity) })
        largestStateID[entity] = largest
        return largest
    }

    /// The ID a `max(id)` query gives: zero if none (NULL reads as no
    /// bytes); a malformed ID (not 16 bytes) cannot be compared, so then
    /// the largest ID, as if any ID may be taken.
    private func largestID(_ statement: OpaquePointer, bind: (inout RawBinder) -> Void) throws -> RecordID {
        let bytes = try db.first(statement, bind) { columnBytes($0, 0) } ?? []
        return bytes.isEmpty ? RecordID(high: 0, low: 0)
            : bytes.count == 16 ? bytes.withUnsafeBytes { RecordID(bytes: $0) } : RecordID(high: .max, low: .max)
    }

    private func writeState(_ entity: Int, _ id: RecordID, _ state: RecordState) throws {
        let encoded = state.encoded()
        try db.run(statement(Slot.replaceState, "INSERT OR REPLACE INTO _chronicle_records (entity, id, state) VALUES (?, ?, ?)")) {
            $0.bind(entity); $0.bind(id); $0.bind(encoded)
        }
    }

    /// Writes a state over `previous`, which `_chronicle_records` (not a
    /// compact row: `expandIndexes` first) held or nothing did.
    private func saveState(_ entity: Int, _ id: RecordID, _ state: RecordState, previous: RecordState) throws {
        try writeState(entity, id, state)
        try updateReferences(entity, id, state, previous: previous)
    }

    private func updateReferences(_ entity: Int, _ id: RecordID, _ state: RecordState, previous: RecordState) throws {
        // Keep the reverse index of raw references in step.
        let e = schema.entities[entity]
        for (i, field) in e.fields.enumerated() {
            guard case .reference = field.kind else { continue }
            let old = previous.fields[i]?.value
            let new = state.fields[i]?.value
            guard old != new else { continue }
            if case .reference(let t)? = old {
                try db.run(statement(Slot.deleteRef, "DELETE FROM _chronicle_refs WHERE target = ? AND entity = ? AND id = ?")) {
                    $0.bind(t); $0.bind(entity); $0.bind(id)
                }
            }
            if case .reference(let t)? = new {
                try db.run(statement(Slot.insertRef, "INSERT OR IGNORE INTO _chronicle_refs (target, entity, id) VALUES (?, ?, ?)")) {
                    $0.bind(t); $0.bind(entity); $0.bind(id)
                }
            }
        }
    }

    /// The record's row, and whether it holds its compact state.
    /// Whether two rows hold the same values, text compared byte for byte:
    /// GRDB's `DatabaseValue` equality compares text as Swift strings, which
    /// join canonically equivalent spellings (a composed and a decomposed
    /// "é"), and a row that changes only so must still be written.
    static func identical(_ a: [DatabaseValue]?, _ b: [DatabaseValue]?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) {
            if case .string(let s) = x.storage, case .string(let t) = y.storage {
                guard Value.sameText(s, t) else { return false }
            } else if x != y {
                return false
            }
        }
        return true
    }

    private func currentRow(_ entity: Int, _ id: RecordID) throws -> (row: [DatabaseValue], compact: Bool)? {
        let count = Int32(schema.entities[entity].fields.count)
        return try db.first(statement(Slot.selectRow(entity), sql[entity].selectRow), { $0.bind(id) }) { statement in
            ((0..<count).map { columnValue(statement, $0) }, sqlite3_column_int64(statement, count) != 0)
        }
    }

    private func write(_ entity: Int, _ id: RecordID, _ row: [DatabaseValue]?, replacing: Bool) throws {
        guard let row else {
            try db.run(statement(Slot.deleteRow(entity), sql[entity].deleteRow)) { $0.bind(id) }
            return
        }
        // Delete then insert, so a unique index never sees a transient clash
        // with this record's own old row.
        if replacing {
            try db.run(statement(Slot.deleteRow(entity), sql[entity].deleteRow)) { $0.bind(id) }
        }
        try db.run(statement(Slot.insertRow(entity), sql[entity].insertRow)) { binder in
            binder.bind(id)
            for value in row { binder.bind(value) }
        }
    }
}
