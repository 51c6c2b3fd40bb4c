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
package struct LogDecoder: Sendable {
    /// The schema names are resolved against; nil to decode any names.
    package let schema: Schema?
    /// Size bounds.
    package let limits: DecodingLimits
    private var dictionaries: [UInt32: CompressionDictionary]
    /// Migrations from earlier versions of ``schema``, by the earlier
    /// version's hash: a log written for one of them is read as if
    /// written for ``schema`` (see ``SchemaMigration``).
    package let earlier: [UInt64: SchemaMigration]

    /// Creates a decoder.
    ///
    /// - Parameter earlier: migrations to `schema` from its earlier
    ///   versions, whose logs are read through them; each must be
    ///   complete (``SchemaMigration/isComplete``).
    package init(schema: Schema?, limits: DecodingLimits = DecodingLimits(), dictionaries: [CompressionDictionary] = [],
                 earlier: [SchemaMigration] = []) {
        self.schema = schema
        self.limits = limits
        var byID: [UInt32: CompressionDictionary] = [:]
        for d in dictionaries { byID[d.id] = d }
        self.dictionaries = byID
        var migrations: [UInt64: SchemaMigration] = [:]
        for m in earlier where m.target.hash == schema?.hash && m.source.hash != m.target.hash { migrations[m.source.hash] = m }
        self.earlier = migrations
    }

    /// This decoder, with `more` compression dictionaries.
    package func adding(_ more: [CompressionDictionary]) -> LogDecoder {
        var copy = self
        for d in more { copy.dictionaries[d.id] = d }
        return copy
    }

    /// Verifies the header alone (magic, version, checksum, consistency).
    ///
    /// `location` is where the log was found (``LogLocation``): a version 2
    /// log needs it, and the whole log, since its checksums cover both. The
    /// clock range of a version 2 log of one transaction is in its body
    /// (``LogHeader/clockInBody``): it reads as 0 here; ``open(_:at:)``
    /// and ``decode(_:at:)`` fill it in.
    package func header(of bytes: [UInt8], at location: LogLocation? = nil) throws(ChronicleError) -> LogHeader {
        try bytes.withBytes { raw throws(ChronicleError) in try LogHeader.decode(raw, at: location) }
    }

    /// Verifies and decodes a whole log found at `location` (which a
    /// version 2 log needs; see ``header(of:at:)``).
    package func decode(_ bytes: [UInt8], at location: LogLocation? = nil) throws(ChronicleError) -> DecodedLog {
        try bytes.withBytes { raw throws(ChronicleError) in try decode(raw, at: location) }
    }

    /// Verifies and decodes a whole log from borrowed memory.
    package func decode(_ bytes: UnsafeRawBufferPointer, at location: LogLocation? = nil) throws(ChronicleError) -> DecodedLog {
        let log = try open(bytes, at: location, verifyBody: false)
        switch log.header.kind {
        case .transactions:
            var visitor = MaterializingVisitor(header: log.header)
            try log.walk(&visitor)
            return .transactions(log.header, visitor.transactions)
        case .baseline:
            return .baseline(log.header, try log.baseline())
        }
    }

    /// Verifies a whole log (header, checksums, decompression, and every
    /// change, name and value of its body) and returns it without building
    /// Swift values: a ``VerifiedLog`` can then be walked without allocating,
    /// which is how the replayer applies logs.
    package func open(_ bytes: [UInt8], at location: LogLocation? = nil) throws(ChronicleError) -> VerifiedLog {
        try bytes.withBytes { raw throws(ChronicleError) in try open(raw, at: location, verifyBody: true) }
    }

    private func open(_ bytes: UnsafeRawBufferPointer, at location: LogLocation?, verifyBody: Bool) throws(ChronicleError) -> VerifiedLog {
        var header = try LogHeader.decode(bytes, at: location)
        let body = try self.body(of: header, in: bytes)
        if header.clockInBody {
            try body.withBytes { raw throws(ChronicleError) in try header.takeClock(fromBody: raw) }
        }
        if let schema, header.schemaHash != schema.hash {
            guard let migration = earlier[header.schemaHash] else {
                let what = header.kind == .baseline ? "baseline part" : "log"
                throw ChronicleError(.schemaMismatch,
                                     "\(what) written for schema \(hex64(header.schemaHash)), which this app (schema \(schema.hashString), version \(schema.version)) does not know: written by a later app version, it waits for this app to upgrade; by an earlier one, name that version among the earlier schemas (--earlier-schema)")
            }
            return try translate(header, body: body, through: migration)
        }
        let log = VerifiedLog(header: header, body: body, schema: schema)
        if verifyBody {
            switch header.kind {
            case .transactions:
                var visitor = VerifyingVisitor()
                try log.walk(&visitor)
            case .baseline:
                var visitor = VerifyingBaselineVisitor()
                try log.walkBaseline(&visitor)
            }
        }
        return log
    }

    /// A log of an earlier schema version, verified against that version
    /// and re-encoded for this one (entities and fields renamed), so it is
    /// applied like any other; its header keeps the device, sequences and
    /// clocks.
    private func translate(_ header: LogHeader, body: [UInt8], through migration: SchemaMigration) throws(ChronicleError) -> VerifiedLog {
        let earlierLog = VerifiedLog(header: header, body: body, schema: migration.source)
        let encoder = LogEncoder(storeID: header.storeID, compresses: false)
        let bytes: [UInt8]
        switch header.kind {
        case .transactions:
            var translated: [Transaction] = []
            for t in try earlierLog.transactions() { translated.append(try migration.translate(t)) }
            guard !translated.isEmpty else { throw ChronicleError(.malformedBody, "log of an earlier schema version holds no transaction") }
            bytes = try encoder.encode(translated)
        case .baseline:
            let part = try earlierLog.baseline()
            bytes = try encoder.encode(try migration.translate(part), part: header.firstSequence,
                                       isFinal: header.isFinalBaselinePart, deviceID: header.deviceID,
                                       schemaHash: migration.target.hash)
        }
        var translated = try LogDecoder(schema: schema, limits: limits).open(bytes)
        translated.storedChecksum = header.bodyChecksum
        translated.storedLength = header.totalLength
        return translated
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
        let stored = UnsafeRawBufferPointer(rebasing: bytes[header.headerLength...])
        let checksum = header.checksum(ofStoredBody: stored)
        guard checksum == header.bodyChecksum else {
            let (computed, declared) = header.version == 1 ? (checksum.paddedHex, header.bodyChecksum.paddedHex)
                : (UInt32(truncatingIfNeeded: checksum).paddedHex, UInt32(truncatingIfNeeded: header.bodyChecksum).paddedHex)
            throw ChronicleError(.bodyChecksumMismatch, "body hashes to \(computed), header says \(declared)")
        }
        guard header.flags.contains(.lz4) else { return Array(stored) }
        var dictionary: CompressionDictionary?
        if header.flags.contains(.dictionary) {
            guard let d = dictionaries[header.dictionaryID] else {
                throw ChronicleError(.unknownDictionary, "log needs compression dictionary \(header.dictionaryID.paddedHex), which this reader does not hold")
            }
            dictionary = d
        }
        return try LZ4Block.decompress(stored, length: Int(header.bodyLength), dictionary: dictionary)
    }
}

