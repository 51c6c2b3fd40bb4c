/// Turns transactions or a baseline into log bytes: header, then an
/// LZ4-compressed body (stored raw when compression would not shrink it).
///
/// ```swift
/// let encoder = LogEncoder(storeID: store)
/// let bytes = try encoder.encode([transaction])
/// ```
public struct LogEncoder: Sendable {
    /// The store the logs belong to.
    public let storeID: StoreID
    /// The dictionary small bodies are compressed against, if any.
    public let dictionary: CompressionDictionary?
    /// Whether to compress at all.
    public let compresses: Bool

    /// Creates an encoder.
    public init(storeID: StoreID, dictionary: CompressionDictionary? = nil, compresses: Bool = true) {
        self.storeID = storeID
        self.dictionary = dictionary
        self.compresses = compresses
    }

    /// Encodes consecutive transactions of one device into one log (group commit).
    ///
    /// - Throws: ``ChronicleError/Code/misuse`` when the list is empty, mixes
    ///   devices or schemas, or its sequences are not consecutive.
    public func encode(_ transactions: [Transaction]) throws(ChronicleError) -> [UInt8] {
        guard let first = transactions.first else {
            throw ChronicleError(.misuse, "a log needs at least one transaction")
        }
        var w = ByteWriter(capacity: 256 * transactions.count)
        var minClock = first.clock
        var maxClock = first.clock
        for (i, t) in transactions.enumerated() {
            guard t.deviceID == first.deviceID, t.schemaHash == first.schemaHash,
                  t.sequence == first.sequence + UInt64(i), t.sequence >= 1
            else {
                throw ChronicleError(.misuse, "transactions in one log must be one device's consecutive sequences (from 1) under one schema")
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
        return try seal(header, body: w.bytes)
    }

    /// Encodes a baseline made by `deviceID` under the schema `schemaHash`.
    public func encode(_ baseline: Baseline, deviceID: DeviceID, schemaHash: UInt64) throws(ChronicleError) -> [UInt8] {
        var w = ByteWriter(capacity: 64 * baseline.records.count + 64)
        let maxClock = BodyCodec.write(baseline, to: &w)
        let header = LogHeader(
            kind: .baseline, flags: [], storeID: storeID, deviceID: deviceID,
            firstSequence: 0, lastSequence: 0, minClock: .zero, maxClock: maxClock, schemaHash: schemaHash,
            count: UInt32(baseline.records.count), dictionaryID: 0, storedBodyLength: 0, bodyLength: 0, bodyChecksum: 0)
        return try seal(header, body: w.bytes)
    }

    private func seal(_ header: LogHeader, body: [UInt8]) throws(ChronicleError) -> [UInt8] {
        guard body.count <= Int(UInt32.max) else {
            throw ChronicleError(.sizeOverCap, "log body of \(body.count) bytes exceeds the format's 4 GiB limit")
        }
        var header = header
        var stored = body
        if compresses, let compressed = LZ4Block.compress(body, dictionary: dictionary) {
            stored = compressed
            header.flags.insert(.lz4)
            if let dictionary {
                header.flags.insert(.dictionary)
                header.dictionaryID = dictionary.id
            }
        }
        header.bodyLength = UInt32(body.count)
        header.storedBodyLength = UInt32(stored.count)
        header.bodyChecksum = XXH64.hash(stored)
        var out = header.encoded()
        out.reserveCapacity(out.count + stored.count)
        out.append(contentsOf: stored)
        return out
    }
}
