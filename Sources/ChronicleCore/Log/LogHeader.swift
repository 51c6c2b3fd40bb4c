/// What a log holds.
package enum LogKind: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// One or more transactions of one device.
    case transactions = 1
    /// A baseline: the full state of a store.
    case baseline = 2

    package var description: String { self == .transactions ? "transactions" : "baseline" }
}

/// How a log's body is stored.
package struct CodecFlags: OptionSet, Sendable, Hashable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The body is an LZ4 block (otherwise it is stored as is).
    package static let lz4 = CodecFlags(rawValue: 1 << 0)
    /// The LZ4 block was compressed against the dictionary named in the header.
    package static let dictionary = CodecFlags(rawValue: 1 << 1)
    /// Version 2 only, reserved for authenticated encryption: the header
    /// then holds a key ID and a nonce, and the stored body is sealed. This
    /// build writes no sealed log and refuses to read one.
    package static let sealed = CodecFlags(rawValue: 1 << 2)

    /// Every flag version 1 understands.
    package static let known: CodecFlags = [.lz4, .dictionary]
    /// Every flag version 2 defines (``sealed`` is defined but not read).
    package static let knownV2: CodecFlags = [.lz4, .dictionary, .sealed]
}

/// What a version 2 header leaves out because the log's name in its
/// container says it: the store, the device and the sequence range
/// (`blobs/<store>/logs/<device>/<shard>/<first>-<last>.chlog`).
///
/// A version 2 log can only be read together with its location. Both of
/// its checksums cover the location, so a log put under another name (a
/// misplaced copy, a rename) fails its header check rather than being
/// read as someone else's saves.
package struct LogLocation: Sendable, Hashable, CustomStringConvertible {
    /// The store the log belongs to.
    package var storeID: StoreID
    /// The device that wrote it.
    package var deviceID: DeviceID
    /// Its first sequence.
    package var firstSequence: UInt64
    /// Its last sequence.
    package var lastSequence: UInt64

    /// Creates a location.
    package init(storeID: StoreID, deviceID: DeviceID, firstSequence: UInt64, lastSequence: UInt64) {
        self.storeID = storeID
        self.deviceID = deviceID
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
    }

    package var description: String { "\(storeID)/\(deviceID)/\(firstSequence.paddedHex)-\(lastSequence.paddedHex)" }

    /// The 48 bytes the checksums of a version 2 header cover before the
    /// header's own bytes: store, device, first and last sequence.
    func write(to w: inout ByteWriter) {
        w.writeRecordID(storeID.rawValue)
        w.writeRecordID(deviceID.rawValue)
        w.writeUInt64(firstSequence)
        w.writeUInt64(lastSequence)
    }
}

