/// Turns transactions or a baseline into log bytes: header, then an
/// LZ4-compressed body (stored raw when compression would not shrink it).
///
/// ```swift
/// let encoder = LogEncoder(storeID: store)
/// let bytes = try encoder.encode([transaction])
/// ```
package struct LogEncoder: Sendable {
    /// The store the logs belong to.
    package let storeID: StoreID
    /// The dictionary small bodies are compressed against, if any.
    package let dictionary: CompressionDictionary?
    /// Whether to compress at all.
    package let compresses: Bool
    /// The format version of transaction logs: 1, or 2 (the compact header
    /// of logs that are uploaded, read only by their name in a container).
    /// Baselines are always version 1.
    package let version: UInt16

    /// The version of the logs devices upload.
    package static let uploadVersion = LogHeader.versionV2

    /// Creates an encoder.
    package init(storeID: StoreID, dictionary: CompressionDictionary? = nil, compresses: Bool = true, version: UInt16 = 1) {
        precondition(version == 1 || version == LogHeader.versionV2, "log format version \(version) is not written")
        self.storeID = storeID
        self.dictionary = dictionary
        self.compresses = compresses
        self.version = version
    }

    /// Encodes consecutive transactions of one device into one log (group commit).
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` when the list mixes
    ///   devices or schemas, or its sequences are not consecutive from 1 up.
    /// - Precondition: `transactions` is not empty.
    package func encode(_ transactions: [Transaction]) throws(ChronicleError) -> [UInt8] {
        guard let first = transactions.first else { preconditionFailure("LogEncoder.encode needs at least one transaction") }
        // Size the buffer once: growing it copies the body again.
        var estimate = 64
        for t in transactions { estimate += BodyCodec.estimatedSize(t) }
        var w = ByteWriter(capacity: estimate)
        var minClock = first.clock
        var maxClock = first.clock
        for (i, t) in transactions.enumerated() {
            guard t.deviceID == first.deviceID, t.schemaHash == first.schemaHash,
                  t.sequence == first.sequence + UInt64(i), t.sequence >= 1
            else {
                throw ChronicleError(.invalidValue, "transaction \(t.sequence) of device \(t.deviceID) cannot be number \(i + 1) of a log that starts at "
                    + "\(first.sequence) of device \(first.deviceID): a log holds one device's consecutive sequences (from 1) under one schema")
            }
            minClock = min(minClock, t.clock)
            maxClock = max(maxClock, t.clock)
            BodyCodec.write(t, to: &w)
        }
        let header = LogHeader(
            kind: .transactions, flags: [], storeID: storeID, deviceID: first.deviceID,
            firstSequence: first.sequence, lastSequence: first.sequence + UInt64(transactions.count - 1),
            minClock: minClock, maxClock: maxClock, schemaHash: first.schemaHash,
            count: UInt32(transactions.count), dictionaryID: 0, storedBodyLength: 0, bodyLength: 0, bodyChecksum: 0)
        return try seal(header, body: w)
    }

    /// The body bytes of one transaction. Bodies of consecutive transactions
    /// concatenate into the body of a grouped log (``encode(bodies:)``), which
    /// is how an outbox groups saves without re-encoding them.
    package static func body(of transaction: Transaction) -> [UInt8] {
        var w = ByteWriter(capacity: 256)
        BodyCodec.write(transaction, to: &w)
        return w.bytes
    }

    /// The body of a transaction whose changes are the inserts of
    /// `inserts` followed by `changes`: the bytes ``body(of:)`` gives for
    /// the same changes, without building a ``Change`` per insert.
    package static func body(sequence: UInt64, clock: HybridTimestamp, inserts: InsertBatch?, changes: [Change]) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + 32 * ((inserts?.values.count ?? 0) + changes.count))
        BodyCodec.write(sequence: sequence, clock: clock, inserts: inserts, changes: changes, to: &w)
        return w.bytes
    }

    /// One transaction's pre-encoded body, for ``encode(bodies:)``.
    package struct EncodedTransaction: Sendable, Hashable {
        /// The transaction's sequence.
        package var sequence: UInt64
        /// Its clock.
        package var clock: HybridTimestamp
        /// Its body, from ``LogEncoder/body(of:)``.
        package var body: [UInt8]
        /// The hash of the schema the body was written for, when it is not
        /// the writer's current one (a save made before an app upgrade,
        /// kept as it was uploaded); nil for the current one.
        package var schemaHash: UInt64?

        /// Creates an encoded transaction.
        package init(sequence: UInt64, clock: HybridTimestamp, body: [UInt8], schemaHash: UInt64? = nil) {
            self.sequence = sequence
            self.clock = clock
            self.body = body
            self.schemaHash = schemaHash
        }
    }

    /// Encodes consecutive pre-encoded transactions of `device` into one log.
    /// The result is byte-identical to ``encode(_:)`` of the same transactions.
    /// Bodies that name their own schema (``EncodedTransaction/schemaHash``)
    /// are written under it, `schemaHash` otherwise.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` when the sequences are
    ///   not consecutive from 1 up, or the bodies are of several schemas.
    /// - Precondition: `bodies` is not empty.
    package func encode(bodies: [EncodedTransaction], device: DeviceID, schemaHash: UInt64) throws(ChronicleError) -> [UInt8] {
        guard let first = bodies.first else { preconditionFailure("LogEncoder.encode(bodies:) needs at least one transaction") }
        let schemaHash = first.schemaHash ?? schemaHash
        var w = ByteWriter(capacity: bodies.reduce(64) { $0 + $1.body.count })
        for (i, b) in bodies.enumerated() {
            guard b.sequence == first.sequence + UInt64(i), b.sequence >= 1 else {
                throw ChronicleError(.invalidValue, "transaction \(b.sequence) of device \(device) cannot be number \(i + 1) of a log that starts at "
                    + "\(first.sequence): a log holds consecutive sequences (from 1)")
            }
            guard b.schemaHash == first.schemaHash else {
                throw ChronicleError(.invalidValue, "transaction \(b.sequence) of device \(device) was written for another schema than transaction \(first.sequence): a log holds one schema's transactions")
            }
            w.writeRaw(b.body)
        }
        let header = LogHeader(
            kind: .transactions, flags: [], storeID: storeID, deviceID: device,
            firstSequence: first.sequence, lastSequence: first.sequence + UInt64(bodies.count - 1),
            minClock: bodies.map(\.clock).min()!, maxClock: bodies.map(\.clock).max()!, schemaHash: schemaHash,
            count: UInt32(bodies.count), dictionaryID: 0, storedBodyLength: 0, bodyLength: 0, bodyChecksum: 0)
        return try seal(header, body: w)
    }

    /// Encodes a baseline, or part `part` of one, made by `deviceID` under
    /// the schema `schemaHash`. A baseline too large for one log (the
    /// decoder's cap) is written as parts 1, 2, … with the same vector, the
    /// last one marked final; a baseline of one log is part 1, final.
    package func encode(_ baseline: Baseline, part: UInt64 = 1, isFinal: Bool = true, deviceID: DeviceID,
                       schemaHash: UInt64) throws(ChronicleError) -> [UInt8] {
        precondition(part >= 1, "baseline parts are numbered from 1, not \(part)")
        var w = ByteWriter(capacity: 64 * baseline.records.count + 64)
        let clocks = BodyCodec.write(baseline, to: &w)
        guard baseline.records.count <= Int(UInt32.max) else {
            throw ChronicleError(.sizeOverCap, "a baseline part holds at most \(UInt32.max) records")
        }
        let header = LogHeader(
            kind: .baseline, flags: [], storeID: storeID, deviceID: deviceID,
            firstSequence: part, lastSequence: isFinal ? part : 0, minClock: clocks.min, maxClock: clocks.max,
            schemaHash: schemaHash, count: UInt32(baseline.records.count), dictionaryID: 0,
            storedBodyLength: 0, bodyLength: 0, bodyChecksum: 0)
        return try seal(header, body: w)
    }

    /// Compresses the body straight into the output buffer behind the
    /// header's place, checksums what is stored, then writes the header.
    private func seal(_ header: LogHeader, body: borrowing ByteWriter) throws(ChronicleError) -> [UInt8] {
        guard body.count <= Int(UInt32.max) else {
            throw ChronicleError(.sizeOverCap, "log body of \(body.count) bytes exceeds the format's 4 GiB limit")
        }
        var header = header
        if version == LogHeader.versionV2, header.kind == .transactions {
            return sealV2(&header, body: body)
        }
        let size = LogHeader.size
        let out = body.withUnsafeBytes { raw -> [UInt8] in
            let capacity = size + max(raw.count, compresses ? LZ4Block.bound(raw.count) : 0)
            return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
                let all = UnsafeMutableRawBufferPointer(buffer)
                let stored = UnsafeMutableRawBufferPointer(rebasing: all[size...])
                var storedCount = raw.count
                if compresses, let n = LZ4Block.compress(raw, into: stored, dictionary: dictionary) {
                    storedCount = n
                    header.flags.insert(.lz4)
                    if let dictionary {
                        header.flags.insert(.dictionary)
                        header.dictionaryID = dictionary.id
                    }
                } else if raw.count > 0 {
                    stored.baseAddress!.copyMemory(from: raw.baseAddress!, byteCount: raw.count)
                }
                header.bodyLength = UInt32(raw.count)
                header.storedBodyLength = UInt32(storedCount)
                header.bodyChecksum = XXH64.hash(UnsafeRawBufferPointer(rebasing: stored[0..<storedCount]))
                header.encoded().withUnsafeBytes { all.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: size) }
                initialized = size + storedCount
            }
        }
        return out
    }

    /// Version 2: compresses the body, then writes the compact header
    /// before it (its length depends on the lengths it holds).
    private func sealV2(_ header: inout LogHeader, body: borrowing ByteWriter) -> [UInt8] {
        body.withUnsafeBytes { raw -> [UInt8] in
            header.bodyLength = UInt32(raw.count)
            guard compresses, raw.count > 0 else {
                header.storedBodyLength = UInt32(raw.count)
                return header.sealV2(raw)
            }
            // Version 2 logs are the small ones: their bodies take LZ4's
            // high-compression parser against a dictionary (version 1
            // output stays byte for byte what it was).
            var n: Int?
            let compressed = [UInt8](unsafeUninitializedCapacity: LZ4Block.bound(raw.count)) { buffer, initialized in
                n = LZ4Block.compress(raw, into: UnsafeMutableRawBufferPointer(buffer), dictionary: dictionary, highCompression: true)
                initialized = n ?? 0
            }
            guard let n else {
                header.storedBodyLength = UInt32(raw.count)
                return header.sealV2(raw)
            }
            header.flags.insert(.lz4)
            if let dictionary {
                header.flags.insert(.dictionary)
                header.dictionaryID = dictionary.id
            }
            header.storedBodyLength = UInt32(n)
            return compressed.withUnsafeBytes { header.sealV2($0) }
        }
    }
}
