import ChronicleCore

/// Everything every device knows about one record, whatever order the changes
/// arrived in: each field's value with the version that wrote it, whether an
/// insert was seen, and the newest delete. Merging two states is a join (each
/// part only grows), so the result does not depend on order. What the app sees
/// is computed from it (see ``MergeEngine``).
struct RecordState: Equatable {
    /// Per field index: the value and the version that wrote it.
    var fields: [Int: (value: Value, version: Version)] = [:]
    /// Whether an insert of this record was applied.
    var inserted = false
    /// The newest delete, if any.
    var deleteVersion: Version?

    init() {}

    static func == (lhs: RecordState, rhs: RecordState) -> Bool {
        lhs.inserted == rhs.inserted && lhs.deleteVersion == rhs.deleteVersion
            && lhs.fields.count == rhs.fields.count
            && lhs.fields.allSatisfy { k, v in rhs.fields[k].map { $0.value == v.value && $0.version == v.version } ?? false }
    }

    /// The newest write to any field.
    var newestWrite: Version? { fields.values.map(\.version).max() }

    /// Whether the record exists by its own state: inserted, and some write is
    /// newer than the newest delete.
    var isLive: Bool {
        guard inserted else { return false }
        guard let deleteVersion else { return true }
        guard let newest = newestWrite else { return false }
        return newest > deleteVersion
    }

    /// Sets a field if `version` is newer than what it holds. Returns whether it changed.
    @discardableResult
    mutating func write(field: Int, _ value: Value, _ version: Version) -> Bool {
        if let current = fields[field], current.version >= version { return false }
        fields[field] = (value, version)
        return true
    }

    /// Records a delete. Returns whether it changed anything.
    @discardableResult
    mutating func delete(_ version: Version) -> Bool {
        if let current = deleteVersion, current >= version { return false }
        deleteVersion = version
        return true
    }

    // MARK: Encoding

    /// Layout: flags (bit 0 inserted, bit 1 has delete), [delete clock u64,
    /// delete device 16], field count varint, per field: index varint, value,
    /// clock u64, device 16. Fields in index order, so equal states encode equally.
    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 32 + fields.count * 48)
        w.writeUInt8((inserted ? 1 : 0) | (deleteVersion != nil ? 2 : 0))
        if let d = deleteVersion {
            w.writeUInt64(d.clock.rawValue)
            w.writeRecordID(d.device.rawValue)
        }
        w.writeVarint(UInt64(fields.count))
        for index in fields.keys.sorted() {
            let f = fields[index]!
            w.writeVarint(UInt64(index))
            w.writeValue(f.value)
            w.writeUInt64(f.version.clock.rawValue)
            w.writeRecordID(f.version.device.rawValue)
        }
        return w.bytes
    }

    /// Decodes what ``encoded()`` wrote; a damaged state is a typed error.
    init(encoded bytes: [UInt8]) throws(ChronicleError) {
        self = try bytes.withBytes { raw throws(ChronicleError) -> RecordState in
            var r = ByteReader(raw, errorCode: .malformedBody, context: "record state")
            var s = RecordState()
            let flags = try r.readUInt8()
            s.inserted = flags & 1 != 0
            if flags & 2 != 0 {
                let clock = HybridTimestamp(rawValue: try r.readUInt64())
                s.deleteVersion = Version(clock: clock, device: DeviceID(RecordID(bytes: try r.readSlice(16, "device"))))
            }
            let count = try r.readLength(max: raw.count, "field count")
            for _ in 0..<count {
                let index = try r.readLength(max: Int(UInt16.max), "field index")
                let value = try r.readValue(limit: raw.count)
                let clock = HybridTimestamp(rawValue: try r.readUInt64())
                let device = DeviceID(RecordID(bytes: try r.readSlice(16, "device")))
                s.fields[index] = (value, Version(clock: clock, device: device))
            }
            return s
        }
    }
}
