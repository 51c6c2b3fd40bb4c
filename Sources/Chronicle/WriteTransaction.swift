import Foundation

/// The changes of one save, built inside ``Store/write(_:)``.
///
/// Nothing is applied until the closure returns; then the whole transaction
/// is validated and saved at once, or not at all. The same type will back
/// the background, scratch and child contexts (each collects changes the same
/// way and saves them through the store).
public struct WriteTransaction {
    let schema: Schema
    private(set) var changes: [Change] = []
    private var ids: RecordIDGenerator
    private let milliseconds: UInt64
    /// Records updated with ``update(_:)``: their rows as they were, read lazily.
    let currentRow: (String, RecordID) throws -> [String: Value]?

    init(schema: Schema, ids: RecordIDGenerator, milliseconds: UInt64,
         currentRow: @escaping (String, RecordID) throws -> [String: Value]?) {
        self.schema = schema
        self.ids = ids
        self.milliseconds = milliseconds
        self.currentRow = currentRow
    }

    var generator: RecordIDGenerator { ids }

    /// A new time-ordered record ID.
    public mutating func newRecordID() -> RecordID {
        ids.next(milliseconds: milliseconds)
    }

    // MARK: Dynamic records

    /// Inserts a record of `entity`; fields left out get their defaults.
    /// Returns the new record's ID.
    @discardableResult
    public mutating func insert(_ entity: String, _ values: [String: Value], id: RecordID? = nil) -> RecordID {
        let id = id ?? newRecordID()
        changes.append(Change(.insert, entity: entity, recordID: id,
                              values: values.sorted { $0.key < $1.key }.map { FieldValue($0.key, $0.value) }))
        return id
    }

    /// Sets some fields of a record; others keep their values (and their
    /// concurrent edits on other devices).
    public mutating func update(_ entity: String, id: RecordID, _ values: [String: Value]) {
        changes.append(Change(.update, entity: entity, recordID: id,
                              values: values.sorted { $0.key < $1.key }.map { FieldValue($0.key, $0.value) }))
    }

    /// Deletes a record.
    public mutating func delete(_ entity: String, id: RecordID) {
        changes.append(Change(.delete, entity: entity, recordID: id))
    }

    // MARK: Codable records

    /// Inserts a Codable record.
    public mutating func insert<R: ChronicleRecord>(_ record: R) throws {
        let entity = try self.entity(R.entityName)
        insert(entity.name, try RecordCoding.values(of: record, entity: entity), id: record.id)
    }

    /// Saves a Codable record's changed fields: only the fields that differ
    /// from the stored row are written, so concurrent edits of other fields
    /// on other devices survive.
    public mutating func update<R: ChronicleRecord>(_ record: R) throws {
        let entity = try self.entity(R.entityName)
        let new = try RecordCoding.values(of: record, entity: entity)
        guard let old = try currentRow(entity.name, record.id) else {
            throw ChronicleError(.recordNotFound, "no \(entity.name) with ID \(record.id)")
        }
        let changed = new.filter { old[$0.key] != $0.value }
        if !changed.isEmpty { update(entity.name, id: record.id, changed) }
    }

    /// Deletes a Codable record.
    public mutating func delete<R: ChronicleRecord>(_ record: R) {
        delete(R.entityName, id: record.id)
    }

    private func entity(_ name: String) throws -> Entity {
        guard let e = schema.entity(named: name) else { throw ChronicleError(.unknownEntity, "no entity named \(name)") }
        return e
    }
}
