/// Reads what ``ByteWriter`` writes, from borrowed memory, with every read
/// bounds-checked: running past the end throws ``ChronicleError/Code/shortRead``
/// (or ``ChronicleError/Code/malformedBody`` inside a body); it never traps.
///
/// The reader does not own its bytes; use it inside `withUnsafeBytes`. It is
/// three pointers and two constants, with no reference-counted member, so a
/// walker that copies it into a local variable keeps it in registers.
package struct ByteReader {
    /// The first byte (a private placeholder for an empty buffer, never read).
    private let base: UnsafeRawPointer
    /// The read position, from `base` to `end`. The body walker reads by
    /// pointer on its hot path and sets this before calling a checked read.
    var position: UnsafeRawPointer
    /// One past the last byte.
    let end: UnsafeRawPointer
    private let errorCode: ChronicleError.Code
    private let context: StaticString

    /// Creates a reader over `buffer`. Errors are reported with `errorCode`
    /// and mention `context` (for example "header" or "body").
    package init(_ buffer: UnsafeRawBufferPointer, errorCode: ChronicleError.Code = .shortRead, context: StaticString) {
        let base = buffer.baseAddress ?? UnsafeRawPointer(emptyBufferPlaceholder)
        self.base = base
        self.position = base
        self.end = base + buffer.count
        self.errorCode = errorCode
        self.context = context
    }

    /// The total number of bytes.
    package var count: Int { end - base }

    /// The read position.
    package var offset: Int { position - base }

    /// The number of bytes not yet read.
    package var remaining: Int { end - position }

    /// Whether every byte has been read.
    package var isAtEnd: Bool { position == end }

    /// Throws unless `n` more bytes are available.
    @inline(__always)
    package func require(_ n: Int, _ what: @autoclosure () -> String) throws(ChronicleError) {
        // One unsigned compare also refuses a negative `n`.
        if UInt(bitPattern: n) > UInt(bitPattern: end - position) {
            throw Self.failure(errorCode, context, "needed \(n) bytes for \(what()) at offset \(offset), only \(remaining) left")
        }
    }

    /// Builds an error. Static and out of line, and given only scalars and
    /// the message: a method would take `self` by address, and the optimizer
    /// then copies the reader to the stack on the hot path, error or not.
    @inline(never)
    private static func failure(_ code: ChronicleError.Code, _ context: StaticString, _ message: String) -> ChronicleError {
        ChronicleError(code, "\(context): \(message)")
    }

    @inline(__always)
    package mutating func readUInt8(_ what: @autoclosure () -> String = "a byte") throws(ChronicleError) -> UInt8 {
        try require(1, what())
        let v = position.load(as: UInt8.self)
        position += 1
        return v
    }

    @inline(__always)
    package mutating func readUInt16(_ what: @autoclosure () -> String = "a 16-bit integer") throws(ChronicleError) -> UInt16 {
        try readFixed(UInt16.self, what())
    }

    @inline(__always)
    package mutating func readUInt32(_ what: @autoclosure () -> String = "a 32-bit integer") throws(ChronicleError) -> UInt32 {
        try readFixed(UInt32.self, what())
    }

    @inline(__always)
    package mutating func readUInt64(_ what: @autoclosure () -> String = "a 64-bit integer") throws(ChronicleError) -> UInt64 {
        try readFixed(UInt64.self, what())
    }

    @inline(__always)
    private mutating func readFixed<T: FixedWidthInteger>(_: T.Type, _ what: String) throws(ChronicleError) -> T {
        try require(MemoryLayout<T>.size, what)
        let v = position.loadUnaligned(as: T.self)
        position += MemoryLayout<T>.size
        return T(bigEndian: v)
    }

    /// Reads an unsigned LEB128 varint; more than 10 bytes or overflow is an error.
    @inline(__always)
    package mutating func readVarint(_ what: @autoclosure () -> String = "a varint") throws(ChronicleError) -> UInt64 {
        // Most varints in a body (lengths, counts, small numbers) are one byte.
        if position < end {
            let byte = position.load(as: UInt8.self)
            if byte < 0x80 {
                position += 1
                return UInt64(byte)
            }
        }
        // Up to 8 bytes (56 bits) at once: find the stop byte (high bit
        // clear) in one word, then pack the 7-bit groups in three steps.
        if end - position >= 8 {
            let word = UInt64(littleEndian: position.loadUnaligned(as: UInt64.self))
            let stops = ~word & 0x8080_8080_8080_8080
            if stops != 0 {
                let length = (stops.trailingZeroBitCount + 1) >> 3
                var x = length == 8 ? word : word & ((1 << UInt64(length * 8)) - 1)
                x = (x & 0x7F00_7F00_7F00_7F00) >> 1 | (x & 0x007F_007F_007F_007F)
                x = (x & 0x3FFF_0000_3FFF_0000) >> 2 | (x & 0x0000_3FFF_0000_3FFF)
                x = (x & 0x0FFF_FFFF_0000_0000) >> 4 | (x & 0x0000_0000_0FFF_FFFF)
                position += length
                return x
            }
        }
        return try readLongVarint(what())
    }

    /// Varints near the end of the buffer, of 9 or 10 bytes, or malformed.
    @inline(never)
    private mutating func readLongVarint(_ what: @autoclosure () -> String) throws(ChronicleError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard position < end else {
                throw Self.failure(errorCode, context, "varint for \(what()) runs past the end at offset \(offset)")
            }
            let byte = position.load(as: UInt8.self)
            position += 1
            if shift == 63 && byte > 1 {
                throw Self.failure(errorCode, context, "varint for \(what()) overflows 64 bits at offset \(offset - 1)")
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
    }

    /// Skips a varint without decoding it: the checks of ``readVarint(_:)``
    /// (which it falls back to near the end of the buffer or for 9 and 10
    /// byte varints), with the length of one up to eight bytes found in one
    /// word and no branch on it.
    @inline(__always)
    package mutating func skipVarint(_ what: @autoclosure () -> String = "a varint") throws(ChronicleError) {
        if end - position >= 8 {
            let stops = ~UInt64(littleEndian: position.loadUnaligned(as: UInt64.self)) & 0x8080_8080_8080_8080
            if stops != 0 {
                position += (stops.trailingZeroBitCount + 1) >> 3
                return
            }
        }
        _ = try readLongVarint(what())
    }

    /// Skips `n` bytes, or throws if fewer are left.
    @inline(__always)
    package mutating func skip(_ n: Int, _ what: @autoclosure () -> String) throws(ChronicleError) {
        try require(n, what())
        position += n
    }

    /// Reads a varint that must fit `limit` (inclusive) and returns it as `Int`.
    @inline(__always)
    package mutating func readLength(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> Int {
        let v = try readVarint(what())
        guard v <= UInt64(limit) else {
            throw Self.failure(errorCode, context, "\(what()) of \(v) exceeds \(limit) at offset \(offset)")
        }
        return Int(v)
    }

    /// Reads a zig-zag varint.
    @inline(__always)
    package mutating func readSignedVarint(_ what: @autoclosure () -> String = "a signed varint") throws(ChronicleError) -> Int64 {
        let v = try readVarint(what())
        return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }

    /// Returns a view of the next `n` bytes and skips them. The view is valid
    /// as long as the underlying buffer is.
    @inline(__always)
    package mutating func readSlice(_ n: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> UnsafeRawBufferPointer {
        try require(n, what())
        let slice = UnsafeRawBufferPointer(start: position, count: n)
        position += n
        return slice
    }

    /// Reads `n` bytes into a new array.
    package mutating func readBytes(_ n: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> [UInt8] {
        Array(try readSlice(n, what()))
    }

    /// Reads a varint length (at most `limit`) and that many bytes.
    @inline(__always)
    package mutating func readLengthPrefixed(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> UnsafeRawBufferPointer {
        let n = try readLength(max: limit, "length of \(what())")
        return try readSlice(n, what())
    }

    /// The address of the read position and the bytes left from it, for
    /// matching without copying (nothing may be read when none are left).
    @inline(__always)
    var cursor: (pointer: UnsafeRawPointer, available: Int) {
        (position, end - position)
    }

    /// Skips `n` bytes already known to be available (see ``cursor``).
    @inline(__always)
    mutating func skip(knownAvailable n: Int) {
        position += n
    }

    /// The bytes from `start` to the read position.
    @inline(__always)
    package func slice(from start: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + start, count: offset - start)
    }

    /// Skips a length-prefixed string after checking that it is valid UTF-8.
    @inline(__always)
    package mutating func skipString(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) {
        let raw = try readLengthPrefixed(max: limit, what())
        // The bytes after the string up to the end may be read too (never used).
        guard UTF8Check.isValid(position - raw.count, count: raw.count, readable: end - position + raw.count) else {
            throw Self.failure(errorCode, context, "\(what()) is not valid UTF-8 at offset \(offset - raw.count)")
        }
    }

    /// Reads a length-prefixed string already known to be valid UTF-8.
    @inline(__always)
    mutating func readUncheckedString() throws(ChronicleError) -> String {
        let raw = try readLengthPrefixed(max: Int.max, "string")
        return String(decoding: raw, as: UTF8.self)
    }

    /// Reads a length-prefixed UTF-8 string, rejecting invalid UTF-8.
    package mutating func readString(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> String {
        let raw = try readLengthPrefixed(max: limit, what())
        guard UTF8Check.isValid(raw) else {
            throw Self.failure(errorCode, context, "\(what()) is not valid UTF-8 at offset \(offset - raw.count)")
        }
        return String(decoding: raw, as: UTF8.self)
    }
}

/// The base of a reader over an empty buffer: a real address, so that the
/// reader's pointers are never nil, and never read (every read needs at least
/// one byte to be available).
nonisolated(unsafe) private let emptyBufferPlaceholder = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
