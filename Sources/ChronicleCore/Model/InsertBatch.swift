/// New records of one entity for one save, stored column by column: each
/// record's ID and one value per field of the entity, in the entity's
/// field order.
///
/// A bulk import builds one per batch. It holds what the same records as
/// insert ``Change`` values would (their log body is the same bytes), in
/// two flat arrays instead of a `Change` and an array of named values per
/// record.
package struct InsertBatch: Sendable, Hashable {
    /// The entity's name.
    package let entity: String
    /// The entity's field names, in order: every record gives one value per name.
    package let fieldNames: [String]
    /// The records' IDs.
    package private(set) var ids: [RecordID] = []
    /// `fieldNames.count` values per record, record after record.
    package private(set) var values: [Value] = []

    /// An empty batch of records of `entity`.
    package init(entity: Entity, capacity: Int = 0) {
        self.entity = entity.name
        fieldNames = entity.fields.map(\.name)
        ids.reserveCapacity(capacity)
        values.reserveCapacity(capacity * fieldNames.count)
    }

    /// A batch of `ids.count` records of `entity` whose values, one per
    /// field, record after record, are `values`: taken as they are, not
    /// copied.
    ///
    /// - Precondition: `values` holds `ids.count` values per field.
    package init(entity: Entity, ids: [RecordID], values: [Value]) {
        self.entity = entity.name
        fieldNames = entity.fields.map(\.name)
        precondition(values.count == ids.count * fieldNames.count, "an inserted record gives one value per field")
        self.ids = ids
        self.values = values
    }

    /// The number of records.
    package var count: Int { ids.count }

    /// Whether the batch holds no record.
    package var isEmpty: Bool { ids.isEmpty }

    /// Adds a record.
    ///
    /// - Precondition: `row` holds one value per field, in field order.
    package mutating func append(id: RecordID, row: some Collection<Value>) {
        precondition(row.count == fieldNames.count, "an inserted record gives one value per field")
        ids.append(id)
        values.append(contentsOf: row)
    }

    /// The values of record `index`, in field order.
    package func row(_ index: Int) -> ArraySlice<Value> {
        values[index * fieldNames.count ..< (index + 1) * fieldNames.count]
    }

    /// Record `index` as an insert change.
    package func change(_ index: Int) -> Change {
        Change(.insert, entity: entity, recordID: ids[index],
               values: zip(fieldNames, row(index)).map { FieldValue($0.0, $0.1) })
    }
}
