import ChronicleCore

/// Field values with their versions, ordered by field index: a few entries
/// per record, so a sorted array beats a dictionary (no hashing, one
/// allocation, encodes in order without sorting).
struct FieldSlots: Equatable {
    struct Entry: Equatable {
        var index: Int
        var value: Value
        var version: Version
    }

    private(set) var entries: [Entry] = []

    var count: Int { entries.count }

    /// Makes room for `count` fields, so an insert's fields arrive without
    /// the array growing one step at a time.
    mutating func reserveCapacity(_ count: Int) { entries.reserveCapacity(count) }

    subscript(index: Int) -> (value: Value, version: Version)? {
        get {
            for e in entries {
                if e.index == index { return (e.value, e.version) }
                if e.index > index { break }
            }
            return nil
        }
        set {
            // Fields usually arrive in index order: append without a search.
            if let new = newValue, entries.last.map({ $0.index < index }) ?? true {
                entries.append(Entry(index: index, value: new.value, version: new.version))
                return
            }
            var position = entries.count
            for (i, e) in entries.enumerated() where e.index >= index {
                position = i
                break
            }
            let present = position < entries.count && entries[position].index == index
            switch (newValue, present) {
            case (let new?, true): entries[position].value = new.value; entries[position].version = new.version
            case (let new?, false): entries.insert(Entry(index: index, value: new.value, version: new.version), at: position)
            case (nil, true): entries.remove(at: position)
            case (nil, false): break
            }
        }
    }
}

/// Everything every device knows about one record, whatever order the changes
/// arrived in: each field's value with the version that wrote it, whether an
/// insert was seen, and the newest delete. Merging two states is a join (each
/// part only grows), so the result does not depend on order. What the app sees
/// is computed from it (see ``MergeEngine``).
struct RecordState: Equatable {
    /// Per field index: the value and the version that wrote it.
    var fields = FieldSlots()
    /// Whether an insert of this record was applied.
    var inserted = false
    /// The newest delete, if any.
    var deleteVersion: Version?

    init() {}

    /// The newest write to any field.
    var newestWrite: Version? { fields.entries.lazy.map(\.version).max() }

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

    /// Merges everything `other` knows into this state (a join: the result
    /// does not depend on order, and joining twice changes nothing more).
    mutating func join(_ other: RecordState) {
        if other.inserted { inserted = true }
        if let d = other.deleteVersion { delete(d) }
        if fields.count == 0 { fields.reserveCapacity(other.fields.count) }
        for entry in other.fields.entries { write(field: entry.index, entry.value, entry.version) }
    }

    /// The one version that wrote every field, if there is one, the record
    /// is inserted and never deleted: then the state may be compact (see
    /// `CompactState`).
    var soleVersion: Version? {
        guard inserted, deleteVersion == nil, let first = fields.entries.first?.version else { return nil }
        for entry in fields.entries where entry.version != first { return nil }
        return first
    }

    // MARK: Encoding

    /// Layout (snapshot format 2): flags (bit 0 inserted, bit 1 has delete),
    /// [delete clock u64, delete device 16], version count varint, the
    /// distinct versions that wrote fields (clock u64, device 16 each), field
    /// count varint, per field: index varint, version number varint (into the
    /// list), value. Fields in index order and versions in order of first use,
    /// so equal states encode equally. Most records were written by one or two
    /// saves, so listing each version once halves the state of a typical record.
    func encoded() -> [UInt8] {
        var versions: [Version] = []
        var numbers: [Int] = []
        numbers.reserveCapacity(fields.count)
        for entry in fields.entries {
            let version = entry.version
            if let n = versions.firstIndex(of: version) {
                numbers.append(n)
            } else {
                numbers.append(versions.count)
                versions.append(version)
            }
        }
        var w = ByteWriter(capacity: 32 + versions.count * 24 + fields.count * 16)
        w.writeUInt8((inserted ? 1 : 0) | (deleteVersion != nil ? 2 : 0))
        if let d = deleteVersion {
            w.writeUInt64(d.clock.rawValue)
            w.writeRecordID(d.device.rawValue)
        }
        w.writeVarint(UInt64(versions.count))
        for v in versions {
            w.writeUInt64(v.clock.rawValue)
            w.writeRecordID(v.device.rawValue)
        }
        w.writeVarint(UInt64(fields.count))
        for (i, entry) in fields.entries.enumerated() {
            w.writeVarint(UInt64(entry.index))
            w.writeVarint(UInt64(numbers[i]))
            w.writeValue(entry.value)
        }
        return w.bytes
    }

    /// Decodes what ``encoded()`` wrote; a damaged state is a typed error.
    init(encoded bytes: [UInt8]) throws(ChronicleError) {
        self = try bytes.withBytes { raw throws(ChronicleError) -> RecordState in
            var r = ByteReader(raw, errorCode: .malformedBody, context: "record state")
            var s = RecordState()
            let flags = try r.readUInt8()
            guard flags & ~3 == 0 else { throw ChronicleError(.malformedBody, "record state has unknown flags \(flags)") }
            s.inserted = flags & 1 != 0
            if flags & 2 != 0 {
                let clock = HybridTimestamp(rawValue: try r.readUInt64())
                s.deleteVersion = Version(clock: clock, device: DeviceID(RecordID(bytes: try r.readSlice(16, "device"))))
            }
            let versionCount = try r.readLength(max: raw.count / 24, "version count")
            var versions: [Version] = []
            versions.reserveCapacity(versionCount)
            for _ in 0..<versionCount {
                let clock = HybridTimestamp(rawValue: try r.readUInt64())
                versions.append(Version(clock: clock, device: DeviceID(RecordID(bytes: try r.readSlice(16, "device")))))
            }
            let count = try r.readLength(max: raw.count, "field count")
            var previous = -1
            for _ in 0..<count {
                let index = try r.readLength(max: Int(UInt16.max), "field index")
                guard index > previous else { throw ChronicleError(.malformedBody, "record state lists field \(index) out of order") }
                previous = index
                let number = try r.readLength(max: Int(UInt32.max), "version number")
                guard number < versionCount else { throw ChronicleError(.malformedBody, "record state names version \(number) of \(versionCount)") }
                let value = try r.readValue(limit: raw.count)
                s.fields[index] = (value, versions[number])
            }
            guard r.isAtEnd else { throw ChronicleError(.malformedBody, "record state has trailing bytes") }
            return s
        }
    }
}
