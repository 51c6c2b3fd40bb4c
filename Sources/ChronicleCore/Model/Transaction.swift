/// What an operation does to a record.
package enum ChangeKind: UInt8, Sendable, Hashable, Codable, CustomStringConvertible {
    /// Creates a record with all its fields.
    case insert = 1
    /// Changes some fields of a record; fields not named keep their values.
    case update = 2
    /// Removes a record.
    case delete = 3

    package var description: String {
        switch self {
        case .insert: return "insert"
        case .update: return "update"
        case .delete: return "delete"
        }
    }
}

/// One field and its new value.
package struct FieldValue: Sendable, Hashable {
    /// The field's name.
    package var name: String
    /// Its value.
    package var value: Value

    /// Pairs a field name with a value.
    package init(_ name: String, _ value: Value) {
        self.name = name
        self.value = value
    }
}

/// One change to one record.
package struct Change: Sendable, Hashable {
    /// Insert, update or delete.
    package var kind: ChangeKind
    /// The entity of the record.
    package var entity: String
    /// The record.
    package var recordID: RecordID
    /// For an insert, every field; for an update, the changed fields; for a
    /// delete, none.
    package var values: [FieldValue]

    /// Creates an operation.
    package init(_ kind: ChangeKind, entity: String, recordID: RecordID, values: [FieldValue] = []) {
        self.kind = kind
        self.entity = entity
        self.recordID = recordID
        self.values = values
    }
}

/// The changes of one save on one device.
package struct Transaction: Sendable, Hashable {
    /// The device that saved it.
    package var deviceID: DeviceID
    /// The device's sequence number for it: 1, 2, 3… with no gaps.
    package var sequence: UInt64
    /// Its hybrid logical clock reading; every change in it carries this
    /// version for merging.
    package var clock: HybridTimestamp
    /// The hash of the schema it was written against.
    package var schemaHash: UInt64
    /// The changes, in the order the app made them.
    package var changes: [Change]

    /// Creates a transaction.
    package init(deviceID: DeviceID, sequence: UInt64, clock: HybridTimestamp, schemaHash: UInt64, changes: [Change]) {
        self.deviceID = deviceID
        self.sequence = sequence
        self.clock = clock
        self.schemaHash = schemaHash
        self.changes = changes
    }

    /// The merge version of every change in this transaction.
    package var version: Version { Version(clock: clock, device: deviceID) }
}

/// The merge order of a change: its clock, then its device. The greater
/// version wins, the same way on every device.
package struct Version: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The hybrid logical clock reading.
    package var clock: HybridTimestamp
    /// The device that made the change.
    package var device: DeviceID

    /// Creates a version.
    package init(clock: HybridTimestamp, device: DeviceID) {
        self.clock = clock
        self.device = device
    }

    package static func < (lhs: Version, rhs: Version) -> Bool {
        (lhs.clock, lhs.device) < (rhs.clock, rhs.device)
    }

    package var description: String { "\(clock)@\(device)" }
}