/// The fixed, big-endian, 112-byte header of every log and baseline.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic `CHRN` (`43 48 52 4E`) |
/// | 4 | 2 | format version, 1 |
/// | 6 | 1 | kind: 1 transactions, 2 baseline |
/// | 7 | 1 | codec flags: bit 0 LZ4, bit 1 dictionary |
/// | 8 | 16 | store UUID |
/// | 24 | 16 | device ID |
/// | 40 | 8 | first sequence (baseline: part number, from 1) |
/// | 48 | 8 | last sequence (baseline: the part number on the final part, else 0) |
/// | 56 | 8 | minimum HLC |
/// | 64 | 8 | maximum HLC |
/// | 72 | 8 | schema hash |
/// | 80 | 4 | count: transactions, or baseline records |
/// | 84 | 4 | dictionary ID (0 = none) |
/// | 88 | 4 | stored body length |
/// | 92 | 4 | uncompressed body length |
/// | 96 | 8 | body checksum: XXH64 of the stored body bytes |
/// | 104 | 8 | header checksum: XXH64 of bytes 0..<104 |
///
/// The header is verified before anything in the body is trusted, and the body
/// checksum is verified before the body is decompressed. See `docs/log-format.md`.
package struct LogHeader: Sendable, Hashable {
    /// The size in bytes of a version 1 header.
    package static let size = 112
    /// The four magic bytes.
    package static let magic: [UInt8] = [0x43, 0x48, 0x52, 0x4E]
    /// The format version this build writes and reads.
    package static let currentVersion: UInt16 = 1
    /// The offset of the header checksum.
    static let checksumOffset = 104

    /// What the log holds.
    package var kind: LogKind
    /// How the body is stored.
    package var flags: CodecFlags
    /// The store the log belongs to.
    package var storeID: StoreID
    /// The device that wrote it.
    package var deviceID: DeviceID
    /// The first transaction's sequence; for a baseline, the part number (from 1).
    package var firstSequence: UInt64
    /// The last transaction's sequence; for a baseline, the part number
    /// again on the final part and 0 on the others.
    package var lastSequence: UInt64
    /// The smallest clock in the log.
    package var minClock: HybridTimestamp
    /// The largest clock in the log.
    package var maxClock: HybridTimestamp
    /// The hash of the schema the log was written for.
    package var schemaHash: UInt64
    /// The number of transactions, or of baseline records.
    package var count: UInt32
    /// The compression dictionary's ID, 0 for none.
    package var dictionaryID: UInt32
    /// The number of body bytes stored after the header.
    package var storedBodyLength: UInt32
    /// The body's length once decompressed.
    package var bodyLength: UInt32
    /// The body checksum: for version 1, XXH64 of the stored body bytes;
    /// for version 2, the low 32 bits of XXH64 of them seeded with
    /// ``checksumSeed``.
    package var bodyChecksum: UInt64
    /// The format version the header was read in or is written in: 1 or 2.
    package var version: UInt16 = 1
    /// The header's size in bytes: 112 for version 1, 18 to about 40 for
    /// version 2.
    package var headerLength: Int = LogHeader.size
    /// Version 2: XXH64 of the location and the header's bytes before its
    /// checks; its low 16 bits are the header check, and it seeds the body
    /// checksum, which so covers the header and the location too.
    package var checksumSeed: UInt64 = 0

    /// For a baseline: this part's number, from 1.
    package var baselinePart: UInt64 { firstSequence }
    /// For a baseline: whether this is its final part (so the baseline has
    /// ``baselinePart`` parts).
    package var isFinalBaselinePart: Bool { kind == .baseline && lastSequence == firstSequence }

    /// Creates a header. The encoder fills in lengths and the body checksum.
    package init(
        kind: LogKind, flags: CodecFlags, storeID: StoreID, deviceID: DeviceID,
        firstSequence: UInt64, lastSequence: UInt64, minClock: HybridTimestamp, maxClock: HybridTimestamp,
        schemaHash: UInt64, count: UInt32, dictionaryID: UInt32,
        storedBodyLength: UInt32, bodyLength: UInt32, bodyChecksum: UInt64
    ) {
        self.kind = kind
        self.flags = flags
        self.storeID = storeID
        self.deviceID = deviceID
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.minClock = minClock
        self.maxClock = maxClock
        self.schemaHash = schemaHash
        self.count = count
        self.dictionaryID = dictionaryID
        self.storedBodyLength = storedBodyLength
        self.bodyLength = bodyLength
        self.bodyChecksum = bodyChecksum
    }

    /// The total size of the log in bytes.
    package var totalLength: Int { headerLength + Int(storedBodyLength) }

    /// Where the log belongs: what a version 2 header leaves to its name.
    package var location: LogLocation {
        LogLocation(storeID: storeID, deviceID: deviceID, firstSequence: firstSequence, lastSequence: lastSequence)
    }

    /// The body checksum of `stored` in this header's version.
    package func checksum(ofStoredBody stored: UnsafeRawBufferPointer) -> UInt64 {
        version == 1 ? XXH64.hash(stored) : UInt64(UInt32(truncatingIfNeeded: XXH64.hash(stored, seed: checksumSeed)))
    }

    /// The header's 112 bytes, checksum included.
    package func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: LogHeader.size)
        w.writeRaw(LogHeader.magic)
        w.writeUInt16(LogHeader.currentVersion)
        w.writeUInt8(kind.rawValue)
        w.writeUInt8(flags.rawValue)
        w.writeRecordID(storeID.rawValue)
        w.writeRecordID(deviceID.rawValue)
        w.writeUInt64(firstSequence)
        w.writeUInt64(lastSequence)
        w.writeUInt64(minClock.rawValue)
        w.writeUInt64(maxClock.rawValue)
        w.writeUInt64(schemaHash)
        w.writeUInt32(count)
        w.writeUInt32(dictionaryID)
        w.writeUInt32(storedBodyLength)
        w.writeUInt32(bodyLength)
        w.writeUInt64(bodyChecksum)
        let checksum = w.withUnsafeBytes { XXH64.hash($0) }
        w.writeUInt64(checksum)
        return w.bytes
    }

    /// Reads and verifies a header from the start of `bytes`: magic, version,
    /// header checksum, kind and flags, in that order.
    ///
    /// A version 2 header needs the log's `location` (its name says it) and
    /// the whole log: its stored body is every byte after the header. A
    /// version 1 header carries its location and ignores the argument.
    package static func decode(_ bytes: UnsafeRawBufferPointer, at location: LogLocation? = nil) throws(ChronicleError) -> LogHeader {
        if bytes.count >= 3, bytes[0] == magicV2[0], bytes[1] == magicV2[1], bytes[2] == UInt8(versionV2) {
            return try decodeV2(bytes, at: location)
        }
        return try decodeV1(bytes)
    }

    private static func decodeV1(_ bytes: UnsafeRawBufferPointer) throws(ChronicleError) -> LogHeader {
        let prefix = min(bytes.count, magic.count)
        for i in 0..<prefix where bytes[i] != magic[i] {
            let expected = magic.withUnsafeBytes { hex($0, magic.count) }
            throw ChronicleError(.badMagic, "not a Chronicle log: first bytes are \(hex(bytes, prefix)), expected \(expected) (\"CHRN\")")
        }
        guard bytes.count >= size else {
            throw ChronicleError(.shortRead, bytes.count < minimumSizeV2
                ? "log is \(bytes.count) bytes, shorter than any log header"
                : "log is \(bytes.count) bytes, shorter than its \(size)-byte header")
        }
        var r = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[0..<size]), context: "header")
        _ = try r.readSlice(4, "magic")
        let version = try r.readUInt16()
        guard version == currentVersion else {
            throw ChronicleError(.unsupportedVersion, "log format version \(version); this build reads version \(currentVersion)")
        }
        let stored = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: checksumOffset, as: UInt64.self))
        let computed = XXH64.hash(UnsafeRawBufferPointer(rebasing: bytes[0..<checksumOffset]))
        guard stored == computed else {
            throw ChronicleError(.headerChecksumMismatch,
                                 "header checksum is \(hex64(stored)), header hashes to \(hex64(computed))")
        }
        let kindByte = try r.readUInt8()
        guard let kind = LogKind(rawValue: kindByte) else {
            throw ChronicleError(.malformedBody, "unknown log kind \(kindByte)")
        }
        let flags = CodecFlags(rawValue: try r.readUInt8())
        guard CodecFlags.known.isSuperset(of: flags) else {
            throw ChronicleError(.unsupportedVersion, "unknown codec flags 0x\(String(flags.rawValue, radix: 16))")
        }
        let store = StoreID(RecordID(bytes: try r.readSlice(16, "store ID")))
        let device = DeviceID(RecordID(bytes: try r.readSlice(16, "device ID")))
        let header = LogHeader(
            kind: kind, flags: flags, storeID: store, deviceID: device,
            firstSequence: try r.readUInt64(), lastSequence: try r.readUInt64(),
            minClock: HybridTimestamp(rawValue: try r.readUInt64()),
            maxClock: HybridTimestamp(rawValue: try r.readUInt64()),
            schemaHash: try r.readUInt64(), count: try r.readUInt32(), dictionaryID: try r.readUInt32(),
            storedBodyLength: try r.readUInt32(), bodyLength: try r.readUInt32(), bodyChecksum: try r.readUInt64())
        try header.checkConsistency()
        return header
    }

    /// Checks relations between fields that the checksum cannot.
    func checkConsistency() throws(ChronicleError) {
        func bad(_ message: String) -> ChronicleError { ChronicleError(.malformedBody, "header: \(message)") }
        guard maxClock.milliseconds <= HybridTimestamp.maxMilliseconds else {
            throw bad("clock \(maxClock) is past \(HybridTimestamp.maxMilliseconds) ms (the year 4199): no device's clock reads that")
        }
        if flags.contains(.dictionary) != (dictionaryID != 0) || (flags.contains(.dictionary) && !flags.contains(.lz4)) {
            throw bad("dictionary flag and dictionary ID \(dictionaryID) disagree")
        }
        if !flags.contains(.lz4) && storedBodyLength != bodyLength {
            throw bad("uncompressed body stored with \(storedBodyLength) bytes but declares \(bodyLength)")
        }
        switch kind {
        case .transactions:
            guard firstSequence >= 1, lastSequence >= firstSequence,
                  lastSequence - firstSequence + 1 == UInt64(count)
            else { throw bad("sequences \(firstSequence)...\(lastSequence) do not match count \(count)") }
            guard minClock <= maxClock else { throw bad("minimum clock \(minClock) exceeds maximum \(maxClock)") }
        case .baseline:
            guard firstSequence >= 1, lastSequence == 0 || lastSequence == firstSequence else {
                throw bad("baseline part \(firstSequence) with final mark \(lastSequence): parts count from 1, the final one repeats its number")
            }
            guard minClock <= maxClock else { throw bad("minimum clock \(minClock) exceeds maximum \(maxClock)") }
        }
    }
}

func hex(_ bytes: UnsafeRawBufferPointer, _ n: Int) -> String {
    bytes.prefix(n).map { String(format2: $0) }.joined()
}

func hex64(_ v: UInt64) -> String { v.paddedHex }

extension FixedWidthInteger where Self: UnsignedInteger {
    /// The value as lowercase hex digits, zero-padded to its width (16 for
    /// a `UInt64`, 8 for a `UInt32`): how hashes, clocks, sequences and
    /// dictionary IDs are spelled in names and messages.
    package var paddedHex: String {
        let s = String(self, radix: 16)
        return String(repeating: "0", count: bitWidth / 4 - s.count) + s
    }
}

extension String {
    init(format2 byte: UInt8) {
        let s = String(byte, radix: 16)
        self = s.count == 1 ? "0" + s : s
    }
}
