import CSQLite
import ChronicleCore
import GRDB

/// The merge state of a record whose row shows exactly its values, kept in
/// that row instead of `_chronicle_records`: a record one insert wrote, and
/// one whose attributes (neither keys nor references) updates changed since.
///
/// Most records of most stores are exactly that, and a replay of a million
/// of them paid one B-tree write for the state and another for the row
/// (and, with unique keys or references, more for `_chronicle_keys` and
/// `_chronicle_refs`). While a record's row shows exactly its values (it is
/// visible, each reference shows its raw target, no duplicate's value shows
/// instead of its own), its state is fully described by the row plus the
/// versions that wrote its fields: the entity table's `_chronicle_version`
/// column holds them (the clock and the device's number in the snapshot, 9
/// or 10 bytes for a record one version wrote whole; see `write` and
/// `writeVersions`), and is NULL for every other row. Its keys and
/// references are read from the row (see `MergeEngine.keyGroup` and
/// `scheduleReferrers`).
///
/// A record has its state in exactly one place: `_chronicle_records`, or a
/// row whose `_chronicle_version` is set. A change that would make the row
/// differ from the state first moves the state out (see
/// `MergeEngine.materialize` and `expandIndexes`): only a first insert, and
/// updates of attributes that are in no unique key to a record no
/// duplicate shares a key with, keep this form (`MergeEngine.updateCompact`).
/// See `docs/merge.md`.
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

    /// Writes a version as the column's blob into `bytes` (at least 18
    /// bytes) and returns its length: the clock (8 bytes, big-endian), then
    /// the device's number in the snapshot (`DeviceNumbers`) as a varint,
    /// 9 or 10 bytes for any store's devices. Snapshots written before
    /// devices were numbered hold 24 bytes (the clock, then the device's 16
    /// bytes), which ``read(_:_:devices:)`` still reads.
    static func write(_ version: Version, number: Int64, to bytes: UnsafeMutableRawBufferPointer) -> Int {
        bytes.storeBytes(of: version.clock.rawValue.bigEndian, toByteOffset: 0, as: UInt64.self)
        var n = UInt64(bitPattern: number)
        var i = 8
        while n >= 0x80 {
            bytes[i] = UInt8(truncatingIfNeeded: n) | 0x80
            n >>= 7
            i += 1
        }
        bytes[i] = UInt8(n)
        return i + 1
    }

    /// The versions of a record whose fields more than one version wrote:
    /// `base` (written as by ``write(_:number:to:)``), then, for each field
    /// another version wrote, in field order, the field's index (a varint)
    /// and that version (the clock, 8 bytes big-endian, and the device's
    /// number, a varint). A blob that would be 24 bytes long, the length of
    /// a version of the earlier format, gets one zero byte more.
    static func writeVersions(base: (version: Version, number: Int64), others: [(field: Int, version: Version, number: Int64)]) -> [UInt8] {
        var w = ByteWriter(capacity: 19 + others.count * 28)
        w.writeUInt64(base.version.clock.rawValue)
        w.writeVarint(UInt64(bitPattern: base.number))
        for other in others {
            w.writeVarint(UInt64(other.field))
            w.writeUInt64(other.version.clock.rawValue)
            w.writeVarint(UInt64(bitPattern: other.number))
        }
        if w.count == 24 { w.writeUInt8(0) }
        return w.bytes
    }

    /// The version a column's blob holds for each field (see
    /// ``write(_:number:to:)`` and ``writeVersions(base:others:)``).
    static func versions(_ bytes: UnsafeRawBufferPointer, _ entity: Entity, devices: DeviceNumbers) throws -> (base: Version, others: [(field: Int, version: Version)]) {
        let clock = bytes.count >= 9 ? HybridTimestamp(rawValue: bytes.loadUnaligned(as: UInt64.self).bigEndian) : .zero
        if bytes.count == 24 {
            return (Version(clock: clock, device: DeviceID(RecordID(bytes: UnsafeRawBufferPointer(rebasing: bytes[8..<24])))), [])
        }
        let what = "\(entity.name).\(Self.column) holds \(bytes.count) bytes that are no versions (a clock and a numbered device, then the fields other versions wrote)"
        guard bytes.count >= 9 else { throw ChronicleError(.databaseCorrupt, what) }
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[8...]), errorCode: .databaseCorrupt, context: "version")
        func device() throws -> DeviceID {
            guard let number = try? reader.readVarint(), let device = try devices.device(Int64(bitPattern: number)) else {
                throw ChronicleError(.databaseCorrupt, what)
            }
            return device
        }
        let base = Version(clock: clock, device: try device())
        var others: [(field: Int, version: Version)] = []
        while !reader.isAtEnd {
            // The byte that keeps a blob off 24 bytes.
            if bytes.count == 25, reader.remaining == 1, bytes[24] == 0 { break }
            guard let field = try? reader.readVarint(), field < entity.fields.count, others.last.map({ $0.field < Int(field) }) ?? true,
                  let raw = try? reader.readSlice(8, "clock")
            else { throw ChronicleError(.databaseCorrupt, what) }
            let clock = HybridTimestamp(rawValue: raw.loadUnaligned(as: UInt64.self).bigEndian)
            others.append((Int(field), Version(clock: clock, device: try device())))
        }
        return (base, others)
    }

    /// The state of the current row of a `selectCompact` statement: the
    /// entity's columns, then the versions.
    static func read(_ statement: OpaquePointer, _ entity: Entity, devices: DeviceNumbers) throws -> RecordState {
        var state = RecordState()
        state.inserted = true
        let column = Int32(entity.fields.count)
        let (base, others) = try columnBytes(statement, column).withUnsafeBytes { try Self.versions($0, entity, devices: devices) }
        var next = 0
        for (i, field) in entity.fields.enumerated() {
            var version = base
            if next < others.count, others[next].field == i {
                version = others[next].version
                next += 1
            }
            state.fields[i] = (try Value(databaseValue: columnValue(statement, Int32(i)), field: field), version)
        }
        return state
    }
}

