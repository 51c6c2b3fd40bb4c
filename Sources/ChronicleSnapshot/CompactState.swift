import CSQLite
import ChronicleCore
import GRDB

/// The merge state of a record that one insert wrote and nothing has changed
/// since, kept in its own row instead of `_chronicle_records`.
///
/// Most records of most stores are exactly that, and a replay of a million
/// of them paid one B-tree write for the state and another for the row
/// (and, with unique keys or references, more for `_chronicle_keys` and
/// `_chronicle_refs`). While a record's row shows exactly its values (it is
/// visible, each reference shows its raw target, no duplicate's value shows
/// instead of its own), its state is fully described by the row plus the
/// one version that wrote every field: the entity table's
/// `_chronicle_version` column holds that version (24 bytes: clock, device),
/// and is NULL for every other row. Its keys and references are read from
/// the row (see `MergeEngine.keyGroup` and `scheduleReferrers`).
///
/// A record has its state in exactly one place: `_chronicle_records`, or a
/// row whose `_chronicle_version` is set. A change that would make the row
/// differ from the state first moves the state out (see
/// `MergeEngine.materialize` and `expandIndexes`), so nothing but a first
/// insert uses this form. See `docs/merge.md`.
enum CompactState {
    /// The column that holds the version in every entity table.
    static let column = "_chronicle_version"

    /// Whether the state an insert with `values` gives a new record has a
    /// compact form: inserted, not deleted, every field written by the one
    /// version, each value of a kind its column gives back exactly. Checked
    /// on the change itself (one value per field, in field order), so a new
    /// record's state need not be built.
    static func holds(insert values: [(field: Int, value: Value)], _ entity: Entity) -> Bool {
        guard values.count == entity.fields.count else { return false }
        for (i, v) in values.enumerated() {
            guard v.field == i, readsBackExactly(v.value, entity.fields[i]) else { return false }
        }
        return true
    }

    /// `holds(insert:_:)` for values still in the log's encoding, whose tags
    /// the decoder has checked against their fields: every tag but decimal
    /// (8), transformable (10) and reference (11) reads back exactly.
    static func holds(insert values: [(field: Int, value: RawValue)], _ entity: Entity) -> Bool {
        guard values.count == entity.fields.count else { return false }
        for (i, v) in values.enumerated() {
            guard v.field == i, v.value.tag < 8 || v.value.tag == 9 else { return false }
        }
        return true
    }

    /// Whether `Value(databaseValue:field:)` gives `value` back from its
    /// column. Decimals and transformable values are stored as text whose
    /// spelling may differ from the value's, so they keep the full state.
    static func readsBackExactly(_ value: Value, _ field: Field) -> Bool {
        guard case .attribute(let type) = field.kind else {
            // A reference's raw target: the row shows it as long as the
            // target is visible (see `MergeEngine.compactRow`).
            switch value { case .null, .reference: return true; default: return false }
        }
        switch (value, type) {
        case (.null, _), (.string, .string), (.int, .int64), (.double, .double), (.bool, .bool), (.date, .date),
             (.data, .data), (.uuid, .uuid):
            return true
        default:
            return false
        }
    }

    /// Writes a version as the 24-byte blob of the column into `bytes`.
    static func write(_ version: Version, to bytes: UnsafeMutableRawBufferPointer) {
        let device = version.device.rawValue
        bytes.storeBytes(of: version.clock.rawValue.bigEndian, toByteOffset: 0, as: UInt64.self)
        bytes.storeBytes(of: device.high.bigEndian, toByteOffset: 8, as: UInt64.self)
        bytes.storeBytes(of: device.low.bigEndian, toByteOffset: 16, as: UInt64.self)
    }

    /// The state of the current row of a `selectCompact` statement: the
    /// entity's columns, then the version.
    static func read(_ statement: OpaquePointer, _ entity: Entity) throws -> RecordState {
        var state = RecordState()
        state.inserted = true
        let column = Int32(entity.fields.count)
        let bytes = columnBytes(statement, column)
        guard bytes.count == 24 else {
            throw ChronicleError(.databaseCorrupt, "\(entity.name).\(Self.column) holds \(bytes.count) bytes, not a 24-byte version")
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
