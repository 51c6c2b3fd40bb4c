/// The uncompressed body of a log (see `docs/log-format.md`).
///
/// Transactions body, per transaction: sequence (varint), HLC (8 bytes),
/// operation count (varint), then per operation: kind (1 byte), entity name
/// (varint length + UTF-8), record ID (16 bytes), value count (varint), then
/// per value: field name (varint length + UTF-8) and the value (``ValueCodec``).
///
/// Baseline body: device count (varint), per device its ID (16 bytes) and
/// highest sequence (varint); record count (varint), per record: entity name,
/// record ID, flags (1 byte: bit 0 inserted, bit 1 deleted), the delete's
/// version if deleted, field count, per field: name, value, version. A
/// version is an HLC (8 bytes) and a device index (varint, into the list).
enum BodyCodec {
    static func write(_ t: Transaction, to w: inout ByteWriter) {
        write(sequence: t.sequence, clock: t.clock, inserts: nil, changes: t.changes, to: &w)
    }

    /// Writes a transaction whose first changes are the inserts of
    /// `inserts`, in order, then `changes`: the same bytes as a
    /// ``Transaction`` holding the inserts as ``Change`` values.
    static func write(sequence: UInt64, clock: HybridTimestamp, inserts: InsertBatch?, changes: [Change], to w: inout ByteWriter) {
        w.writeVarint(sequence)
        w.writeUInt64(clock.rawValue)
        w.writeVarint(UInt64(changes.count + (inserts?.count ?? 0)))
        if let inserts {
            let fields = inserts.fieldNames.count
            // Names as they are encoded, once for the whole batch.
            var head = ByteWriter(capacity: 32)
            head.writeUInt8(ChangeKind.insert.rawValue)
            head.writeString(inserts.entity)
            let names = inserts.fieldNames.map { name in
                var n = ByteWriter(capacity: name.utf8.count + 2)
                n.writeString(name)
                return n.bytes
            }
            var count = ByteWriter(capacity: 4)
            count.writeVarint(UInt64(fields))
            inserts.values.withUnsafeBufferPointer { values in
                for (r, id) in inserts.ids.enumerated() {
                    head.withUnsafeBytes { w.writeRaw($0) }
                    w.writeRecordID(id)
                    count.withUnsafeBytes { w.writeRaw($0) }
                    for f in 0..<fields {
                        names[f].withUnsafeBytes { w.writeRaw($0) }
                        ValueCodec.write(values[r * fields + f], to: &w)
                    }
                }
            }
        }
        // Elements are borrowed through buffer pointers: `for x in` copies
        // each change and value, retaining every string on the way.
        changes.withUnsafeBufferPointer { changes in
            for c in changes.indices {
                w.writeUInt8(changes[c].kind.rawValue)
                w.writeString(changes[c].entity)
                w.writeRecordID(changes[c].recordID)
                w.writeVarint(UInt64(changes[c].values.count))
                changes[c].values.withUnsafeBufferPointer { values in
                    for v in values.indices {
                        w.writeString(values[v].name)
                        ValueCodec.write(values[v].value, to: &w)
                    }
                }
            }
        }
    }

    /// About how many bytes `t`'s body takes (exact for most values), to
    /// size the writer once.
    static func estimatedSize(_ t: Transaction) -> Int {
        var size = 24
        t.changes.withUnsafeBufferPointer { changes in
            for c in changes.indices {
                size += 48 + changes[c].values.count * 16
                changes[c].values.withUnsafeBufferPointer { values in
                    for v in values.indices { size += values[v].value.estimatedSize }
                }
            }
        }
        return size
    }

    /// Writes a baseline (part) and returns its smallest and largest
    /// clocks (zero for a part without versions).
    static func write(_ b: Baseline, to w: inout ByteWriter) -> (min: HybridTimestamp, max: HybridTimestamp) {
        let devices = b.vector.keys.sorted()
        var deviceIndex: [DeviceID: Int] = [:]
        for (i, d) in devices.enumerated() { deviceIndex[d] = i }
        // A version's device must be in the list; add any that are missing
        // with sequence 0 so the index always resolves.
        var extra: [DeviceID] = []
        func index(_ d: DeviceID) -> Int {
            if let i = deviceIndex[d] { return i }
            let i = devices.count + extra.count
            extra.append(d)
            deviceIndex[d] = i
            return i
        }
        var minClock = HybridTimestamp(rawValue: .max)
        var maxClock = HybridTimestamp.zero
        func version(_ v: Version, to w: inout ByteWriter) {
            w.writeUInt64(v.clock.rawValue)
            w.writeVarint(UInt64(index(v.device)))
            minClock = min(minClock, v.clock)
            maxClock = max(maxClock, v.clock)
        }
        var records = ByteWriter(capacity: 64 * b.records.count + 16)
        records.writeVarint(UInt64(b.records.count))
        for rec in b.records {
            records.writeString(rec.entity)
            records.writeRecordID(rec.recordID)
            records.writeUInt8((rec.inserted ? 1 : 0) | (rec.deleteVersion != nil ? 2 : 0))
            if let d = rec.deleteVersion { version(d, to: &records) }
            records.writeVarint(UInt64(rec.fields.count))
            for f in rec.fields {
                records.writeString(f.name)
                ValueCodec.write(f.value, to: &records)
                version(f.version, to: &records)
            }
        }
        w.writeVarint(UInt64(devices.count + extra.count))
        for d in devices + extra {
            w.writeRecordID(d.rawValue)
            w.writeVarint(b.vector[d] ?? 0)
        }
        records.withUnsafeBytes { w.writeRaw($0) }
        return minClock.rawValue == .max ? (.zero, .zero) : (minClock, maxClock)
    }
}