/// The snapshot's numbers for the devices whose versions compact states
/// hold (`_chronicle_devices`), so that a compact row keeps a small number
/// instead of a device's 16 bytes. Numbers are assigned as devices first
/// write a compact state and never change. One instance serves one
/// transaction: a number assigned in a transaction that rolls back is gone
/// with it, and so is the instance that knew it.
final class DeviceNumbers {
    private let db: Database
    private var numbers: [DeviceID: Int64] = [:]
    private var devices: [Int64: DeviceID] = [:]

    init(_ db: Database) { self.db = db }

    /// The table, in a snapshot created or opened by this version.
    static let createTable = "CREATE TABLE IF NOT EXISTS _chronicle_devices (number INTEGER PRIMARY KEY, device BLOB NOT NULL UNIQUE)"

    /// `device`'s number, assigned now if it has none.
    func number(of device: DeviceID) throws -> Int64 {
        if let number = numbers[device] { return number }
        let number: Int64
        if let known = try db.first("SELECT number FROM _chronicle_devices WHERE device = ?", { $0.bind(device.rawValue) }, read: { sqlite3_column_int64($0, 0) }) {
            number = known
        } else {
            try db.run(db.cachedStatement(sql: "INSERT INTO _chronicle_devices (device) VALUES (?)").sqliteStatement) { $0.bind(device.rawValue) }
            number = db.lastInsertedRowID
        }
        numbers[device] = number
        devices[number] = device
        return number
    }

    /// The device numbered `number`, if any.
    func device(_ number: Int64) throws -> DeviceID? {
        if let device = devices[number] { return device }
        guard let bytes = try db.first("SELECT device FROM _chronicle_devices WHERE number = ?", { $0.bind(number) }, read: { columnBytes($0, 0) }),
              bytes.count == 16 else { return nil }
        let device = DeviceID(bytes.withUnsafeBytes { RecordID(bytes: $0) })
        numbers[device] = number
        devices[number] = device
        return device
    }
}
