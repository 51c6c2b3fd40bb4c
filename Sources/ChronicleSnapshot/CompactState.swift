import CSQLite
import ChronicleCore
import GRDB

/// The merge state of a record that one insert wrote and nothing has changed
/// since, kept in its own row instead of `_chronicle_records`.
///
/// Most records of most stores are exactly that, and a replay of a million
/// of them paid one B-tree write for the state and another for the row. For
/// an *independent* entity (no references, no unique constraints, nothing
/// refers to it; see `EntitySQL.isIndependent`) the row of a live record is
/// its values, so such a state is fully described by the row plus the one
/// version that wrote every field: the entity table's
/// `_chronicle_version` column holds that version (24 bytes: clock, device),
/// and is NULL for every other row.
///
/// A record has its state in exactly one place: `_chronicle_records`, or a
/// row whose `_chronicle_version` is set. The first change after the insert
/// moves the state to `_chronicle_records` and clears the column (see
/// `MergeEngine.saveState`), so nothing but a first insert uses this form.
enum CompactState {
    /// The column that holds the version in every entity table.
    static let column = "_chronicle_version"

    /// Whether `state` has a compact form: inserted, not deleted, every
    /// field written by one version, and every value of a kind its column
    /// gives back exactly. Its values are then its fields' values in order.
    static func holds(_ state: RecordState, _ entity: Entity) -> Bool {
        let entries = state.fields.entries
        guard state.inserted, state.deleteVersion == nil, entries.count == entity.fields.count, let version = entries.first?.version
        else { return false }
        for (i, entry) in entries.enumerated() {
            guard entry.index == i, entry.version == version, readsBackExactly(entry.value, entity.fields[i]) else { return false }
        }
        return true
    }

    /// Whether `Value(databaseValue:field:)` gives `value` back from its
    /// column. Decimals and transformable values are stored as text whose
    /// spelling may differ from the value's, so they keep the full state.
    static func readsBackExactly(_ value: Value, _ field: Field) -> Bool {
        guard case .attribute(let type) = field.kind else { return false }
        switch (value, type) {
        case (.null, _), (.string, .string), (.int, .int64), (.double, .double), (.bool, .bool), (.date, .date),
             (.data, .data), (.uuid, .uuid):
            return true
        default:
            return false
        }
    }

    /// Binds a version as the 24-byte blob of the column.
    static func bindVersion(_ version: Version, _ binder: inout RawBinder) {
        let device = version.device.rawValue
        withUnsafeBytes(of: (version.clock.rawValue.bigEndian, device.high.bigEndian, device.low.bigEndian)) {
            binder.bind(UnsafeRawBufferPointer(rebasing: $0[0..<24]))
        }
    }

    /// The state of the current row of a `selectCompact` statement: the
    /// entity's columns, then the version.
    static func read(_ statement: OpaquePointer, _ entity: Entity) throws -> RecordState {
        var state = RecordState()
        state.inserted = true
        let column = Int32(entity.fields.count)
        let bytes = columnBytes(statement, column)
        guard bytes.count == 24 else {
            throw ChronicleError(.database, "\(entity.name).\(Self.column) holds \(bytes.count) bytes, not a 24-byte version")
        }
        let version = bytes.withUnsafeBytes { raw in
            Version(clock: HybridTimestamp(rawValue: raw.loadUnaligned(as: UInt64.self).bigEndian),
                    device: DeviceID(RecordID(bytes: UnsafeRawBufferPointer(rebasing: raw[8..<24]))))
        }
        for (i, field) in entity.fields.enumerated() {
            state.fields[i] = (try Value(databaseValue: columnValue(statement, Int32(i)), field: field), version)
        }
        return state
    }
}
