/// Format version 2: the compact header of transaction logs.
///
/// | size | field |
/// |---|---|
/// | 2 | magic `CH` (`43 48`) |
/// | 1 | format version, 2 |
/// | 1 | codec flags: bit 0 LZ4, bit 1 dictionary, bit 2 sealed (reserved); others zero |
/// | 8 | schema hash |
/// | varint | uncompressed body length |
/// | 4 | dictionary ID, only with bit 1 (never 0) |
/// | varint, 12 | key ID and nonce, only with bit 2 (reserved: not written, not read) |
/// | 8, varint | minimum clock and maximum minus minimum, only when the log holds more than one transaction |
/// | 2 | header check: the low 16 bits of *H* |
/// | 4 | body checksum: the low 32 bits of XXH64 of the stored body with seed *H* |
///
/// *H* is XXH64 (seed 0) of the log's ``LogLocation`` (store, device, first
/// and last sequence: 48 bytes, which the header leaves to the log's name)
/// followed by the header's bytes before the header check. The stored body
/// is every byte after the header. A log of one transaction takes its clock
/// from its body. See `docs/log-format.md`.
extension LogHeader {
    /// The magic of version 2: `CH`, then the version byte 2. (Version 1
    /// continues `CH` with `RN` and a 16-bit version.)
    package static let magicV2: [UInt8] = [0x43, 0x48]
    /// Format version 2.
    package static let versionV2: UInt16 = 2
    /// The fewest bytes a version 2 header takes.
    package static let minimumSizeV2 = 18

    /// The header's bytes before its checks.
    package func prefixV2() -> [UInt8] {
        var w = ByteWriter(capacity: 48)
        w.writeRaw(LogHeader.magicV2)
        w.writeUInt8(UInt8(LogHeader.versionV2))
        w.writeUInt8(flags.rawValue)
        w.writeUInt64(schemaHash)
        w.writeVarint(UInt64(bodyLength))
        if flags.contains(.dictionary) { w.writeUInt32(dictionaryID) }
        if count > 1 {
            w.writeUInt64(minClock.rawValue)
            w.writeVarint(maxClock.rawValue - minClock.rawValue)
        }
        return w.bytes
    }

    /// *H*: the hash of the location and the header's bytes before its checks.
    package static func seedV2(_ location: LogLocation, prefix: UnsafeRawBufferPointer) -> UInt64 {
        var w = ByteWriter(capacity: 48 + prefix.count)
        location.write(to: &w)
        w.writeRaw(prefix)
        return w.withUnsafeBytes { XXH64.hash($0) }
    }

    /// A version 2 log: this header (version 2, with lengths and flags
    /// set) followed by `stored`, the stored body.
    package mutating func sealV2(_ stored: UnsafeRawBufferPointer) -> [UInt8] {
        precondition(kind == .transactions && !flags.contains(.sealed), "version 2 holds unsealed transaction logs")
        version = LogHeader.versionV2
        let prefix = prefixV2()
        checksumSeed = prefix.withUnsafeBytes { LogHeader.seedV2(location, prefix: $0) }
        bodyChecksum = checksum(ofStoredBody: stored)
        headerLength = prefix.count + 6
        var w = ByteWriter(capacity: headerLength + stored.count)
        w.writeRaw(prefix)
        w.writeUInt16(UInt16(truncatingIfNeeded: checksumSeed))
        w.writeUInt32(UInt32(truncatingIfNeeded: bodyChecksum))
        w.writeRaw(stored)
        return w.bytes
    }

