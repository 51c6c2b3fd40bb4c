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
    private var largestStateID: [Int: RecordID] = [:]

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
        self.statements = StatementSlots(count: Slot.entityBase + Slot.perEntity * sql.count)
    }

    /// Statement slots: the fixed ones, then eight per entity.
    private enum Slot {
        static let selectState = 0, insertStateIfAbsent = 1, replaceState = 2, deleteRef = 3, insertRef = 4, largestStateID = 5
        static let keyGroup = 6, storedKeys = 7, insertKey = 8, deleteKeys = 9, referrers = 10
        static let entityBase = 11, perEntity = 8
        static func selectRow(_ entity: Int) -> Int { entityBase + perEntity * entity }
        static func deleteRow(_ entity: Int) -> Int { entityBase + perEntity * entity + 1 }
        static func insertRow(_ entity: Int) -> Int { entityBase + perEntity * entity + 2 }
        static func insertCompact(_ entity: Int) -> Int { entityBase + perEntity * entity + 3 }
        static func selectCompact(_ entity: Int) -> Int { entityBase + perEntity * entity + 4 }
        static func clearCompact(_ entity: Int) -> Int { entityBase + perEntity * entity + 5 }
        static func insertCompactFresh(_ entity: Int) -> Int { entityBase + perEntity * entity + 6 }
        static func exists(_ entity: Int) -> Int { entityBase + perEntity * entity + 7 }
    }

    private func statement(_ slot: Int, _ sql: @autoclosure () -> String) throws -> OpaquePointer {
        try statements.get(slot, db, sql())
    }

    // MARK: Merging

    /// Merges one change with `version` into its record's state and schedules
    /// the record for recomputation.
    mutating func apply(_ kind: ChangeKind, entity: Int, id: RecordID, values: [(field: Int, value: Value)], version: Version) throws {
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
            } else {
                // An insert almost always creates its record: try writing its
                // state outright, which saves the lookup; only if a state
                // exists already (a re-sent insert) fall back to merging into it.
                let state = merged(RecordState())
                if try insertStateIfAbsent(entity, id, state) {
                    created.insert(key)
                    untouched.insert(key)
                    stateCache[key] = state
                    schedule(entity, id)
                    return
                }
            }
        }
        if loaded == nil { loaded = try loadState(entity, id) }
        if loaded == nil {
            created.insert(key)
            untouched.insert(key)
        }
        let before = loaded ?? RecordState()
        let state = merged(before)
        guard state != before else { return }
        try saveState(entity, id, state, previous: before)
        stateCache[key] = state
        schedule(entity, id)
    }

    /// Joins a whole record state (a baseline's) into the record's state and
    /// schedules the record for recomputation. A new record of an
    /// independent entity whose one version wrote every field is stored
    /// compact, as its insert would have been.
    mutating func merge(_ incoming: RecordState, entity: Int, id: RecordID) throws {
        let key = RecordKey(entity: entity, id: id)
        var loaded = stateCache[key]
        if loaded == nil, sql[entity].isIndependent, let version = incoming.soleVersion {
            let values = incoming.fields.entries.map { (field: $0.index, value: $0.value) }
            if CompactState.holds(insert: values, schema.entities[entity]),
               try insertCompact(entity, id, version, { binder in for v in values { binder.bind(v.value) } }) {
                return
            }
        }
        if loaded == nil { loaded = try loadState(entity, id) }
        if loaded == nil {
            created.insert(key)
            untouched.insert(key)
        }
        let before = loaded ?? RecordState()
        var state = before
        state.join(incoming)
        guard state != before else { return }
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
        guard sql[entity].isIndependent, stateCache[RecordKey(entity: entity, id: id)] == nil,
              CompactState.holds(insert: raw, schema.entities[entity])
        else { return false }
        return try insertCompact(entity, id, version) { binder in for v in raw { binder.bind(v.value) } }
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
            let ids = try RecordID.fetchAll(db.cachedStatement(sql: "SELECT id FROM _chronicle_records WHERE entity = ? ORDER BY id"), arguments: [entity])
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
        if first, let pre {
            let newKeys = keys(of: e, row: pre)
            var alone = true
            if !checked {
                for (c, k) in newKeys where !(try keyGroup(entity, c, k).isEmpty) {
                    alone = false
                    break
                }
            }
            if alone {
                for (c, k) in newKeys {
                    try insertKey(entity, c, k, id)
                }
                try write(entity, id, pre, replacing: false)
                created.remove(key)
                events.append(RecordEvent(entity: e.name, recordID: id, kind: .inserted, origin: origin))
                if sql[entity].isReferenced { try scheduleReferrers(of: id) }
                return
            }
        }
        let newKeys = pre.map { keys(of: e, row: $0) } ?? [:]
        var desired = try pre.flatMap { try survivor(entity, id, row: $0) == id ? $0 : nil }
        if var row = desired, !e.uniqueConstraints.isEmpty {
            try takeNewerValuesOfDuplicates(entity, id, keys: newKeys, into: &row)
            desired = row
        } else if pre != nil, desired == nil {
            // A duplicate: its survivor shows its newer values, so its
            // survivor (a visible record of its key groups) reads its state.
            for (c, k) in newKeys {
                for other in try keyGroup(entity, c, k) where other < id {
                    if try isVisible(entity, other) { schedule(entity, other) }
                }
            }
        }
        // A record first seen in this transaction has no row yet, unless an
        // earlier refresh in it wrote one.
        let current = created.contains(key) ? nil : try currentRow(entity, id)
        let oldKeys = first ? [:] : try storedKeys(entity, id)
        if newKeys != oldKeys {
            try db.run(statement(Slot.deleteKeys, "DELETE FROM _chronicle_keys WHERE entity = ? AND id = ?")) { $0.bind(entity); $0.bind(id) }
            for (c, key) in newKeys {
                try insertKey(entity, c, key, id)
            }
        }
        if desired != current {
            if let desired, !e.uniqueConstraints.isEmpty { try evictClashes(entity, id, row: desired) }
            try write(entity, id, desired, replacing: current != nil)
            if desired != nil { created.remove(key) }
            let kind: RecordEvent.Kind = desired == nil ? .deleted : (current == nil ? .inserted : .updated)
            events.append(RecordEvent(entity: e.name, recordID: id, kind: kind, origin: origin))
        }
        // Other values of a row are read by nothing else: referrers show the
        // ID a reference resolves to, which only keys and visibility decide.
        guard newKeys != oldKeys || (desired == nil) != (current == nil) else { return }
        // Both the groups it left and the groups it joined (a changed key
        // of one constraint is in both).
        var groups = oldKeys.map { ($0.key, $0.value) }
        for (c, key) in newKeys where oldKeys[c] != key { groups.append((c, key)) }
        try scheduleDependents(entity, id, groups: groups)
    }

    /// A visible record and the duplicates merged into it are one record to
    /// the app: for each field that is neither a reference nor part of a
    /// unique key, the row shows the newest value any of them holds (by
    /// version, as the merge of one record's writes does). So an update
    /// made to a record on a device that had not seen its duplicate is not
    /// hidden when the two meet. Key fields stay the survivor's (they
    /// decide the groups), and references too (what they resolve to is read
    /// by others).
    private func takeNewerValuesOfDuplicates(_ entity: Int, _ id: RecordID, keys: [Int: [UInt8]], into row: inout [DatabaseValue]) throws {
        let e = schema.entities[entity]
        let keyFields = Set(e.uniqueConstraints.joined().compactMap { e.fieldIndex(named: $0) })
        let plain = e.fields.indices.filter { i in
            if keyFields.contains(i) { return false }
            if case .reference = e.fields[i].kind { return false }
            return true
        }
        guard !plain.isEmpty else { return }
        // Only larger records can be merged into this one: a record's
        // survivor is the smallest visible record sharing a key with it.
        var members = Set<RecordID>()
        for (c, k) in keys {
            for other in try keyGroup(entity, c, k) where other > id { members.insert(other) }
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
                if sql[entity].isReferenced { try scheduleReferrers(of: other) }
            }
        }
        if sql[entity].isReferenced { try scheduleReferrers(of: id) }
    }

    /// Removes visible rows that share a unique key with the row about to be
    /// written. They can only be records with larger IDs whose own refresh is
    /// still pending (a smaller visible one would have hidden this record),
    /// so they are duplicates now: hide them, so the unique index never sees
    /// two of them, and schedule them and what read their visibility.
    private mutating func evictClashes(_ entity: Int, _ id: RecordID, row: [DatabaseValue]) throws {
        let e = schema.entities[entity]
        for constraint in e.uniqueConstraints {
            var conditions: [String] = []
            var arguments: [DatabaseValue] = []
            for name in constraint {
                let value = row[e.fieldIndex(named: name)!]
                if value.isNull { conditions = []; break }
                conditions.append("\(quoted(name)) = ?")
                arguments.append(value)
            }
            guard !conditions.isEmpty else { continue }
            arguments.append(id.databaseValue)
            let clashing = try RecordID.fetchAll(db.cachedStatement(sql: "SELECT id FROM \(quoted(e.name)) WHERE \(conditions.joined(separator: " AND ")) AND id != ?"),
                                                 arguments: StatementArguments(arguments))
            for other in clashing {
                try db.run(statement(Slot.deleteRow(entity), sql[entity].deleteRow)) { $0.bind(other) }
                events.append(RecordEvent(entity: e.name, recordID: other, kind: .deleted, origin: origin))
                schedule(entity, other)
                try scheduleDependents(entity, other, groups: try storedKeys(entity, other).map { ($0.key, $0.value) })
            }
        }
    }

    private mutating func scheduleReferrers(of id: RecordID) throws {
        let rows = try db.all(statement(Slot.referrers, "SELECT entity, id FROM _chronicle_refs WHERE target = ?"), { $0.bind(id) }) { statement in
            (Int(sqlite3_column_int64(statement, 0)), try columnRecordID(statement, 1))
        }
        for (entity, referrer) in rows {
            schedule(entity, referrer)
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
    private func resolve(_ entity: Int, _ id: RecordID, _ visiting: inout Set<RecordKey>) throws -> RecordID? {
        guard let row = try preShadowRow(entity, id, &visiting) else { return nil }
        return try survivor(entity, id, row: row)
    }

    /// The smallest visible record sharing a unique key with this row, if
    /// smaller than `id`; otherwise `id` (the record is visible). Key groups
    /// come from the stored keys, visibility from the entity table: both
    /// what earlier refreshes wrote, and whoever changes them schedules
    /// this record again.
    private func survivor(_ entity: Int, _ id: RecordID, row: [DatabaseValue]) throws -> RecordID {
        let e = schema.entities[entity]
        guard !e.uniqueConstraints.isEmpty else { return id }
        var best = id
        for (c, key) in keys(of: e, row: row) {
            for other in try keyGroup(entity, c, key) where other < best {
                if try isVisible(entity, other) { best = other }
            }
        }
        return best
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
    private func keys(of e: Entity, row: [DatabaseValue]) -> [Int: [UInt8]] {
        var result: [Int: [UInt8]] = [:]
        for (c, constraint) in e.uniqueConstraints.enumerated() {
            var w = ByteWriter()
            var hasNull = false
            for name in constraint {
                let value = row[e.fieldIndex(named: name)!]
                if value.isNull { hasNull = true; break }
                switch value.storage {
                case .int64(let i): w.writeUInt8(1); w.writeSignedVarint(i)
                case .double(let d): w.writeUInt8(2); w.writeUInt64(d.bitPattern)
                case .string(let s): w.writeUInt8(3); w.writeString(s)
                case .blob(let b): w.writeUInt8(4); w.writeLengthPrefixed(b)
                case .null: break
                }
            }
            if !hasNull { result[c] = w.bytes }
        }
        return result
    }

    /// Whether no record holds any unique key of a new record with these
    /// values (every field given, in field order, as an insert's are once
    /// its defaults are filled in): then no visible record has them either.
    func keysAreFree(entity: Int, values: [(field: Int, value: Value)]) throws -> Bool {
        let e = schema.entities[entity]
        guard values.count == e.fields.count else { return false }
        for (c, k) in keys(of: e, row: values.map(\.value.databaseValue)) where !(try keyGroup(entity, c, k).isEmpty) {
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

    private func keyGroup(_ entity: Int, _ constraint: Int, _ key: [UInt8]) throws -> [RecordID] {
        try db.all(statement(Slot.keyGroup, "SELECT id FROM _chronicle_keys WHERE entity = ? AND constraint_index = ? AND key = ?"),
                   { $0.bind(entity); $0.bind(constraint); $0.bind(key) }) { try columnRecordID($0, 0) }
    }

    private func storedKeys(_ entity: Int, _ id: RecordID) throws -> [Int: [UInt8]] {
        var result: [Int: [UInt8]] = [:]
        guard !schema.entities[entity].uniqueConstraints.isEmpty else { return result }
        let rows = try db.all(statement(Slot.storedKeys, "SELECT constraint_index, key FROM _chronicle_keys WHERE entity = ? AND id = ?"),
                              { $0.bind(entity); $0.bind(id) }) { (Int(sqlite3_column_int64($0, 0)), columnBytes($0, 1)) }
        for (constraint, key) in rows { result[constraint] = key }
        return result
    }

    private func insertKey(_ entity: Int, _ constraint: Int, _ key: [UInt8], _ id: RecordID) throws {
        try db.run(statement(Slot.insertKey, "INSERT INTO _chronicle_keys (entity, constraint_index, key, id) VALUES (?, ?, ?, ?)")) {
            $0.bind(entity); $0.bind(constraint); $0.bind(key); $0.bind(id)
        }
    }

    // MARK: Storage

    /// The record's state: written in this transaction, kept in
    /// `_chronicle_records`, or (independent entities) compact in its row.
    func loadState(_ entity: Int, _ id: RecordID) throws -> RecordState? {
        if let cached = stateCache[RecordKey(entity: entity, id: id)] { return cached }
        if let bytes = try db.first(statement(Slot.selectState, "SELECT state FROM _chronicle_records WHERE entity = ? AND id = ?"),
                                    { $0.bind(entity); $0.bind(id) }, read: { columnBytes($0, 0) }) {
            return try RecordState(encoded: bytes)
        }
        guard sql[entity].isIndependent else { return nil }
        let e = schema.entities[entity]
        return try db.first(statement(Slot.selectCompact(entity), sql[entity].selectCompact), { $0.bind(id) }) { statement in
            try CompactState.read(statement, e)
        }
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
        let versionBytes = UnsafeMutableRawBufferPointer(rebasing: statements.scratch[16..<40])
        idBytes.storeBytes(of: id.high.bigEndian, toByteOffset: 0, as: UInt64.self)
        idBytes.storeBytes(of: id.low.bigEndian, toByteOffset: 8, as: UInt64.self)
        CompactState.write(version, to: versionBytes)
        try db.run(statement) { binder in
            binder.bindInPlace(UnsafeRawBufferPointer(idBytes))
            bindValues(&binder)
            binder.bindInPlace(UnsafeRawBufferPointer(versionBytes))
            if !fresh {
                binder.bind(entity)
                binder.bindInPlace(UnsafeRawBufferPointer(idBytes))
            }
        }
        guard sqlite3_changes(db.sqliteConnection) == 1 else { return false }
        events.append(RecordEvent(entity: schema.entities[entity].name, recordID: id, kind: .inserted, origin: origin))
        return true
    }

    private mutating func largestStateID(_ entity: Int) throws -> RecordID {
        if let id = largestStateID[entity] { return id }
        // NULL (no state) reads as no bytes; a malformed ID (not 16 bytes)
        // cannot be compared, so then assume any ID may have a state.
        let bytes = try db.first(statement(Slot.largestStateID, "SELECT max(id) FROM _chronicle_records WHERE entity = ?"), { $0.bind(entity) }) {
            columnBytes($0, 0)
        } ?? []
        let largest = bytes.isEmpty ? RecordID(high: 0, low: 0)
            : bytes.count == 16 ? bytes.withUnsafeBytes { RecordID(bytes: $0) } : RecordID(high: .max, low: .max)
        largestStateID[entity] = largest
        return largest
    }

    /// Writes the state of a record that has none. Returns false, writing
    /// nothing, if it has one.
    private func insertStateIfAbsent(_ entity: Int, _ id: RecordID, _ state: RecordState) throws -> Bool {
        let encoded = state.encoded()
        try db.run(statement(Slot.insertStateIfAbsent, "INSERT OR IGNORE INTO _chronicle_records (entity, id, state) VALUES (?, ?, ?)")) {
            $0.bind(entity); $0.bind(id); $0.bind(encoded)
        }
        guard sqlite3_changes(db.sqliteConnection) == 1 else { return false }
        try updateReferences(entity, id, state, previous: RecordState())
        return true
    }

    private func saveState(_ entity: Int, _ id: RecordID, _ state: RecordState, previous: RecordState) throws {
        let encoded = state.encoded()
        try db.run(statement(Slot.replaceState, "INSERT OR REPLACE INTO _chronicle_records (entity, id, state) VALUES (?, ?, ?)")) {
            $0.bind(entity); $0.bind(id); $0.bind(encoded)
        }
        if sql[entity].isIndependent {
            // The state now lives in `_chronicle_records`: a compact one in
            // the row no longer holds.
            try db.run(statement(Slot.clearCompact(entity), sql[entity].clearCompact)) { $0.bind(id) }
        }
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

    private func currentRow(_ entity: Int, _ id: RecordID) throws -> [DatabaseValue]? {
        let count = Int32(schema.entities[entity].fields.count)
        return try db.first(statement(Slot.selectRow(entity), sql[entity].selectRow), { $0.bind(id) }) { statement in
            (0..<count).map { columnValue(statement, $0) }
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