/// A log whose header, checksums and body have been verified. Walking it
/// visits every transaction, change and value in order, with values as
/// ``RawValue``s borrowed from the body: nothing is allocated per value.
package struct VerifiedLog: Sendable {
    /// The log's header.
    package let header: LogHeader
    /// The decompressed body.
    package let body: [UInt8]
    /// The schema names were resolved against, if any.
    package let schema: Schema?
    /// The body checksum and length of the blob as stored: a log of an
    /// earlier schema is translated into a new body and header, and these
    /// still name the blob it came from.
    package var storedChecksum: UInt64
    package var storedLength: Int

    init(header: LogHeader, body: [UInt8], schema: Schema?) {
        self.header = header
        self.body = body
        self.schema = schema
        storedChecksum = header.bodyChecksum
        storedLength = header.totalLength
    }

    /// Visits every transaction, change and value of a transactions log.
    /// Throws the first error `visitor` throws (and, for a log not yet
    /// verified, any body error).
    package func walk<V: LogVisitor>(_ visitor: inout V) throws(ChronicleError) {
        precondition(header.kind == .transactions, "walk visits transactions; this log is a \(header.kind): check the header's kind first")
        try body.withBytes { raw throws(ChronicleError) in
            try BodyWalker(schema: schema, header: header, body: raw).walk(&visitor)
        }
    }

    /// The transactions as Swift values.
    package func transactions() throws(ChronicleError) -> [Transaction] {
        var visitor = MaterializingVisitor(header: header)
        try walk(&visitor)
        return visitor.transactions
    }
}

