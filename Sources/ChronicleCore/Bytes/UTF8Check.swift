/// Strict UTF-8 validation, fast for the common all-ASCII case.
///
/// `String(validating:as:)` is generic and unspecialized across modules, which
/// made it a visible cost per decoded string; ASCII is checked a word at a
/// time here, and anything else goes through a strict validator
/// (no overlongs, no surrogates, nothing above U+10FFFF).
enum UTF8Check {
    /// Whether `bytes` are valid UTF-8, reading nothing outside them.
    @inline(__always)
    static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        return isValid(base, count: bytes.count, readable: bytes.count)
    }

    /// Whether the `count` bytes at `p` are valid UTF-8, when `readable`
    /// bytes (at least `count`) may be loaded from `p`. ASCII is checked a
    /// word at a time with overlapping loads instead of loops with tails: a
    /// string of 8 to 16 bytes takes two loads, 17 to 32 four, longer ones
    /// 32 bytes per step and then their last 32; one shorter than 8 takes one
    /// masked load when 8 bytes are readable. Lengths of one field vary
    /// little, so the branch on the length class predicts well.
    @inline(__always)
    static func isValid(_ p: UnsafeRawPointer, count: Int, readable: Int) -> Bool {
        @inline(__always) func word(_ i: Int) -> UInt64 { p.loadUnaligned(fromByteOffset: i, as: UInt64.self) }
        var any: UInt64
        if count < 8 {
            guard readable >= 8 else { return isValidByteByByte(p, count: count) }
            any = word(0) & ((1 &<< UInt64(truncatingIfNeeded: count &* 8)) &- 1)
        } else if count <= 16 {
            any = word(0) | word(count &- 8)
        } else if count <= 32 {
            any = word(0) | word(8) | word(count &- 16) | word(count &- 8)
        } else {
            any = 0
            var i = 0
            while count &- i > 32 {
                any |= word(i) | word(i &+ 8) | word(i &+ 16) | word(i &+ 24)
                i &+= 32
            }
            any |= word(count &- 32) | word(count &- 24) | word(count &- 16) | word(count &- 8)
        }
        if any & 0x8080_8080_8080_8080 == 0 { return true }
        return validateMultibyte(p, from: 0, count: count) == nil
    }

    /// The offset of the first byte of `bytes` where valid UTF-8 stops
    /// (the lead byte of a bad or cut-off sequence), or nil if all is valid.
    static func firstInvalidOffset(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        return validateMultibyte(base, from: 0, count: bytes.count)
    }

    /// A string of fewer than 8 bytes with fewer than 8 readable.
    @inline(never)
    private static func isValidByteByByte(_ p: UnsafeRawPointer, count: Int) -> Bool {
        for i in 0..<count where p.load(fromByteOffset: i, as: UInt8.self) >= 0x80 {
            return validateMultibyte(p, from: i, count: count) == nil
        }
        return true
    }

    /// The offset of the first sequence from `start` on that is not valid
    /// UTF-8, or nil.
    private static func validateMultibyte(_ base: UnsafeRawPointer, from start: Int, count: Int) -> Int? {
        var i = start
        @inline(__always) func byte(_ j: Int) -> UInt8 { base.load(fromByteOffset: j, as: UInt8.self) }
        @inline(__always) func isContinuation(_ j: Int) -> Bool { j < count && byte(j) & 0xC0 == 0x80 }
        while i < count {
            let b = byte(i)
            if b < 0x80 {
                i += 1
            } else if b >= 0xC2 && b <= 0xDF {
                guard isContinuation(i + 1) else { return i }
                i += 2
            } else if b >= 0xE0 && b <= 0xEF {
                guard isContinuation(i + 1), isContinuation(i + 2) else { return i }
                let b1 = byte(i + 1)
                if b == 0xE0 && b1 < 0xA0 { return i }  // overlong
                if b == 0xED && b1 > 0x9F { return i }  // surrogate
                i += 3
            } else if b >= 0xF0 && b <= 0xF4 {
                guard isContinuation(i + 1), isContinuation(i + 2), isContinuation(i + 3) else { return i }
                let b1 = byte(i + 1)
                if b == 0xF0 && b1 < 0x90 { return i }  // overlong
                if b == 0xF4 && b1 > 0x8F { return i }  // above U+10FFFF
                i += 4
            } else {
                return i
            }
        }
        return nil
    }
}
