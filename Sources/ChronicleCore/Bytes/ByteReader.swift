/// Reads what ``ByteWriter`` writes, from borrowed memory, with every read
/// bounds-checked: running past the end throws ``ChronicleError/Code/shortRead``
/// (or ``ChronicleError/Code/malformedBody`` inside a body); it never traps.
///
/// The reader does not own its bytes; use it inside `withUnsafeBytes`.
public struct ByteReader {
    private let base: UnsafeRawPointer?
    /// The total number of bytes.
    public let count: Int
    /// The read position.
    public private(set) var offset: Int
    private let errorCode: ChronicleError.Code
    private let context: String

    /// Creates a reader over `buffer`. Errors are reported with `errorCode`
    /// and mention `context` (for example "header" or "body").
    public init(_ buffer: UnsafeRawBufferPointer, errorCode: ChronicleError.Code = .shortRead, context: String) {
        self.base = buffer.baseAddress
        self.count = buffer.count
        self.offset = 0
        self.errorCode = errorCode
        self.context = context
    }

    /// The number of bytes not yet read.
    public var remaining: Int { count - offset }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { offset == count }

    /// Throws unless `n` more bytes are available.
    @inline(__always)
    public func require(_ n: Int, _ what: @autoclosure () -> String) throws(ChronicleError) {
        if n < 0 || n > count - offset {
            throw ChronicleError(
                errorCode,
                "\(context): needed \(n) bytes for \(what()) at offset \(offset), only \(count - offset) left")
        }
    }

    @inline(__always)
    public mutating func readUInt8(_ what: @autoclosure () -> String = "a byte") throws(ChronicleError) -> UInt8 {
        try require(1, what())
        let v = base!.load(fromByteOffset: offset, as: UInt8.self)
        offset += 1
        return v
    }

    @inline(__always)
    public mutating func readUInt16(_ what: @autoclosure () -> String = "a 16-bit integer") throws(ChronicleError) -> UInt16 {
        try readFixed(UInt16.self, what())
    }

    @inline(__always)
    public mutating func readUInt32(_ what: @autoclosure () -> String = "a 32-bit integer") throws(ChronicleError) -> UInt32 {
        try readFixed(UInt32.self, what())
    }

    @inline(__always)
    public mutating func readUInt64(_ what: @autoclosure () -> String = "a 64-bit integer") throws(ChronicleError) -> UInt64 {
        try readFixed(UInt64.self, what())
    }

    @inline(__always)
    private mutating func readFixed<T: FixedWidthInteger>(_: T.Type, _ what: String) throws(ChronicleError) -> T {
        try require(MemoryLayout<T>.size, what)
        let v = base!.loadUnaligned(fromByteOffset: offset, as: T.self)
        offset += MemoryLayout<T>.size
        return T(bigEndian: v)
    }

    /// Reads an unsigned LEB128 varint; more than 10 bytes or overflow is an error.
    @inline(__always)
    public mutating func readVarint(_ what: @autoclosure () -> String = "a varint") throws(ChronicleError) -> UInt64 {
        // Most varints in a body (lengths, counts, small numbers) are one byte.
        if offset < count {
            let byte = base!.load(fromByteOffset: offset, as: UInt8.self)
            if byte < 0x80 {
                offset += 1
                return UInt64(byte)
            }
        }
        // Up to 8 bytes (56 bits) at once: find the stop byte (high bit
        // clear) in one word, then pack the 7-bit groups in three steps.
        if count - offset >= 8 {
            let word = UInt64(littleEndian: base!.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            let stops = ~word & 0x8080_8080_8080_8080
            if stops != 0 {
                let length = (stops.trailingZeroBitCount + 1) >> 3
                var x = length == 8 ? word : word & ((1 << UInt64(length * 8)) - 1)
                x = (x & 0x7F00_7F00_7F00_7F00) >> 1 | (x & 0x007F_007F_007F_007F)
                x = (x & 0x3FFF_0000_3FFF_0000) >> 2 | (x & 0x0000_3FFF_0000_3FFF)
                x = (x & 0x0FFF_FFFF_0000_0000) >> 4 | (x & 0x0000_0000_0FFF_FFFF)
                offset += length
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
            guard offset < count else {
                throw ChronicleError(errorCode, "\(context): varint for \(what()) runs past the end at offset \(offset)")
            }
            let byte = base!.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            if shift == 63 && byte > 1 {
                throw ChronicleError(errorCode, "\(context): varint for \(what()) overflows 64 bits at offset \(offset - 1)")
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
    }

    /// Reads a varint that must fit `limit` (inclusive) and returns it as `Int`.
    @inline(__always)
    public mutating func readLength(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> Int {
        let v = try readVarint(what())
        guard v <= UInt64(limit) else {
            throw ChronicleError(errorCode, "\(context): \(what()) of \(v) exceeds \(limit) at offset \(offset)")
        }
        return Int(v)
    }

    /// Reads a zig-zag varint.
    @inline(__always)
    public mutating func readSignedVarint(_ what: @autoclosure () -> String = "a signed varint") throws(ChronicleError) -> Int64 {
        let v = try readVarint(what())
        return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }

    /// Returns a view of the next `n` bytes and skips them. The view is valid
    /// as long as the underlying buffer is.
    @inline(__always)
    public mutating func readSlice(_ n: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> UnsafeRawBufferPointer {
        try require(n, what())
        let slice = UnsafeRawBufferPointer(start: base.map { $0 + offset }, count: n)
        offset += n
        return slice
    }

    /// Reads `n` bytes into a new array.
    public mutating func readBytes(_ n: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> [UInt8] {
        Array(try readSlice(n, what()))
    }

    /// Reads a varint length (at most `limit`) and that many bytes.
    @inline(__always)
    public mutating func readLengthPrefixed(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> UnsafeRawBufferPointer {
        let n = try readLength(max: limit, "length of \(what())")
        return try readSlice(n, what())
    }

    /// The address of the read position and the bytes left from it, for
    /// matching without copying; nil for an empty buffer.
    @inline(__always)
    var cursor: (pointer: UnsafeRawPointer, available: Int)? {
        base.map { ($0 + offset, count - offset) }
    }

    /// Skips `n` bytes already known to be available (see ``cursor``).
    @inline(__always)
    mutating func skip(knownAvailable n: Int) {
        offset += n
    }

    /// The bytes from `start` to the read position.
    @inline(__always)
    public func slice(from start: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base.map { $0 + start }, count: offset - start)
    }

    /// Skips a length-prefixed string after checking that it is valid UTF-8.
    @inline(__always)
    public mutating func skipString(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) {
        let raw = try readLengthPrefixed(max: limit, what())
        guard UTF8Check.isValid(raw) else {
            throw ChronicleError(errorCode, "\(context): \(what()) is not valid UTF-8 at offset \(offset - raw.count)")
        }
    }

    /// Reads a length-prefixed string already known to be valid UTF-8.
    @inline(__always)
    mutating func readUncheckedString() throws(ChronicleError) -> String {
        let raw = try readLengthPrefixed(max: Int.max, "string")
        return String(decoding: raw, as: UTF8.self)
    }

    /// Reads a length-prefixed UTF-8 string, rejecting invalid UTF-8.
    public mutating func readString(max limit: Int, _ what: @autoclosure () -> String) throws(ChronicleError) -> String {
        let raw = try readLengthPrefixed(max: limit, what())
        guard UTF8Check.isValid(raw) else {
            throw ChronicleError(errorCode, "\(context): \(what()) is not valid UTF-8 at offset \(offset - raw.count)")
        }
        return String(decoding: raw, as: UTF8.self)
    }
}
