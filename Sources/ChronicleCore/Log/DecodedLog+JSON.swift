extension DecodedLog {
    /// A JSON rendering of the whole log, header and body, as printed by
    /// `chronicle dump` and pinned by the golden fixtures. Keys sort when
    /// encoded with `.sortedKeys`, so the text is stable.
    package var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["header": header.jsonValue]
        switch self {
        case .transactions(_, let transactions):
            o["transactions"] = .array(transactions.map { t in
                .object([
                    "sequence": .int(Int64(t.sequence)),
                    "clock": .string(t.clock.description),
                    "changes": .array(t.changes.map { op in
                        .object([
                            "kind": .string(op.kind.description),
                            "entity": .string(op.entity),
                            "id": .string(op.recordID.description),
                            "values": .array(op.values.map { .array([.string($0.name), $0.value.json]) }),
                        ])
                    }),
                ])
            })
        case .baseline(_, let b):
            o["vector"] = .object(Dictionary(uniqueKeysWithValues: b.vector.map { ($0.key.description, .int(Int64($0.value))) }))
            o["records"] = .array(b.records.map { r in
                var record: [String: JSONValue] = [
                    "entity": .string(r.entity),
                    "id": .string(r.recordID.description),
                    "inserted": .bool(r.inserted),
                    "fields": .array(r.fields.map {
                        .array([.string($0.name), $0.value.json, .string($0.version.description)])
                    }),
                ]
                if let d = r.deleteVersion { record["deleted"] = .string(d.description) }
                return .object(record)
            })
        }
        return .object(o)
    }
}

extension LogHeader {
    /// The header's fields as JSON.
    package var jsonValue: JSONValue {
        .object([
            "version": .int(Int64(version)),
            "headerLength": .int(Int64(headerLength)),
            "kind": .string(kind.description),
            "lz4": .bool(flags.contains(.lz4)),
            "dictionaryID": .int(Int64(dictionaryID)),
            "store": .string(storeID.description),
            "device": .string(deviceID.description),
            "firstSequence": .int(Int64(firstSequence)),
            "lastSequence": .int(Int64(lastSequence)),
            "minClock": .string(minClock.description),
            "maxClock": .string(maxClock.description),
            "schemaHash": .string(hex64(schemaHash)),
            "count": .int(Int64(count)),
            "storedBodyLength": .int(Int64(storedBodyLength)),
            "bodyLength": .int(Int64(bodyLength)),
            "bodyChecksum": .string(version == 1 ? bodyChecksum.paddedHex : UInt32(truncatingIfNeeded: bodyChecksum).paddedHex),
        ])
    }
}