/// Receives a transactions log as it is walked. With a schema, `entity` and
/// `field` are the indexes into ``Schema/entities`` and ``Entity/fields``;
/// without one they are nil.
package protocol LogVisitor {
    /// A transaction begins.
    mutating func beginTransaction(sequence: UInt64, clock: HybridTimestamp, changeCount: Int) throws(ChronicleError)
    /// A change begins; its values follow. `entityName` is computed only if used.
    mutating func beginChange(_ kind: ChangeKind, entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID, valueCount: Int) throws(ChronicleError)
    /// One value of the current change. `fieldName` is computed only if used.
    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue) throws(ChronicleError)
    /// The current change ends.
    mutating func endChange() throws(ChronicleError)
}

/// Checks structure only.
private struct VerifyingVisitor: LogVisitor {
    mutating func beginTransaction(sequence: UInt64, clock: HybridTimestamp, changeCount: Int) {}
    mutating func beginChange(_ kind: ChangeKind, entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID, valueCount: Int) {}
    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue) {}
    mutating func endChange() {}
}

/// Builds ``Transaction`` values.
private struct MaterializingVisitor: LogVisitor {
    let header: LogHeader
    var transactions: [Transaction] = []
    private var change: Change?

    init(header: LogHeader) {
        self.header = header
        transactions.reserveCapacity(Int(min(header.count, 1 << 16)))
    }

    mutating func beginTransaction(sequence: UInt64, clock: HybridTimestamp, changeCount: Int) {
        var t = Transaction(deviceID: header.deviceID, sequence: sequence, clock: clock,
                            schemaHash: header.schemaHash, changes: [])
        t.changes.reserveCapacity(changeCount)
        transactions.append(t)
    }

    mutating func beginChange(_ kind: ChangeKind, entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID, valueCount: Int) {
        var c = Change(kind, entity: entityName(), recordID: recordID)
        c.values.reserveCapacity(valueCount)
        change = c
    }

    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue) {
        change!.values.append(FieldValue(fieldName(), raw.value))
    }

    mutating func endChange() {
        transactions[transactions.count - 1].changes.append(change.take()!)
    }
}

/// Walks a decompressed transactions body, verifying as it goes.
///
/// The whole walk is one loop over a local ``ByteReader`` (three pointers,
/// kept in registers): `change` is inlined into it, and errors are built
/// out of line, so the loop body stays small.
private struct BodyWalker {
    let schema: Schema?
    let header: LogHeader
    let body: UnsafeRawBufferPointer

    func walk<V: LogVisitor>(_ visitor: inout V) throws(ChronicleError) {
        guard let table = schema?.nameTable else {
            try transactions(&visitor, table: nil)
            return
        }
        // The table's slots are read through raw pointers: keep it alive.
        try withExtendedLifetime(table) { () throws(ChronicleError) in
            try transactions(&visitor, table: table)
        }
    }

