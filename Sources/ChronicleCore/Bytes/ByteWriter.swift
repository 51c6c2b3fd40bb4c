/// Appends big-endian integers, LEB128 varints and length-prefixed bytes to a
/// growable buffer. The log codec's only way of producing bytes.
public struct ByteWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8]

    /// Creates an empty writer with room for `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// The number of bytes written so far.
    public var count: Int { bytes.count }

    @inline(__always)
    public mutating func writeUInt8(_ value: UInt8) { bytes.append(value) }

    @inline(__always)
    public mutating func writeUInt16(_ value: UInt16) { writeFixed(value.bigEndian) }

    @inline(__always)
    public mutating func writeUInt32(_ value: UInt32) { writeFixed(value.bigEndian) }

    @inline(__always)
    public mutating func writeUInt64(_ value: UInt64) { writeFixed(value.bigEndian) }

    @inline(__always)
    private mutating func writeFixed<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value) { bytes.append(contentsOf: $0) }
    }

    /// Writes an unsigned LEB128 varint (1 to 10 bytes).
    @inline(__always)
    public mutating func writeVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// Writes a signed integer as a zig-zag varint.
    @inline(__always)
    public mutating func writeSignedVarint(_ value: Int64) {
        writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// Writes raw bytes with no length prefix.
    @inline(__always)
    public mutating func writeRaw<C: Collection>(_ raw: C) where C.Element == UInt8 {
        bytes.append(contentsOf: raw)
    }

    /// Writes a varint length followed by the bytes.
    @inline(__always)
    public mutating func writeLengthPrefixed<C: Collection>(_ raw: C) where C.Element == UInt8 {
        writeVarint(UInt64(raw.count))
        bytes.append(contentsOf: raw)
    }

    /// Writes a string as varint length plus UTF-8.
    @inline(__always)
    public mutating func writeString(_ string: String) {
        var s = string
        s.withUTF8 { writeLengthPrefixed($0) }
    }

    /// Overwrites bytes at `offset` (used to patch lengths and checksums).
    public mutating func overwrite(at offset: Int, with raw: [UInt8]) {
        bytes.replaceSubrange(offset..<(offset + raw.count), with: raw)
    }
}
