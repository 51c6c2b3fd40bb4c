import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// The changes of one save, built inside ``Store/write(_:)``.
///
/// Nothing is applied until the closure returns; then the whole transaction
/// is validated and saved at once, or not at all. The same type will back
/// the background, scratch and child contexts (each collects changes the same
/// way and saves them through the store).
///
/// Changes of one record within a transaction combine as they would one
/// after the other: an update of a record inserted (or updated) earlier in
/// the transaction is folded into that change, so the last value of each
/// field wins; a delete after an insert or update removes the record. Every
/// change of a save carries the save's one version, so this is also how
/// every other device applies it.
///
/// ```swift
/// try await store.write { tx in
///     let id = tx.insert("Note", ["title": "Groceries", "created": Date(), "folder": nil])
///     tx.update("Note", id: id, ["title": "Groceries for Sunday"])
/// }
/// ```
public struct WriteTransaction {
    let schema: Schema
    private(set) var changes: [Change] = []
    private var ids: RecordIDGenerator
    private let milliseconds: UInt64
    /// Records updated with ``update(_:)``: their rows as they were, read lazily.
    let currentRow: (String, RecordID) throws -> [String: Value]?
    /// Per record, the index in `changes` of its insert or update that later
    /// updates fold into; none after a delete.
    private var open: [RecordKey: Int] = [:]
    /// Records deleted in this transaction.
    private var deleted: Set<RecordKey> = []
    /// The first value that could not be converted; the save throws it.
    private var conversionError: ChronicleError?

    private struct RecordKey: Hashable {
        let entity: String
        let id: RecordID
    }

    init(schema: Schema, ids: RecordIDGenerator, milliseconds: UInt64,
         currentRow: @escaping (String, RecordID) throws -> [String: Value]?) {
        self.schema = schema
        self.ids = ids
        self.milliseconds = milliseconds
        self.currentRow = currentRow
    }

    var generator: RecordIDGenerator { ids }

    /// The changes to save.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` if a dynamic value
    ///   could not be converted (see ``ChronicleValueConvertible``).
    func checkedChanges() throws(ChronicleError) -> [Change] {
        if let conversionError { throw conversionError }
        return changes
    }

    /// New records given a row at a time (``insertNew(_:row:)``), saved
    /// ahead of ``changes``.
    private(set) var inserts: InsertBatch?
    /// How many records ``insertNew(_:row:)`` will likely add, to size
    /// the batch once.
    var expectedInserts = 0

    /// A new time-ordered record ID.
    public mutating func newRecordID() -> RecordID {
        ids.next(milliseconds: milliseconds)
    }

    // MARK: Dynamic records

    /// Inserts a record of `entity`; fields left out get their defaults.
    /// Returns the new record's ID.
    ///
    /// Values are plain Swift values or ``Value``s (see
    /// ``ChronicleValueConvertible``); `nil` stores null. A value that has
    /// no Chronicle value makes the save throw
    /// ``ChronicleError/Code/invalidValue``.
    @discardableResult @_disfavoredOverload
    public mutating func insert(_ entity: String, _ values: [String: (any ChronicleValueConvertible)?], id: RecordID? = nil) -> RecordID {
        let id = id ?? newRecordID()
        insertValues(entity, converted(values), id: id)
        return id
    }

    /// Inserts a record of `entity` from ``Value``s; fields left out get
    /// their defaults. Returns the new record's ID.
    @discardableResult
    public mutating func insert(_ entity: String, _ values: [String: Value], id: RecordID? = nil) -> RecordID {
        let id = id ?? newRecordID()
        insertValues(entity, values, id: id)
        return id
    }

    /// Sets some fields of a record; others keep their values (and their
    /// concurrent edits on other devices). Values are as for
    /// the `insert` that takes plain values.
    @_disfavoredOverload
    public mutating func update(_ entity: String, id: RecordID, _ values: [String: (any ChronicleValueConvertible)?]) {
        updateValues(entity, id: id, converted(values))
    }

    /// Sets some fields of a record from ``Value``s; others keep their values.
    public mutating func update(_ entity: String, id: RecordID, _ values: [String: Value]) {
        updateValues(entity, id: id, values)
    }

    /// Deletes a record.
    public mutating func delete(_ entity: String, id: RecordID) {
        let key = RecordKey(entity: entity, id: id)
        open[key] = nil
        deleted.insert(key)
        changes.append(Change(.delete, entity: entity, recordID: id))
    }

    private mutating func converted(_ values: [String: (any ChronicleValueConvertible)?]) -> [String: Value] {
        var result: [String: Value] = [:]
        result.reserveCapacity(values.count)
        for (name, value) in values {
            do {
                result[name] = try value?.chronicleValue() ?? .null
            } catch {
                if conversionError == nil { conversionError = ChronicleError(error.code, "\(name): \(error.message)") }
            }
        }
        return result
    }

    /// Inserts a new record of `entity` with a new ID, given one value per
    /// field in field order: a bulk import's way, which builds no
    /// ``Change`` for it and keeps nothing for later changes of this
    /// transaction to fold into. The save checks it as any insert.
    mutating func insertNew(_ entity: Entity, row: some Collection<Value>) {
        if inserts == nil { inserts = InsertBatch(entity: entity, capacity: expectedInserts) }
        precondition(inserts!.entity == entity.name, "one save's rows are of one entity")
        inserts!.append(id: newRecordID(), row: row)
    }