    private func transactions<V: LogVisitor>(_ visitor: inout V, table: NameTable?) throws(ChronicleError) {
        let view = table?.view
        var reader = ByteReader(body, errorCode: .malformedBody, context: "body")
        var entity = 0
        for i in 0..<UInt64(header.count) {
            let sequence = try reader.readVarint("sequence")
            guard sequence == header.firstSequence + i else {
                throw fail("transaction \(i) has sequence \(sequence), expected \(header.firstSequence + i)")
            }
            let clock = HybridTimestamp(rawValue: try reader.readUInt64("clock"))
            guard clock >= header.minClock, clock <= header.maxClock else {
                throw fail("transaction \(sequence) clock \(clock) is outside the header's range")
            }
            let changeCount = try reader.readLength(max: reader.remaining, "change count")
            try visitor.beginTransaction(sequence: sequence, clock: clock, changeCount: changeCount)
            for _ in 0..<changeCount {
                entity = try change(&visitor, &reader, table: view, entityHint: entity)
            }
        }
        guard reader.isAtEnd else { throw fail("\(reader.remaining) bytes after the last transaction") }
    }

    /// Walks one change and returns its entity index (the next change's hint).
    @inline(__always)
    private func change<V: LogVisitor>(
        _ visitor: inout V, _ reader: inout ByteReader, table view: NameTable.View?, entityHint: Int
    ) throws(ChronicleError) -> Int {
        guard let view else { return try changeByName(&visitor, &reader) }
        // The hot path: the change is read through a local pointer, which
        // stays in a register; the reader is brought up to date only
        // around the checked reads of the uncommon cases (a name not where
        // the hint says, a long varint, a data, decimal or transformable
        // value) and at the end. Every read is still bounds-checked.
        var p = reader.position
        let end = reader.end
        guard p < end else { throw short(&reader, at: p, 1, "change kind") }
        let kindByte = p.load(as: UInt8.self)
        guard let kind = ChangeKind(rawValue: kindByte) else {
            reader.position = p
            throw unknownKind(kindByte, at: reader.offset)
        }
        p += 1
        let entities = view.entities
        var entity = entityHint
        if entity < entities.count && entities.matches(entity, at: p, available: end - p) {
            p += entities.length(entity)
        } else {
            reader.position = p
            entity = try EntityRef.read(&reader, table: view.nameTable, hint: entityHint).index ?? 0
            p = reader.position
        }
        guard end - p >= 16 else { throw short(&reader, at: p, 16, "record ID") }
        let id = RecordID(bytes: UnsafeRawBufferPointer(start: p, count: 16))
        p += 16
        let fields = view.fields(of: entity)
        let count: Int
        if p < end, case let byte = p.load(as: UInt8.self), byte < 0x80, Int(byte) <= fields.count {
            count = Int(byte)
            p += 1
        } else {
            reader.position = p
            count = try reader.readLength(max: fields.count, "value count")
            p = reader.position
        }
        if kind == .delete && count != 0 { throw deleteWithValues(id, count) }
        try visitor.beginChange(kind, entity: entity, entityName: view.nameTable.entityNames[entity], recordID: id, valueCount: count)
        var hint = 0
        for _ in 0..<count {
            var field = hint
            if field < fields.count && fields.matches(field, at: p, available: end - p) {
                p += fields.length(field)
            } else {
                reader.position = p
                field = try FieldRef.read(&reader, entity: EntityRef(index: entity, fields: fields), table: view.nameTable, hint: hint).index ?? 0
                p = reader.position
            }
            guard p < end else { throw short(&reader, at: p, 1, "value tag") }
            let tag = p.load(as: UInt8.self)
            guard tag < 16, (fields.tagMask(field) >> tag) & 1 == 1 else {
                reader.position = p
                throw FieldRef(index: field, mask: fields.tagMask(field))
                    .tagError(tag, at: reader.offset, entity: EntityRef(index: entity, fields: fields), table: view.nameTable)
            }
            p += 1
            let start = p
            let shape = ValueCodec.payloadShape(tag)
            if shape <= 2 {
                // Fixed size: none, 8 or 16 bytes.
                let n = Int(shape) &* 8
                guard end - p >= n else { throw short(&reader, at: p, n, "value of tag \(tag)") }
                p += n
            } else if shape == 3, end - p >= 8,
                      case let stops = ~UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)) & 0x8080_8080_8080_8080,
                      stops != 0 {
                // A varint of up to eight bytes, its length found in one word.
                p += (stops.trailingZeroBitCount &+ 1) >> 3
            } else if shape == 4, p < end, case let length = Int(p.load(as: UInt8.self)), length < 0x80 {
                // A string shorter than 128 bytes.
                p += 1
                guard end - p >= length else { throw short(&reader, at: p, length, "string value") }
                guard UTF8Check.isValid(p, count: length, readable: end - p) else {
                    reader.position = p
                    throw fail("string value is not valid UTF-8 at offset \(reader.offset)")
                }
                p += length
            } else {
                reader.position = p
                _ = try ValueCodec.skipPayload(tag: tag, from: &reader, limit: body.count)
                p = reader.position
            }
            try visitor.value(field: field, fieldName: view.nameTable.fieldNames[fields.first + field],
                              RawValue(tag: tag, payload: UnsafeRawBufferPointer(start: start, count: p - start)))
            hint = field &+ 1
        }
        reader.position = p
        try visitor.endChange()
        return entity
    }

    /// A change read without a schema: names are checked UTF-8 and passed on as they are.
    private func changeByName<V: LogVisitor>(_ visitor: inout V, _ reader: inout ByteReader) throws(ChronicleError) -> Int {
        let kindByte = try reader.readUInt8("change kind")
        guard let kind = ChangeKind(rawValue: kindByte) else { throw unknownKind(kindByte, at: reader.offset - 1) }
        let entity = try EntityRef.read(&reader, table: nil)
        let id = RecordID(bytes: try reader.readSlice(16, "record ID"))
        let count = try reader.readLength(max: reader.remaining, "value count")
        if kind == .delete && count != 0 { throw deleteWithValues(id, count) }
        try visitor.beginChange(kind, entity: nil, entityName: entity.name(in: nil), recordID: id, valueCount: count)
        for _ in 0..<count {
            let field = try FieldRef.read(&reader, entity: entity, table: nil)
            let raw = try field.readValue(&reader, entity: entity, table: nil, limit: body.count)
            try visitor.value(field: nil, fieldName: field.name(in: entity, table: nil), raw)
        }
        try visitor.endChange()
        return 0
    }

    /// The error for `n` bytes needed at `p` where fewer are left.
    @inline(never)
    private func short(_ reader: inout ByteReader, at p: UnsafeRawPointer, _ n: Int, _ what: String) -> ChronicleError {
        reader.position = p
        return fail("needed \(n) bytes for \(what) at offset \(reader.offset), only \(reader.remaining) left")
    }

    @inline(never)
    private func unknownKind(_ kind: UInt8, at offset: Int) -> ChronicleError {
        fail("unknown change kind \(kind) at offset \(offset)")
    }

    @inline(never)
    private func deleteWithValues(_ id: RecordID, _ count: Int) -> ChronicleError {
        fail("a delete of \(id) carries \(count) values")
    }

    private func fail(_ message: String) -> ChronicleError {
        ChronicleError(.malformedBody, "body: \(message)")
    }
}

