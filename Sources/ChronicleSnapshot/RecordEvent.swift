import ChronicleCore

/// What happened to one record, as the app sees it.
public struct RecordEvent: Sendable, Hashable, CustomStringConvertible {
    /// The kind of visible change.
    public enum Kind: String, Sendable, Hashable {
        /// The record appeared.
        case inserted
        /// Some of its columns changed.
        case updated
        /// The record disappeared (deleted, cascaded, or merged into a duplicate).
        case deleted
    }

    /// Where the change came from.
    public enum Origin: String, Sendable, Hashable {
        /// A save on this device.
        case local
        /// A log imported from another device.
        case imported
    }

    /// The entity.
    public var entity: String
    /// The record.
    public var recordID: RecordID
    /// What happened.
    public var kind: Kind
    /// Where it came from.
    public var origin: Origin

    public var description: String { "\(kind) \(entity) \(recordID) (\(origin))" }
}
