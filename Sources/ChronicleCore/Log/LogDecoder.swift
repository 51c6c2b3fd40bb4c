/// Verifies and decodes log bytes. Any byte string gives either a valid
/// ``DecodedLog`` or a ``ChronicleError`` naming what is wrong; the decoder
/// never traps and never allocates more than ``DecodingLimits/maxBodyBytes``
/// for a body.
///
/// Checks run in this order, so the cheapest reliable check speaks first:
/// magic, version, header checksum, header consistency, declared sizes against
/// the cap, total length, body checksum, dictionary, decompression, body
/// structure, and (with a schema) entity and field names and value types.
///
/// ```swift
/// let decoder = LogDecoder(schema: schema)
/// switch try decoder.decode(bytes) {
/// case .transactions(let header, let transactions): …
/// case .baseline(let header, let baseline): …
/// }
/// ```
public struct LogDecoder: Sendable {
    /// The schema names are resolved against; nil to decode any names.
    public let schema: Schema?
    /// Size bounds.
    public let limits: DecodingLimits
    private let dictionaries: [UInt32: CompressionDictionary]

    /// Creates a decoder.
    public init(schema: Schema?, limits: DecodingLimits = DecodingLimits(), dictionaries: [CompressionDictionary] = []) {
        self.schema = schema
        self.limits = limits
        var byID: [UInt32: CompressionDictionary] = [:]
        for d in dictionaries { byID[d.id] = d }
        self.dictionaries = byID
    }

    /// Verifies the header alone (magic, version, checksum, consistency).
    public func header(of bytes: [UInt8]) throws(ChronicleError) -> LogHeader {
        try bytes.withBytes { raw throws(ChronicleError) in try LogHeader.decode(raw) }
    }

    /// Verifies and decodes a whole log.
    public func decode(_ bytes: [UInt8]) throws(ChronicleError) -> DecodedLog {
        try bytes.withBytes { raw throws(ChronicleError) in try decode(raw) }
    }

    /// Verifies and decodes a whole log from borrowed memory.
    public func decode(_ bytes: UnsafeRawBufferPointer) throws(ChronicleError) -> DecodedLog {
        let header = try LogHeader.decode(bytes)
        let body = try self.body(of: header, in: bytes)
        if let schema, header.schemaHash != schema.hash {
            throw ChronicleError(.schemaMismatch,
                                 "log was written for schema \(hex64(header.schemaHash)), this device uses \(schema.hashString)")
        }
        return try body.withBytes { raw throws(ChronicleError) -> DecodedLog in
            var parser = BodyParser(schema: schema, header: header, reader: ByteReader(raw, errorCode: .malformedBody, context: "body"))
            switch header.kind {
            case .transactions: return .transactions(header, try parser.transactions())
            case .baseline: return .baseline(header, try parser.baseline())
            }
        }
    }

    /// Checks sizes and the body checksum, then decompresses the body.
    private func body(of header: LogHeader, in bytes: UnsafeRawBufferPointer) throws(ChronicleError) -> [UInt8] {
        for (name, value) in [("uncompressed", header.bodyLength), ("stored", header.storedBodyLength)]
        where Int(value) > limits.maxBodyBytes {
            throw ChronicleError(.sizeOverCap, "declared \(name) body of \(value) bytes exceeds the cap of \(limits.maxBodyBytes)")
        }
        if bytes.count < header.totalLength {
            throw ChronicleError(.shortRead, "log is \(bytes.count) bytes, its header declares \(header.totalLength)")
        }
        if bytes.count > header.totalLength {
            throw ChronicleError(.malformedBody, "log has \(bytes.count - header.totalLength) bytes after the declared end")
        }
        let stored = UnsafeRawBufferPointer(rebasing: bytes[LogHeader.size...])
        let checksum = XXH64.hash(stored)
        guard checksum == header.bodyChecksum else {
            throw ChronicleError(.bodyChecksumMismatch,
                                 "body hashes to \(hex64(checksum)), header says \(hex64(header.bodyChecksum))")
        }
        guard header.flags.contains(.lz4) else { return Array(stored) }
        var dictionary: CompressionDictionary?
        if header.flags.contains(.dictionary) {
            guard let d = dictionaries[header.dictionaryID] else {
                throw ChronicleError(.unknownDictionary, "log needs compression dictionary \(header.dictionaryID), which this device does not have")
            }
            dictionary = d
        }
        return try LZ4Block.decompress(stored, length: Int(header.bodyLength), dictionary: dictionary)
    }
}

/// Parses a decompressed body, resolving names against the schema.
private struct BodyParser {
    let schema: Schema?
    let header: LogHeader
    var reader: ByteReader

    private var limit: Int { reader.count }

    mutating func transactions() throws(ChronicleError) -> [Transaction] {
        var result: [Transaction] = []
        result.reserveCapacity(Int(min(header.count, 1 << 16)))
        for i in 0..<UInt64(header.count) {
            let sequence = try reader.readVarint("sequence")
            guard sequence == header.firstSequence + i else {
                throw fail("transaction \(i) has sequence \(sequence), expected \(header.firstSequence + i)")
            }
            let clock = HybridTimestamp(rawValue: try reader.readUInt64("clock"))
            guard clock >= header.minClock, clock <= header.maxClock else {
                throw fail("transaction \(sequence) clock \(clock) is outside the header's range")
            }
            let opCount = try reader.readLength(max: reader.remaining, "change count")
            var changes: [Change] = []
            changes.reserveCapacity(opCount)
            for _ in 0..<opCount {
                changes.append(try change())
            }
            result.append(Transaction(deviceID: header.deviceID, sequence: sequence, clock: clock,
                                      schemaHash: header.schemaHash, changes: changes))
        }
        guard reader.isAtEnd else { throw fail("\(reader.remaining) bytes after the last transaction") }
        return result
    }