    static func decodeV2(_ bytes: UnsafeRawBufferPointer, at location: LogLocation?) throws(ChronicleError) -> LogHeader {
        guard let location else {
            throw ChronicleError(.invalidValue, "a version 2 log takes its store, device and sequences from its name in the container (…/logs/<device>/<shard>/<first>-<last>.chlog): read it by that name")
        }
        guard location.firstSequence >= 1, location.lastSequence >= location.firstSequence,
              location.lastSequence - location.firstSequence < UInt64(UInt32.max)
        else {
            throw ChronicleError(.malformedBody, "header: \(location.firstSequence)...\(location.lastSequence) is not the sequence range of a log")
        }
        var r = ByteReader(bytes, context: "header")
        _ = try r.readSlice(3, "magic and version")
        let flags = CodecFlags(rawValue: try r.readUInt8("codec flags"))
        guard CodecFlags.knownV2.isSuperset(of: flags) else {
            throw ChronicleError(.unsupportedVersion, "unknown codec flags 0x\(String(flags.rawValue, radix: 16))")
        }
        let schemaHash = try r.readUInt64("schema hash")
        let bodyLength = try r.readVarint("body length")
        let dictionaryID = flags.contains(.dictionary) ? UInt64(try r.readUInt32("dictionary ID")) : 0
        if flags.contains(.sealed) {
            _ = try r.readVarint("key ID")
            _ = try r.readSlice(12, "nonce")
        }
        let count = location.lastSequence - location.firstSequence + 1
        var minClock: UInt64 = 0, maxClock: UInt64 = 0, spreadOverflows = false
        if count > 1 {
            minClock = try r.readUInt64("minimum clock")
            (maxClock, spreadOverflows) = minClock.addingReportingOverflow(try r.readVarint("clock spread"))
        }
        let prefixEnd = r.offset
        let check = try r.readUInt16("header check")
        let bodyCheck = try r.readUInt32("body checksum")
        let seed = seedV2(location, prefix: UnsafeRawBufferPointer(rebasing: bytes[0..<prefixEnd]))
        guard UInt16(truncatingIfNeeded: seed) == check else {
            throw ChronicleError(.headerChecksumMismatch,
                                 "header check is \(check.paddedHex), the header and its name hash to \(UInt16(truncatingIfNeeded: seed).paddedHex): the header is damaged, or the log is not under the name it was written under (\(location))")
        }
        guard !flags.contains(.sealed) else {
            throw ChronicleError(.unsupportedVersion, "the log is sealed (encrypted), which this build does not read")
        }
        guard bodyLength <= UInt64(UInt32.max), dictionaryID <= UInt64(UInt32.max), !spreadOverflows else {
            throw ChronicleError(.malformedBody, "header: body length \(bodyLength), dictionary ID \(dictionaryID) or clock spread out of range")
        }
        let stored = bytes.count - r.offset
        guard stored <= Int(UInt32.max) else {
            throw ChronicleError(.sizeOverCap, "stored body of \(stored) bytes exceeds the format's 4 GiB limit")
        }
        if !flags.contains(.lz4), stored < Int(bodyLength) {
            throw ChronicleError(.shortRead, "log is \(bytes.count) bytes, its header declares \(r.offset + Int(bodyLength))")
        }
        var header = LogHeader(
            kind: .transactions, flags: flags, storeID: location.storeID, deviceID: location.deviceID,
            firstSequence: location.firstSequence, lastSequence: location.lastSequence,
            minClock: HybridTimestamp(rawValue: minClock), maxClock: HybridTimestamp(rawValue: maxClock),
            schemaHash: schemaHash, count: UInt32(count), dictionaryID: UInt32(dictionaryID),
            storedBodyLength: UInt32(stored), bodyLength: UInt32(bodyLength), bodyChecksum: UInt64(bodyCheck))
        header.version = LogHeader.versionV2
        header.headerLength = r.offset
        header.checksumSeed = seed
        try header.checkConsistency()
        return header
    }

    /// Whether the clock range is still to be read from the body: a
    /// version 2 log of one transaction keeps its clock there only.
    package var clockInBody: Bool { version == LogHeader.versionV2 && count == 1 }

    /// Sets the clock range of a version 2 log of one transaction from its
    /// verified, decompressed body: the transaction's sequence, then its clock.
    mutating func takeClock(fromBody body: UnsafeRawBufferPointer) throws(ChronicleError) {
        var r = ByteReader(body, errorCode: .malformedBody, context: "body")
        _ = try r.readVarint("sequence")
        let clock = HybridTimestamp(rawValue: try r.readUInt64("clock"))
        minClock = clock
        maxClock = clock
        try checkConsistency()
    }
}