/// An entity name read from a body. With a schema it is resolved to an index
/// and the entity's field slots; without one it is the name's bytes in the
/// body. Either way it holds no reference, so nothing is retained per change.
private struct EntityRef {
    /// The name's UTF-8 bytes in the body, without a schema.
    private let rawName: UnsafeRawBufferPointer
    let index: Int?
    /// The entity's field slots (with a schema); valid while the table is alive.
    let fields: NameTable.Slots?

    init(rawName: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0), index: Int?, fields: NameTable.Slots?) {
        self.rawName = rawName
        self.index = index
        self.fields = fields
    }

    func name(in table: NameTable?) -> String {
        guard let table, let index else { return String(decoding: rawName, as: UTF8.self) }
        return table.entityNames[index]
    }

    /// Reads an entity name. With a table, entity `hint` (the previous
    /// change's) is tried first, then every entity, by comparing the encoded
    /// name in place.
    @inline(__always)
    static func read(_ reader: inout ByteReader, table: NameTable?, hint: Int = 0) throws(ChronicleError) -> EntityRef {
        guard let table else {
            let raw = try reader.readLengthPrefixed(max: Schema.maxNameLength, "entity name")
            guard UTF8Check.isValid(raw) else { throw ChronicleError(.malformedBody, "body: entity name is not UTF-8") }
            return EntityRef(rawName: raw, index: nil, fields: nil)
        }
        let entities = table.entities
        do {
            let (p, available) = reader.cursor
            if hint < entities.count && entities.matches(hint, at: p, available: available) {
                reader.skip(knownAvailable: entities.length(hint))
                return EntityRef(index: hint, fields: table.fields(of: hint))
            }
            for i in 0..<entities.count where entities.matches(i, at: p, available: available) {
                reader.skip(knownAvailable: entities.length(i))
                return EntityRef(index: i, fields: table.fields(of: i))
            }
        }
        // Not a name as the encoder writes it: read it to report it (or to
        // accept it, if only its length was encoded unusually).
        let raw = try reader.readLengthPrefixed(max: Schema.maxNameLength, "entity name")
        guard let i = entities.index(utf8: raw) else {
            throw ChronicleError(.unknownEntity, "body: entity '\(String(decoding: raw, as: UTF8.self))' is not in the schema")
        }
        return EntityRef(index: i, fields: table.fields(of: i))
    }
}