    /// Inserts `count` new records of `entity`, given as one value per
    /// field, record after record (`rows`, taken as it is): as many
    /// ``insertNew(_:row:)`` calls, without copying the values.
    mutating func insertNew(_ entity: Entity, rows: [Value], count: Int) {
        guard inserts == nil else {
            let width = entity.fields.count
            for r in 0..<count { insertNew(entity, row: rows[r * width ..< (r + 1) * width]) }
            return
        }
        var ids: [RecordID] = []
        ids.reserveCapacity(count)
        for _ in 0..<count { ids.append(newRecordID()) }
        inserts = InsertBatch(entity: entity, ids: ids, values: rows)
    }

    mutating func insertNew(_ entity: String, _ values: [String: Value]) {
        changes.append(Change(.insert, entity: entity, recordID: newRecordID(), values: values.map { FieldValue($0.key, $0.value) }))
    }

    private mutating func insertValues(_ entity: String, _ values: [String: Value], id: RecordID) {
        let key = RecordKey(entity: entity, id: id)
        changes.append(Change(.insert, entity: entity, recordID: id, values: values.map { FieldValue($0.key, $0.value) }))
        // After a delete in this transaction the save refuses the insert
        // (record IDs are never reused); nothing folds into it.
        if !deleted.contains(key) { open[key] = changes.count - 1 }
    }

    private mutating func updateValues(_ entity: String, id: RecordID, _ values: [String: Value]) {
        let key = RecordKey(entity: entity, id: id)
        guard let index = open[key] else {
            changes.append(Change(.update, entity: entity, recordID: id, values: sorted(values, of: entity)))
            if !deleted.contains(key) { open[key] = changes.count - 1 }
            return
        }
        // One save writes each field once: its changes share one version,
        // and of two writes with the same version the merge keeps the first.
        var merged = Dictionary(changes[index].values.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
        merged.merge(values) { _, new in new }
        changes[index].values = sorted(merged, of: entity)
    }

    /// The values in the entity's field order (the order a log's readers
    /// expect first); names it does not have last, by name (the save
    /// refuses them). An insert's need no order here: the save puts every
    /// field of an insert in the entity's order.
    private func sorted(_ values: [String: Value], of entity: String) -> [FieldValue] {
        var result = values.map { FieldValue($0.key, $0.value) }
        guard result.count > 1 else { return result }
        guard let e = schema.entity(named: entity) else {
            result.sort { $0.name < $1.name }
            return result
        }
        // Sorting small keys, not the values.
        let unknown = e.fields.count
        let keys = result.map { e.fieldIndex(named: $0.name) ?? unknown }
        let order = result.indices.sorted { keys[$0] != keys[$1] ? keys[$0] < keys[$1] : result[$0].name < result[$1].name }
        return order.map { result[$0] }
    }

    // MARK: Codable records

    /// Inserts a Codable record: every field its type declares (see
    /// ``ChronicleRecord``); the entity's other fields get their defaults.
    public mutating func insert<R: ChronicleRecord>(_ record: R) throws {
        let entity = try self.entity(R.entityName)
        insertValues(entity.name, try RecordCoding.values(of: record, entity: entity), id: record.id)
    }

    /// Saves a Codable record's changed fields: only the fields its type
    /// declares that differ from the stored record (or from the record as
    /// this transaction left it) are written, so concurrent edits of other
    /// fields on other devices survive. A property set to nil clears its field.
    ///
    /// - Throws: ``ChronicleError/Code/recordNotFound`` if the record does
    ///   not exist (or was deleted earlier in this transaction).
    public mutating func update<R: ChronicleRecord>(_ record: R) throws {
        let entity = try self.entity(R.entityName)
        let new = try RecordCoding.values(of: record, entity: entity)
        let key = RecordKey(entity: entity.name, id: record.id)
        guard !deleted.contains(key) else {
            throw ChronicleError(.recordNotFound, "\(entity.name) \(record.id) was deleted earlier in this transaction")
        }
        if let index = open[key], changes[index].kind == .insert {
            updateValues(entity.name, id: record.id, new)
            return
        }
        guard var old = try currentRow(entity.name, record.id) else {
            throw ChronicleError(.recordNotFound, "no \(entity.name) with ID \(record.id)")
        }
        if let index = open[key] {
            for fv in changes[index].values { old[fv.name] = fv.value }
        }
        let changed = new.filter { !Self.same(old[$0.key], $0.value) }
        if !changed.isEmpty { updateValues(entity.name, id: record.id, changed) }
    }

    /// Whether writing `new` over `old` changes nothing: equal values, and
    /// decimals equal in value (`Decimal` drops trailing zeros, so `1.50`
    /// stored comes back as `1.5`).
    private static func same(_ old: Value?, _ new: Value) -> Bool {
        guard let old else { return false }
        if case .decimal(let a) = old, case .decimal(let b) = new { return a == b }
        return old == new
    }

    /// Deletes a Codable record.
    public mutating func delete<R: ChronicleRecord>(_ record: R) {
        delete(R.entityName, id: record.id)
    }

    /// Deletes the record of type `R` with ID `id`.
    ///
    /// ```swift
    /// try await store.write { tx in tx.delete(Note.self, id: noteID) }
    /// ```
    public mutating func delete<R: ChronicleRecord>(_ type: R.Type, id: RecordID) {
        delete(R.entityName, id: id)
    }

    private func entity(_ name: String) throws -> Entity {
        guard let e = schema.entity(named: name) else { throw ChronicleError(.unknownEntity, "no entity named \(name)") }
        return e
    }
}
