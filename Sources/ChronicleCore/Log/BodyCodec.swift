/// The uncompressed body of a log (see `docs/log-format.md`).
///
/// Transactions body, per transaction: sequence (varint), HLC (8 bytes),
/// operation count (varint), then per operation: kind (1 byte), entity name
/// (varint length + UTF-8), record ID (16 bytes), value count (varint), then
/// per value: field name (varint length + UTF-8) and the value (``ValueCodec``).
///
/// Baseline body: device count (varint), per device its ID (16 bytes) and
/// highest sequence (varint); record count (varint), per record: entity name,
/// record ID, field count, per field: name, value, HLC (8 bytes), device index
/// (varint, into the device list); tombstone count (varint), per tombstone:
/// entity name, record ID, HLC, device index.
enum BodyCodec {
    static func write(_ t: Transaction, to w: inout ByteWriter) {
        w.writeVarint(t.sequence)
        w.writeUInt64(t.clock.rawValue)
        w.writeVarint(UInt64(t.changes.count))
        // Elements are borrowed through buffer pointers: `for x in` copies
        // each change and value, retaining every string on the way.
        t.changes.withUnsafeBufferPointer { changes in
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

    /// Writes a baseline and returns its largest clock.
    static func write(_ b: Baseline, to w: inout ByteWriter) -> HybridTimestamp {
        let devices = b.vector.keys.sorted()
        var deviceIndex: [DeviceID: Int] = [:]
        for (i, d) in devices.enumerated() { deviceIndex[d] = i }
        // A version's device must be in the vector; add any that are missing
        // with sequence 0 so the index always resolves.
        var extra: [DeviceID] = []
        func index(_ d: DeviceID) -> Int {
            if let i = deviceIndex[d] { return i }
            let i = devices.count + extra.count
            extra.append(d)
            deviceIndex[d] = i
            return i
        }
        var maxClock = HybridTimestamp.zero
        var records = ByteWriter(capacity: 64 * b.records.count)
        records.writeVarint(UInt64(b.records.count))
        for rec in b.records {
            records.writeString(rec.entity)
            records.writeRecordID(rec.recordID)
            records.writeVarint(UInt64(rec.fields.count))
            for f in rec.fields {
                records.writeString(f.name)
                ValueCodec.write(f.value, to: &records)
                records.writeUInt64(f.version.clock.rawValue)
                records.writeVarint(UInt64(index(f.version.device)))
                maxClock = max(maxClock, f.version.clock)
            }
        }
        records.writeVarint(UInt64(b.tombstones.count))
        for t in b.tombstones {
            records.writeString(t.entity)
            records.writeRecordID(t.recordID)
            records.writeUInt64(t.version.clock.rawValue)
            records.writeVarint(UInt64(index(t.version.device)))
            maxClock = max(maxClock, t.version.clock)
        }
        w.writeVarint(UInt64(devices.count + extra.count))
        for d in devices + extra {
            w.writeRecordID(d.rawValue)
            w.writeVarint(b.vector[d] ?? 0)
        }
        records.withUnsafeBytes { w.writeRaw($0) }
        return maxClock
    }
}
