/// The full state of a store as of a known point: every live record with the
/// version of each field, every tombstone, and the per-device sequence vector
/// the state covers. A new device or a rebuilt store starts from one.
public struct Baseline: Sendable, Hashable {
    /// One live record.
    public struct Record: Sendable, Hashable {
        /// The entity.
        public var entity: String
        /// The record.
        public var recordID: RecordID
        /// Every field with its value and the version that set it.
        public var fields: [VersionedValue]

        /// Creates a record.
        public init(entity: String, recordID: RecordID, fields: [VersionedValue]) {
            self.entity = entity
            self.recordID = recordID
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

    /// A deleted record, kept so that older updates cannot bring it back.
    public struct Tombstone: Sendable, Hashable {
        /// The entity.
        public var entity: String
        /// The record.
        public var recordID: RecordID
        /// The version of the delete.
        public var version: Version

        /// Creates a tombstone.
        public init(entity: String, recordID: RecordID, version: Version) {
            self.entity = entity
            self.recordID = recordID
            self.version = version
        }
    }

    /// The highest sequence applied per device.
    public var vector: [DeviceID: UInt64]
    /// The live records.
    public var records: [Record]
    /// The tombstones.
    public var tombstones: [Tombstone]

    /// Creates a baseline.
    public init(vector: [DeviceID: UInt64], records: [Record], tombstones: [Tombstone]) {
        self.vector = vector
        self.records = records
        self.tombstones = tombstones
    }
}
