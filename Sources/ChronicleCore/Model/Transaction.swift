/// What an operation does to a record.
public enum ChangeKind: UInt8, Sendable, Hashable, Codable, CustomStringConvertible {
    /// Creates a record with all its fields.
    case insert = 1
    /// Changes some fields of a record; fields not named keep their values.
    case update = 2
    /// Removes a record.
    case delete = 3

    public var description: String {
        switch self {
        case .insert: return "insert"
        case .update: return "update"
        case .delete: return "delete"
        }
    }
}

/// One field and its new value.
public struct FieldValue: Sendable, Hashable {
    /// The field's name.
    public var name: String
    /// Its value.
    public var value: Value

    /// Pairs a field name with a value.
    public init(_ name: String, _ value: Value) {
        self.name = name
        self.value = value
    }
}

/// One change to one record.
public struct Change: Sendable, Hashable {
    /// Insert, update or delete.
    public var kind: ChangeKind
    /// The entity of the record.
    public var entity: String
    /// The record.
    public var recordID: RecordID
    /// For an insert, every field; for an update, the changed fields; for a
    /// delete, none.
    public var values: [FieldValue]

    /// Creates an operation.
    public init(_ kind: ChangeKind, entity: String, recordID: RecordID, values: [FieldValue] = []) {
        self.kind = kind
        self.entity = entity
        self.recordID = recordID
        self.values = values
    }
}

/// The changes of one save on one device.
public struct Transaction: Sendable, Hashable {
    /// The device that saved it.
    public var deviceID: DeviceID
    /// The device's sequence number for it: 1, 2, 3… with no gaps.
    public var sequence: UInt64
    /// Its hybrid logical clock reading; every change in it carries this
    /// version for merging.
    public var clock: HybridTimestamp
    /// The hash of the schema it was written against.
    public var schemaHash: UInt64
    /// The changes, in the order the app made them.
    public var changes: [Change]

    /// Creates a transaction.
    public init(deviceID: DeviceID, sequence: UInt64, clock: HybridTimestamp, schemaHash: UInt64, changes: [Change]) {
        self.deviceID = deviceID
        self.sequence = sequence
        self.clock = clock
        self.schemaHash = schemaHash
        self.changes = changes
    }

    /// The merge version of every change in this transaction.
    public var version: Version { Version(clock: clock, device: deviceID) }
}

/// The merge order of a change: its clock, then its device. The greater
/// version wins, the same way on every device.
public struct Version: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The hybrid logical clock reading.
    public var clock: HybridTimestamp
    /// The device that made the change.
    public var device: DeviceID

    /// Creates a version.
    public init(clock: HybridTimestamp, device: DeviceID) {
        self.clock = clock
        self.device = device
    }

    public static func < (lhs: Version, rhs: Version) -> Bool {
        (lhs.clock, lhs.device) < (rhs.clock, rhs.device)
    }

    public var description: String { "\(clock)@\(device)" }
}
