import ChronicleCore
import Testing

/// The reader's fast paths (one-byte varints, up to eight varint bytes in
/// one word, four words of ASCII per test) against the plain definitions.
@Suite struct ByteReaderTests {
    /// Every bit length of a varint, followed by 0 to 9 more bytes so the
    /// word-at-a-time path and the byte-at-a-time path both run.
    @Test func varintsOfEveryLengthReadBackWithAnyBytesAfterThem() throws {
        var values: [UInt64] = [0, 1, .max, .max - 1]
        for bits in 1..<64 {
            values += [(1 << UInt64(bits)) - 1, 1 << UInt64(bits), (1 << UInt64(bits)) + 1]
        }
        var rng = SeededRandom(seed: 7)
        values += (0..<200).map { _ in rng.next() >> (rng.next() % 64) }
        for value in values {
            for trailing in 0..<10 {
                var w = ByteWriter()
                w.writeVarint(value)
                let length = w.count
                for _ in 0..<trailing { w.writeUInt8(0xFF) }
                let (read, offset) = try w.bytes.withUnsafeBytes { raw in
                    var r = ByteReader(raw, context: "test")
                    return (try r.readVarint(), r.offset)
                }
                #expect(read == value, "value \(value), \(trailing) bytes after")
                #expect(offset == length)
                let skipped = try w.bytes.withUnsafeBytes { raw in
                    var r = ByteReader(raw, context: "test")
                    try r.skipVarint()
                    return r.offset
                }
                #expect(skipped == length, "skipping value \(value), \(trailing) bytes after")
            }
        }
    }

    /// Overlong encodings decode to their value, as they always did; more than
    /// ten bytes or more than 64 bits is an error, never a wrong value.
    @Test func overlongAndOverflowingVarints() throws {
        func read(_ bytes: [UInt8]) throws -> UInt64 {
            try bytes.withUnsafeBytes { raw in
                var r = ByteReader(raw, context: "test")
                return try r.readVarint()
            }
        }
        #expect(try read([0x85, 0x80, 0x80, 0x00, 0xFF, 0xFF, 0xFF, 0xFF]) == 5)
        #expect(try read([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]) == 1 << 49)
        #expect(try read([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]) == .max)
        expectError(.shortRead) { _ = try read([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]) }
        expectError(.shortRead) { _ = try read([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]) }
        expectError(.shortRead) { _ = try read([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80]) }
        expectError(.shortRead) { _ = try read([0x80]) }
        expectError(.shortRead) { _ = try read([]) }
        // Skipping refuses exactly what reading refuses.
        func skip(_ bytes: [UInt8]) throws -> Int {
            try bytes.withUnsafeBytes { raw in
                var r = ByteReader(raw, context: "test")
                try r.skipVarint()
                return r.offset
            }
        }
        #expect(try skip([0x85, 0x80, 0x80, 0x00, 0xFF, 0xFF, 0xFF, 0xFF]) == 4)
        #expect(try skip([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]) == 10)
        expectError(.shortRead) { _ = try skip([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]) }
        expectError(.shortRead) { _ = try skip([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]) }
        expectError(.shortRead) { _ = try skip([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80]) }
        expectError(.shortRead) { _ = try skip([]) }
    }

    /// A non-ASCII character, valid or not, at every position of strings of
    /// every length up to 80 bytes: whichever of the 32-byte, 8-byte,
    /// overlapping-tail or byte loop looks at it must see it.
    /// Each string is checked alone in its buffer and again followed by 16
    /// bytes of 0xFF, which the short-string path reads but must ignore.
    @Test func utf8IsCheckedAtEveryPosition() throws {
        func check(_ bytes: [UInt8]) -> Bool {
            var results: [Bool] = []
            for trailing in [0, 16] {
                var w = ByteWriter()
                w.writeLengthPrefixed(bytes)
                let end = w.count
                for _ in 0..<trailing { w.writeUInt8(0xFF) }
                results.append(w.bytes.withUnsafeBytes { raw in
                    var r = ByteReader(raw, errorCode: .malformedBody, context: "test")
                    do {
                        try r.skipString(max: 1000, "string")
                        return r.offset == end
                    } catch {
                        return false
                    }
                })
            }
            #expect(results[0] == results[1], "alone and followed by other bytes disagree on \(bytes)")
            return results[0] && results[1]
        }
        let e9 = Array("é".utf8)  // C3 A9
        for length in 0...80 {
            let ascii = [UInt8](repeating: 0x61, count: length)
            #expect(check(ascii))
            for i in 0..<length {
                var invalid = ascii
                invalid[i] = 0xFF
                #expect(!check(invalid), "0xFF at \(i) of \(length)")
                var lone = ascii
                lone[i] = 0x80
                #expect(!check(lone), "lone continuation at \(i) of \(length)")
                if i + 1 < length {
                    var valid = ascii
                    valid[i] = e9[0]
                    valid[i + 1] = e9[1]
                    #expect(check(valid), "é at \(i) of \(length)")
                    var cut = ascii
                    cut[i] = e9[0]
                    #expect(!check(cut), "truncated é at \(i) of \(length)")
                }
            }
        }
    }
}