/// A field name read from a body, with the value tags it accepts. It holds
/// no references (no retain per value); with a schema the name is looked up
/// only when a visitor asks for it.
private struct FieldRef {
    /// The name's UTF-8 bytes in the body, without a schema.
    private let rawName: UnsafeRawBufferPointer
    let index: Int?
    let mask: UInt16

    init(rawName: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0), index: Int?, mask: UInt16) {
        self.rawName = rawName
        self.index = index
        self.mask = mask
    }

    func name(in entity: EntityRef, table: NameTable?) -> String {
        guard let table, let fields = entity.fields, let index else { return String(decoding: rawName, as: UTF8.self) }
        return table.fieldNames[fields.first + index]
    }

    /// Reads a field name. Encoders write fields in schema order, so field
    /// `hint` (the one after the previous value's) is tried first.
    @inline(__always)
    static func read(_ reader: inout ByteReader, entity: EntityRef, table: NameTable?, hint: Int = 0) throws(ChronicleError) -> FieldRef {
        guard let fields = entity.fields else {
            let raw = try reader.readLengthPrefixed(max: Schema.maxNameLength, "field name")
            guard UTF8Check.isValid(raw) else { throw ChronicleError(.malformedBody, "body: field name is not UTF-8") }
            return FieldRef(rawName: raw, index: nil, mask: 0x0FFF)
        }
        do {
            let (p, available) = reader.cursor
            if hint < fields.count && fields.matches(hint, at: p, available: available) {
                reader.skip(knownAvailable: fields.length(hint))
                return FieldRef(index: hint, mask: fields.tagMask(hint))
            }
            for i in 0..<fields.count where fields.matches(i, at: p, available: available) {
                reader.skip(knownAvailable: fields.length(i))
                return FieldRef(index: i, mask: fields.tagMask(i))
            }
        }
        let raw = try reader.readLengthPrefixed(max: Schema.maxNameLength, "field name")
        guard let i = fields.index(utf8: raw) else {
            throw ChronicleError(.unknownAttribute,
                                 "body: '\(String(decoding: raw, as: UTF8.self))' is not a field of \(entity.name(in: table))")
        }
        return FieldRef(index: i, mask: fields.tagMask(i))
    }

    /// Reads the value's tag, checks it against the field, and verifies the payload.
    @inline(__always)
    func readValue(_ reader: inout ByteReader, entity: EntityRef, table: NameTable?, limit: Int) throws(ChronicleError) -> RawValue {
        let tag = try reader.readUInt8("value tag")
        guard tag < 16, (mask >> tag) & 1 == 1 else {
            throw tagError(tag, at: reader.offset - 1, entity: entity, table: table)
        }
        return RawValue(tag: tag, payload: try ValueCodec.skipPayload(tag: tag, from: &reader, limit: limit))
    }

    @inline(never)
    func tagError(_ tag: UInt8, at offset: Int, entity: EntityRef, table: NameTable?) -> ChronicleError {
        if tag > 11 { return ChronicleError(.malformedBody, "body: unknown value tag \(tag) at offset \(offset)") }
        return ChronicleError(.malformedBody,
                              "body: a value with tag \(tag) does not fit \(entity.name(in: table)).\(name(in: entity, table: table))")
    }
}