    private mutating func change() throws(ChronicleError) -> Change {
        let kindByte = try reader.readUInt8("change kind")
        guard let kind = ChangeKind(rawValue: kindByte) else {
            throw fail("unknown change kind \(kindByte) at offset \(reader.offset - 1)")
        }
        let (entityName, entity) = try entityName()
        let id = RecordID(bytes: try reader.readSlice(16, "record ID"))
        let count = try reader.readLength(max: entity.map { $0.fields.count } ?? reader.remaining, "value count")
        if kind == .delete && count != 0 { throw fail("a delete of \(id) carries \(count) values") }
        var values: [FieldValue] = []
        values.reserveCapacity(count)
        for _ in 0..<count {
            let (name, field) = try fieldName(in: entity, entityName: entityName)
            let value = try ValueCodec.read(from: &reader, limit: limit)
            if let field, !field.accepts(value) {
                throw fail("value \(value) does not fit \(entityName).\(name)")
            }
            values.append(FieldValue(name, value))
        }
        return Change(kind, entity: entityName, recordID: id, values: values)
    }

    mutating func baseline() throws(ChronicleError) -> Baseline {
        let deviceCount = try reader.readLength(max: reader.remaining / 17, "device count")
        var devices: [DeviceID] = []
        var vector: [DeviceID: UInt64] = [:]
        for _ in 0..<deviceCount {
            let d = DeviceID(RecordID(bytes: try reader.readSlice(16, "device ID")))
            let seq = try reader.readVarint("device sequence")
            devices.append(d)
            if seq > 0 { vector[d] = seq }
        }
        func device(_ index: Int) throws(ChronicleError) -> DeviceID {
            guard index < devices.count else { throw ChronicleError(.malformedBody, "body: device index \(index) out of range") }
            return devices[index]
        }
        let recordCount = try reader.readLength(max: reader.remaining, "record count")
        guard recordCount == Int(header.count) else { throw fail("\(recordCount) records, header says \(header.count)") }
        var records: [Baseline.Record] = []
        records.reserveCapacity(recordCount)
        for _ in 0..<recordCount {
            let (entityName, entity) = try entityName()
            let id = RecordID(bytes: try reader.readSlice(16, "record ID"))
            let count = try reader.readLength(max: entity.map { $0.fields.count } ?? reader.remaining, "field count")
            var fields: [Baseline.VersionedValue] = []
            fields.reserveCapacity(count)
            for _ in 0..<count {
                let (name, field) = try fieldName(in: entity, entityName: entityName)
                let value = try ValueCodec.read(from: &reader, limit: limit)
                if let field, !field.accepts(value) { throw fail("value \(value) does not fit \(entityName).\(name)") }
                let clock = HybridTimestamp(rawValue: try reader.readUInt64("clock"))
                let d = try device(try reader.readLength(max: Int.max, "device index"))
                fields.append(Baseline.VersionedValue(name: name, value: value, version: Version(clock: clock, device: d)))
            }
            records.append(Baseline.Record(entity: entityName, recordID: id, fields: fields))
        }
        let tombstoneCount = try reader.readLength(max: reader.remaining, "tombstone count")
        var tombstones: [Baseline.Tombstone] = []
        for _ in 0..<tombstoneCount {
            let (entityName, _) = try entityName()
            let id = RecordID(bytes: try reader.readSlice(16, "record ID"))
            let clock = HybridTimestamp(rawValue: try reader.readUInt64("clock"))
            let d = try device(try reader.readLength(max: Int.max, "device index"))
            tombstones.append(Baseline.Tombstone(entity: entityName, recordID: id, version: Version(clock: clock, device: d)))
        }
        guard reader.isAtEnd else { throw fail("\(reader.remaining) bytes after the tombstones") }
        return Baseline(vector: vector, records: records, tombstones: tombstones)
    }

    /// Reads an entity name; with a schema, resolves it without allocating.
    private mutating func entityName() throws(ChronicleError) -> (String, Entity?) {
        let raw = try reader.readLengthPrefixed(max: Schema.maxNameLength, "entity name")
        guard let schema else {
            guard let s = String(validating: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
                throw fail("entity name is not UTF-8")
            }
            return (s, nil)
        }
        guard let i = schema.entityIndex(utf8: raw) else {
            throw ChronicleError(.unknownEntity, "body: entity '\(String(decoding: raw, as: UTF8.self))' is not in the schema")
        }
        let entity = schema.entities[i]
        return (entity.name, entity)
    }

    private mutating func fieldName(in entity: Entity?, entityName: String) throws(ChronicleError) -> (String, Field?) {
        let raw = try reader.readLengthPrefixed(max: Schema.maxNameLength, "field name")
        guard let entity else {
            guard let s = String(validating: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
                throw fail("field name is not UTF-8")
            }
            return (s, nil)
        }
        guard let i = entity.fieldIndex(utf8: raw) else {
            throw ChronicleError(.unknownAttribute, "body: '\(String(decoding: raw, as: UTF8.self))' is not a field of \(entityName)")
        }
        return (entity.fields[i].name, entity.fields[i])
    }

    private func fail(_ message: String) -> ChronicleError {
        ChronicleError(.malformedBody, "body: \(message)")
    }
}
