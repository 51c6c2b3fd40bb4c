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
public struct Baseline: Sendable, Hashable {
    /// One record's merge state.
    public struct Record: Sendable, Hashable {
        /// The entity.
        public var entity: String
        /// The record.
        public var recordID: RecordID
        /// Whether an insert of the record is covered.
        public var inserted: Bool
        /// The newest delete covered, if any.
        public var deleteVersion: Version?
        /// Every field written, with its value and the version that wrote it.
        public var fields: [VersionedValue]

        /// Creates a record state.
        public init(entity: String, recordID: RecordID, inserted: Bool = true, deleteVersion: Version? = nil,
                    fields: [VersionedValue]) {
            self.entity = entity
            self.recordID = recordID
            self.inserted = inserted
            self.deleteVersion = deleteVersion
            self.fields = fields
        }
    }

    /// A field value and the version that wrote it.
    public struct VersionedValue: Sendable, Hashable {
        /// The field's name.
        public var name: String
        /// Its value.
        public var value: Value
        /// The version that wrote it.
        public var version: Version

        /// Creates a versioned value.
        public init(name: String, value: Value, version: Version) {
            self.name = name
            self.value = value
            self.version = version
        }
    }

    /// The highest sequence applied per device: every transaction up to it
    /// is in the state, none after it.
    public var vector: [DeviceID: UInt64]
    /// The record states.
    public var records: [Record]

    /// Creates a baseline.
    public init(vector: [DeviceID: UInt64], records: [Record]) {
        self.vector = vector
        self.records = records
    }
}
