/// Appends big-endian integers, LEB128 varints and length-prefixed bytes to a
/// growable buffer. The log codec's only way of producing bytes.
///
/// The writer owns raw memory and is not copyable, so every write is a
/// bounds-checked store with no copy-on-write check; ``bytes`` copies the
/// result out once.
package struct ByteWriter: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    /// The number of bytes written so far.
    package private(set) var count: Int = 0

    /// Creates an empty writer with room for `capacity` bytes.
    package init(capacity: Int = 256) {
        self.capacity = max(16, capacity)
        self.base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    /// The bytes written so far.
    package var bytes: [UInt8] {
        Array(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Calls `body` with the bytes written so far, without copying them.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    @inline(__always)
    private mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(count + n) }
    }

    @inline(never)
    private mutating func grow(_ needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        newBase.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inline(__always)
    package mutating func writeUInt8(_ value: UInt8) {
        reserve(1)
        base.storeBytes(of: value, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    package mutating func writeUInt16(_ value: UInt16) { writeFixed(value.bigEndian) }

    @inline(__always)
    package mutating func writeUInt32(_ value: UInt32) { writeFixed(value.bigEndian) }

    @inline(__always)
    package mutating func writeUInt64(_ value: UInt64) { writeFixed(value.bigEndian) }

    @inline(__always)
    private mutating func writeFixed<T: FixedWidthInteger>(_ value: T) {
        reserve(MemoryLayout<T>.size)
        base.storeBytes(of: value, toByteOffset: count, as: T.self)
        count += MemoryLayout<T>.size
    }

    /// Writes an unsigned LEB128 varint (1 to 10 bytes).
    @inline(__always)
    package mutating func writeVarint(_ value: UInt64) {
        reserve(10)
        var v = value
        var offset = count
        while v >= 0x80 {
            base.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: offset, as: UInt8.self)
            offset += 1
            v >>= 7
        }
        base.storeBytes(of: UInt8(v), toByteOffset: offset, as: UInt8.self)
        count = offset + 1
    }

    /// Writes a record ID's 16 bytes.
    @inline(__always)
    package mutating func writeRecordID(_ id: RecordID) {
        writeUInt64(id.high)
        writeUInt64(id.low)
    }

    /// Writes a signed integer as a zig-zag varint.
    @inline(__always)
    package mutating func writeSignedVarint(_ value: Int64) {
        writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// Writes raw bytes with no length prefix.
    @inline(__always)
    package mutating func writeRaw(_ raw: UnsafeRawBufferPointer) {
        let n = raw.count
        guard n > 0, let source = raw.baseAddress else { return }
        reserve(n)
        let destination = base + count
        // Names and most values are a few bytes: two overlapping word moves
        // beat a call to memmove.
        if n >= 8 && n <= 16 {
            destination.storeBytes(of: source.loadUnaligned(as: UInt64.self), as: UInt64.self)
            destination.storeBytes(of: source.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self), toByteOffset: n - 8, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            destination.storeBytes(of: source.loadUnaligned(as: UInt32.self), as: UInt32.self)
            destination.storeBytes(of: source.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self), toByteOffset: n - 4, as: UInt32.self)
        } else if n < 4 {
            for i in 0..<n { destination.storeBytes(of: source.load(fromByteOffset: i, as: UInt8.self), toByteOffset: i, as: UInt8.self) }
        } else {
            destination.copyMemory(from: source, byteCount: n)
        }
        count += n
    }

    /// Writes raw bytes with no length prefix.
    @inline(__always)
    package mutating func writeRaw<C: Collection>(_ raw: C) where C.Element == UInt8 {
        let done: Bool? = raw.withContiguousStorageIfAvailable { buffer in
            writeRaw(UnsafeRawBufferPointer(buffer))
            return true
        }
        if done == nil {
            for byte in raw { writeUInt8(byte) }
        }
    }

    /// Writes a varint length followed by the bytes.
    @inline(__always)
    package mutating func writeLengthPrefixed<C: Collection>(_ raw: C) where C.Element == UInt8 {
        writeVarint(UInt64(raw.count))
        writeRaw(raw)
    }

    /// Writes a string as varint length plus UTF-8.
    @inline(__always)
    package mutating func writeString(_ string: String) {
        // Native strings (all of them on Linux) lend their UTF-8 without a
        // copy; `withUTF8` would need a mutable copy of the string.
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { utf8 in
            writeVarint(UInt64(utf8.count))
            writeRaw(UnsafeRawBufferPointer(utf8))
        }
        if done == nil {
            var s = string
            s.withUTF8 { utf8 in
                writeVarint(UInt64(utf8.count))
                writeRaw(UnsafeRawBufferPointer(utf8))
            }
        }
    }
}