/// Receives a baseline part as it is walked: its devices, then every
/// record's state with values as ``RawValue``s borrowed from the body.
/// With a schema, `entity` and `field` are indexes into ``Schema/entities``
/// and ``Entity/fields`` (nil without one); a name is computed only if used.
package protocol BaselineVisitor {
    /// The devices the part's versions name, in the order its body lists
    /// them, with the highest sequence of each that it covers (0 for a
    /// device listed only because a version names it).
    mutating func devices(_ devices: [DeviceID], sequences: [UInt64]) throws(ChronicleError)
    /// A record's state begins; its `fieldCount` written fields follow.
    mutating func beginRecord(entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID,
                              inserted: Bool, deleteVersion: Version?, fieldCount: Int) throws(ChronicleError)
    /// One written field of the current record, with the version that wrote it.
    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue, version: Version) throws(ChronicleError)
    /// The current record ends.
    mutating func endRecord() throws(ChronicleError)
}

extension VerifiedLog {
    /// Visits the devices and every record state of a baseline part.
    /// Throws the first error `visitor` throws (and, for a part not yet
    /// verified, any body error).
    package func walkBaseline<V: BaselineVisitor>(_ visitor: inout V) throws(ChronicleError) {
        precondition(header.kind == .baseline, "walkBaseline visits baseline parts; this log is a \(header.kind): check the header's kind first")
        try body.withBytes { raw throws(ChronicleError) in
            var walker = BaselineWalker(schema: schema, header: header, reader: ByteReader(raw, errorCode: .malformedBody, context: "body"))
            try walker.walk(&visitor)
        }
    }

    /// The sequence vector of a baseline part: the highest sequence of
    /// each device that it covers, read from the start of its body alone.
    package func baselineVector() throws(ChronicleError) -> [DeviceID: UInt64] {
        precondition(header.kind == .baseline, "a vector is a baseline part's; this log is a \(header.kind): check the header's kind first")
        return try body.withBytes { raw throws(ChronicleError) in
            var walker = BaselineWalker(schema: schema, header: header, reader: ByteReader(raw, errorCode: .malformedBody, context: "body"))
            let (devices, sequences) = try walker.devices()
            return BaselineWalker.vector(devices, sequences)
        }
    }

    /// The baseline part as Swift values.
    package func baseline() throws(ChronicleError) -> Baseline {
        var visitor = MaterializingBaselineVisitor()
        try walkBaseline(&visitor)
        return visitor.baseline
    }
}

/// Checks a baseline body's structure only.
private struct VerifyingBaselineVisitor: BaselineVisitor {
    mutating func devices(_ devices: [DeviceID], sequences: [UInt64]) {}
    mutating func beginRecord(entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID,
                              inserted: Bool, deleteVersion: Version?, fieldCount: Int) {}
    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue, version: Version) {}
    mutating func endRecord() {}
}

/// Builds a ``Baseline``.
private struct MaterializingBaselineVisitor: BaselineVisitor {
    var baseline = Baseline(vector: [:], records: [])

    mutating func devices(_ devices: [DeviceID], sequences: [UInt64]) {
        baseline.vector = BaselineWalker.vector(devices, sequences)
    }

    mutating func beginRecord(entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID,
                              inserted: Bool, deleteVersion: Version?, fieldCount: Int) {
        var record = Baseline.Record(entity: entityName(), recordID: recordID, inserted: inserted, deleteVersion: deleteVersion, fields: [])
        record.fields.reserveCapacity(fieldCount)
        baseline.records.append(record)
    }

    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue, version: Version) {
        baseline.records[baseline.records.count - 1].fields.append(Baseline.VersionedValue(name: fieldName(), value: raw.value, version: version))
    }

    mutating func endRecord() {}
}

/// Walks a baseline body, verifying as it goes.
private struct BaselineWalker {
    let schema: Schema?
    let header: LogHeader
    var reader: ByteReader

