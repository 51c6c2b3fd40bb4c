/// The full state of a store as of a known point, or one part of it: every
/// record's merge state (each field with the version that wrote it, whether
/// an insert was seen, the newest delete) and the per-device sequence vector
/// the state covers. A new device or a rebuilt store starts from one.
///
/// A baseline carries *states*, not just the visible rows: a device that
/// starts from it must merge later logs exactly as a device that applied
/// every log did, so a deleted record keeps its fields and its delete, and a
/// record whose insert is not covered keeps the updates it has.
///
/// A large store's baseline is split into parts (see `docs/log-format.md`);
/// each part is a `Baseline` with the same vector and a share of the records.
package struct Baseline: Sendable, Hashable {
    /// One record's merge state.
    package struct Record: Sendable, Hashable {
        /// The entity.
        package var entity: String
        /// The record.
        package var recordID: RecordID
        /// Whether an insert of the record is covered.
        package var inserted: Bool
        /// The newest delete covered, if any.
        package var deleteVersion: Version?
        /// Every field written, with its value and the version that wrote it.
        package var fields: [VersionedValue]

        /// Creates a record state.
        package init(entity: String, recordID: RecordID, inserted: Bool = true, deleteVersion: Version? = nil,
                    fields: [VersionedValue]) {
            self.entity = entity
            self.recordID = recordID
            self.inserted = inserted
            self.deleteVersion = deleteVersion
            self.fields = fields
        }
    }

    /// A field value and the version that wrote it.
    package struct VersionedValue: Sendable, Hashable {
        /// The field's name.
        package var name: String
        /// Its value.
        package var value: Value
        /// The version that wrote it.
        package var version: Version

        /// Creates a versioned value.
        package init(name: String, value: Value, version: Version) {
            self.name = name
            self.value = value
            self.version = version
        }
    }

    /// The highest sequence applied per device: every transaction up to it
    /// is in the state, none after it.
    package var vector: [DeviceID: UInt64]
    /// The record states.
    package var records: [Record]

    /// Creates a baseline.
    package init(vector: [DeviceID: UInt64], records: [Record]) {
        self.vector = vector
        self.records = records
    }
}
