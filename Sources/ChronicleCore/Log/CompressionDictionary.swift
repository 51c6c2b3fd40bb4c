/// A per-store LZ4 dictionary: up to 64 KiB of typical body bytes that small
/// logs compress against. One-record bodies barely compress alone (ratio about
/// 1.0); against a 16 KiB dictionary they reach about 1.7.
///
/// A log names its dictionary by ``id`` in the header; a reader must have the
/// same dictionary to decode it.
package struct CompressionDictionary: Sendable, Hashable {
    /// The dictionary's ID, never 0.
    package let id: UInt32
    /// The dictionary bytes (LZ4 uses at most the last 64 KiB).
    package let bytes: [UInt8]

    /// The largest useful dictionary.
    package static let maxSize = 64 * 1024

    /// Creates a dictionary.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for ID 0, an empty
    ///   dictionary or one over 64 KiB.
    package init(id: UInt32, bytes: [UInt8]) throws(ChronicleError) {
        guard id != 0 else { throw ChronicleError(.invalidValue, "dictionary ID 0 means 'no dictionary'") }
        guard !bytes.isEmpty, bytes.count <= Self.maxSize else {
            throw ChronicleError(.invalidValue, "a dictionary holds 1 to \(Self.maxSize) bytes, not \(bytes.count)")
        }
        self.id = id
        self.bytes = bytes
    }

    /// Builds a dictionary from sample bodies: the most recent samples first,
    /// trimmed to `size` bytes. (LZ4 has no trainer; recent, typical content is
    /// what it matches best.)
    package static func fromSamples(_ samples: [[UInt8]], id: UInt32, size: Int = 16 * 1024) throws(ChronicleError) -> CompressionDictionary {
        var bytes: [UInt8] = []
        for sample in samples.reversed() where bytes.count < size {
            bytes.append(contentsOf: sample.prefix(size - bytes.count))
        }
        return try CompressionDictionary(id: id, bytes: bytes)
    }
}

extension CompressionDictionary {
    /// The ID of a dictionary of `bytes`: from its content (never 0), so a
    /// dictionary's ID names its bytes wherever it is published.
    package static func identifier(for bytes: [UInt8]) -> UInt32 {
        let id = UInt32(truncatingIfNeeded: XXH64.hash(bytes, seed: 0x4348_4443))
        return id == 0 ? 1 : id
    }

    /// A store's dictionary trained from the bodies of its saves, most
    /// recent last: up to `perSample` bytes of each, most recent first,
    /// until `size` bytes. (LZ4 has no trainer: recent, typical content is
    /// what it matches best, and a prefix of each body holds its names.)
    /// Its ID comes from its content (``identifier(for:)``).
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` when the bodies are empty.
    package static func trained(from bodies: [[UInt8]], size: Int = 16 * 1024, perSample: Int = 1024) throws(ChronicleError) -> CompressionDictionary {
        var bytes: [UInt8] = []
        for body in bodies.reversed() where bytes.count < size {
            bytes.append(contentsOf: body.prefix(min(perSample, size - bytes.count)))
        }
        return try CompressionDictionary(id: identifier(for: bytes), bytes: bytes)
    }

    /// The magic of a published dictionary: "CHDC".
    static let publishedMagic: [UInt8] = [0x43, 0x48, 0x44, 0x43]
    /// The size of a published dictionary's header.
    static let publishedHeaderSize = 29

    /// The dictionary as a store publishes it in its container: magic
    /// `CHDC`, version 1 (1 byte), ID (4), when it was made (Unix
    /// milliseconds, 8), length (4), XXH64 of those 21 bytes followed by
    /// the dictionary (8), then the dictionary. Big-endian.
    package func published(createdAt milliseconds: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: Self.publishedHeaderSize + bytes.count)
        w.writeRaw(Self.publishedMagic)
        w.writeUInt8(1)
        w.writeUInt32(id)
        w.writeUInt64(milliseconds)
        w.writeUInt32(UInt32(bytes.count))
        var hashed = w.bytes
        hashed += bytes
        w.writeUInt64(XXH64.hash(hashed))
        w.writeRaw(bytes)
        return w.bytes
    }

    /// Reads a published dictionary (``published(createdAt:)``) that its
    /// name says is `expected`: the dictionary and when it was made.
    ///
    /// - Throws: ``ChronicleError/Code/badMagic``,
    ///   ``ChronicleError/Code/unsupportedVersion``,
    ///   ``ChronicleError/Code/shortRead``,
    ///   ``ChronicleError/Code/bodyChecksumMismatch`` (damaged), or
    ///   ``ChronicleError/Code/malformedBody`` (another ID than its name's,
    ///   or bytes that do not hash to their ID).
    package static func readPublished(_ data: [UInt8], id expected: UInt32) throws(ChronicleError) -> (dictionary: CompressionDictionary, created: UInt64) {
        try data.withBytes { raw throws(ChronicleError) in
            guard raw.count >= 4, raw.prefix(4).elementsEqual(publishedMagic) else {
                throw ChronicleError(.badMagic, "not a published compression dictionary (its first bytes are not \"CHDC\")")
            }
            // Markers are written whole: a short one is damaged, not arriving.
            var r = ByteReader(raw, errorCode: .malformedBody, context: "dictionary")
            _ = try r.readSlice(4, "magic")
            let version = try r.readUInt8("version")
            guard version == 1 else { throw ChronicleError(.unsupportedVersion, "compression dictionary format version \(version); this build reads version 1") }
            let id = try r.readUInt32("ID")
            let created = try r.readUInt64("creation time")
            let length = Int(try r.readUInt32("length"))
            guard length >= 1, length <= maxSize else {
                throw ChronicleError(.malformedBody, "dictionary \(id) declares \(length) bytes; a dictionary holds 1 to \(maxSize)")
            }
            let checksum = try r.readUInt64("checksum")
            let bytes = try r.readBytes(length, "the dictionary")
            guard r.offset == raw.count else {
                throw ChronicleError(.malformedBody, "dictionary \(id) has \(raw.count - r.offset) bytes after its end")
            }
            let computed = XXH64.hash(Array(raw.prefix(21)) + bytes)
            guard computed == checksum else {
                throw ChronicleError(.bodyChecksumMismatch, "dictionary \(id) hashes to \(computed.paddedHex), its header says \(checksum.paddedHex)")
            }
            guard id == expected, identifier(for: bytes) == id else {
                throw ChronicleError(.malformedBody, "dictionary published as \(expected) holds dictionary \(id) with bytes of ID \(identifier(for: bytes))")
            }
            return (try CompressionDictionary(id: id, bytes: bytes), created)
        }
    }
}