    private var limit: Int { reader.count }

    mutating func walk<V: BaselineVisitor>(_ visitor: inout V) throws(ChronicleError) {
        let table = schema?.nameTable
        // The table's slots are read through raw pointers: keep it alive.
        try withExtendedLifetime(table) { () throws(ChronicleError) in try walk(&visitor, table: table) }
    }

    /// The sequence vector of a part's device list: the devices it covers
    /// some sequences of (the others are listed only because a version names them).
    static func vector(_ devices: [DeviceID], _ sequences: [UInt64]) -> [DeviceID: UInt64] {
        var vector: [DeviceID: UInt64] = [:]
        for (d, sequence) in zip(devices, sequences) where sequence > 0 { vector[d] = sequence }
        return vector
    }

    /// Reads the list of devices at the start of the body.
    mutating func devices() throws(ChronicleError) -> (devices: [DeviceID], sequences: [UInt64]) {
        let deviceCount = try reader.readLength(max: reader.remaining / 17, "device count")
        var devices: [DeviceID] = []
        var sequences: [UInt64] = []
        devices.reserveCapacity(deviceCount)
        sequences.reserveCapacity(deviceCount)
        for _ in 0..<deviceCount {
            devices.append(DeviceID(RecordID(bytes: try reader.readSlice(16, "device ID"))))
            sequences.append(try reader.readVarint("device sequence"))
        }
        return (devices, sequences)
    }

    private mutating func walk<V: BaselineVisitor>(_ visitor: inout V, table: NameTable?) throws(ChronicleError) {
        let (devices, sequences) = try devices()
        try visitor.devices(devices, sequences: sequences)
        let (minClock, maxClock) = (header.minClock, header.maxClock)
        func version(_ reader: inout ByteReader) throws(ChronicleError) -> Version {
            let clock = HybridTimestamp(rawValue: try reader.readUInt64("clock"))
            guard clock >= minClock, clock <= maxClock else {
                throw ChronicleError(.malformedBody, "body: clock \(clock) outside the header's range \(minClock)...\(maxClock)")
            }
            let index = try reader.readLength(max: Int.max, "device index")
            guard index < devices.count else { throw ChronicleError(.malformedBody, "body: device index \(index) out of range") }
            return Version(clock: clock, device: devices[index])
        }
        let recordCount = try reader.readLength(max: reader.remaining, "record count")
        guard recordCount == Int(header.count) else { throw fail("\(recordCount) records, header says \(header.count)") }
        // Records come entity by entity and fields in schema order: the
        // previous record's entity and the next field are tried first.
        var entityHint = 0
        for _ in 0..<recordCount {
            let entity = try EntityRef.read(&reader, table: table, hint: entityHint)
            entityHint = entity.index ?? 0
            let id = RecordID(bytes: try reader.readSlice(16, "record ID"))
            let flags = try reader.readUInt8("record flags")
            guard flags & ~3 == 0 else { throw fail("record \(id) has unknown flags \(flags)") }
            let deleteVersion = flags & 2 != 0 ? try version(&reader) : nil
            let count = try reader.readLength(max: entity.fields?.count ?? reader.remaining, "field count")
            try visitor.beginRecord(entity: entity.index, entityName: entity.name(in: table), recordID: id,
                                    inserted: flags & 1 != 0, deleteVersion: deleteVersion, fieldCount: count)
            var fieldHint = 0
            for _ in 0..<count {
                let field = try FieldRef.read(&reader, entity: entity, table: table, hint: fieldHint)
                fieldHint = (field.index ?? 0) &+ 1
                let value = try field.readValue(&reader, entity: entity, table: table, limit: limit)
                try visitor.value(field: field.index, fieldName: field.name(in: entity, table: table), value, version: try version(&reader))
            }
            try visitor.endRecord()
        }
        guard reader.isAtEnd else { throw fail("\(reader.remaining) bytes after the records") }
    }

    private func fail(_ message: String) -> ChronicleError {
        ChronicleError(.malformedBody, "body: \(message)")
    }
}
