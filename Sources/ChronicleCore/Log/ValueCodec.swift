import Foundation

/// The binary form of a ``Value``: a one-byte tag, then the payload.
///
/// | tag | value | payload |
/// |---|---|---|
/// | 0 | null | none |
/// | 1 | string | varint length, UTF-8 |
/// | 2 | int64 | zig-zag varint |
/// | 3 | double | 8 bytes, IEEE 754 bit pattern, big-endian |
/// | 4 / 5 | false / true | none |
/// | 6 | date | zig-zag varint of microseconds since 1970 |
/// | 7 | data | varint length, bytes |
/// | 8 | decimal | sign byte (0/1), exponent byte (two's complement), varint high 64 bits, varint low 64 bits of the significand |
/// | 9 | uuid | 16 bytes |
/// | 10 | transformable | type name (varint length, UTF-8), MIME type (same), data (varint length, bytes) |
/// | 11 | reference | 16-byte record ID |
enum ValueCodec {
    static func write(_ value: Value, to w: inout ByteWriter) {
        switch value {
        case .null: w.writeUInt8(0)
        case .string(let s): w.writeUInt8(1); w.writeString(s)
        case .int(let i): w.writeUInt8(2); w.writeSignedVarint(i)
        case .double(let d): w.writeUInt8(3); w.writeUInt64(d.bitPattern)
        case .bool(let b): w.writeUInt8(b ? 5 : 4)
        case .date(let t): w.writeUInt8(6); w.writeSignedVarint(t.microsecondsSinceEpoch)
        case .data(let d): w.writeUInt8(7); w.writeLengthPrefixed(d)
        case .decimal(let d):
            w.writeUInt8(8)
            w.writeUInt8(d.isNegative ? 1 : 0)
            w.writeUInt8(UInt8(bitPattern: d.exponent))
            w.writeVarint(UInt64(truncatingIfNeeded: d.significand >> 64))
            w.writeVarint(UInt64(truncatingIfNeeded: d.significand))
        case .uuid(let u): w.writeUInt8(9); w.writeRecordID(RecordID(u))
        case .transformable(let t):
            w.writeUInt8(10)
            w.writeString(t.typeName)
            w.writeString(t.mimeType)
            w.writeLengthPrefixed(t.data)
        case .reference(let r): w.writeUInt8(11); w.writeRecordID(r)
        }
    }

    /// Reads one value; `limit` bounds every length (the body's size).
    @inline(__always)
    static func read(from r: inout ByteReader, limit: Int) throws(ChronicleError) -> Value {
        try readPayload(tag: try r.readUInt8("value tag"), from: &r, limit: limit)
    }

    /// The tags a field accepts, as a bit mask (bit n = tag n).
    static func tagMask(for field: Field) -> UInt16 {
        var mask: UInt16 = field.isOptional ? 1 : 0
        switch field.kind {
        case .reference: mask |= 1 << 11
        case .attribute(let type):
            switch type {
            case .string: mask |= 1 << 1
            case .int64: mask |= 1 << 2
            case .double: mask |= 1 << 3
            case .bool: mask |= 1 << 4 | 1 << 5
            case .date: mask |= 1 << 6
            case .data: mask |= 1 << 7
            case .decimal: mask |= 1 << 8
            case .uuid: mask |= 1 << 9
            case .transformable: mask |= 1 << 10
            }
        }
        return mask
    }

    /// Reads the payload of a value whose tag was already read.
    @inline(__always)
    static func readPayload(tag: UInt8, from r: inout ByteReader, limit: Int) throws(ChronicleError) -> Value {
        let raw = try skipPayload(tag: tag, from: &r, limit: limit)
        return materialize(RawValue(tag: tag, payload: raw))
    }

    /// The shape of each tag's payload, four bits per tag (tag 0 in the low
    /// bits): 0, 1 and 2 are fixed sizes of 0, 8 and 16 bytes (null, the
    /// booleans, double, uuid, reference), 3 a varint (int, date), 4 a string,
    /// and 5 anything else (data, decimal, transformable, unknown tags).
    /// The common payloads are skipped by shape, not by a jump on the tag
    /// whose target would change with every field.
    /// (A literal: a computed static costs no lazy-initialization check.)
    static var payloadShapes: UInt64 { 0x5555_2525_5300_1340 }

    /// The shape of `tag`'s payload (see ``payloadShapes``).
    @inline(__always)
    static func payloadShape(_ tag: UInt8) -> UInt64 {
        tag < 16 ? payloadShapes >> (UInt64(tag) &* 4) & 0xF : 5
    }

    /// Checks the payload of a value whose tag was already read and returns
    /// its bytes, without building a ``Value``: lengths, UTF-8 and decimal
    /// bounds are all verified, so ``materialize(_:)`` cannot fail.
    @inline(__always)
    static func skipPayload(tag: UInt8, from r: inout ByteReader, limit: Int) throws(ChronicleError) -> UnsafeRawBufferPointer {
        let start = r.offset
        let shape = payloadShape(tag)
        if shape <= 2 {
            try r.skip(Int(shape) &* 8, "value of tag \(tag)")
        } else if shape == 3 {
            try r.skipVarint("value of tag \(tag)")
        } else if shape == 4 {
            try r.skipString(max: limit, "string value")
        } else {
            try skipUncommonPayload(tag: tag, from: &r, limit: limit)
        }
        return r.slice(from: start)
    }

    /// Data, decimal and transformable payloads, and unknown tags.
    private static func skipUncommonPayload(tag: UInt8, from r: inout ByteReader, limit: Int) throws(ChronicleError) {
        switch tag {
        case 7: _ = try r.readLengthPrefixed(max: limit, "data value")
        case 8:
            let sign = try r.readUInt8("decimal sign")
            _ = try r.readUInt8("decimal exponent")
            let high = try r.readVarint("decimal significand")
            let low = try r.readVarint("decimal significand")
            guard sign <= 1 else { throw ChronicleError(.malformedBody, "body: decimal sign byte \(sign) at offset \(r.offset)") }
            guard UInt128(high) << 64 | UInt128(low) <= ChronicleDecimal.maxSignificand else {
                throw ChronicleError(.malformedBody, "body: decimal significand has more than 38 digits at offset \(r.offset)")
            }
        case 10:
            try r.skipString(max: limit, "transformable type name")
            try r.skipString(max: limit, "transformable MIME type")
            _ = try r.readLengthPrefixed(max: limit, "transformable data")
        default:
            throw ChronicleError(.malformedBody, "body: unknown value tag \(tag) at offset \(r.offset - 1)")
        }
    }

    /// Builds the ``Value`` of a payload checked by ``skipPayload(tag:from:limit:)``.
    static func materialize(_ raw: RawValue) -> Value {
        var r = ByteReader(raw.payload, errorCode: .malformedBody, context: "value")
        // The payload was verified, so these reads cannot fail.
        do {
            switch raw.tag {
            case 0: return .null
            case 1: return .string(try r.readUncheckedString())
            case 2: return .int(try r.readSignedVarint())
            case 3: return .double(Double(bitPattern: try r.readUInt64()))
            case 4: return .bool(false)
            case 5: return .bool(true)
            case 6: return .date(Timestamp(microsecondsSinceEpoch: try r.readSignedVarint()))
            case 7: return .data(Data(try r.readLengthPrefixed(max: Int.max, "data")))
            case 8:
                let sign = try r.readUInt8()
                let exponent = Int8(bitPattern: try r.readUInt8())
                let high = try r.readVarint()
                let low = try r.readVarint()
                return .decimal(try ChronicleDecimal(isNegative: sign == 1, significand: UInt128(high) << 64 | UInt128(low), exponent: exponent))
            case 9: return .uuid(RecordID(bytes: try r.readSlice(16, "uuid")).uuid)
            case 10:
                let typeName = try r.readUncheckedString()
                let mime = try r.readUncheckedString()
                let data = Data(try r.readLengthPrefixed(max: Int.max, "data"))
                return .transformable(TransformableValue(typeName: typeName, mimeType: mime, data: data))
            default: return .reference(RecordID(bytes: try r.readSlice(16, "reference")))
            }
        } catch {
            preconditionFailure("materializing a verified value failed: \(error)")
        }
    }
}

extension Value {
    /// About how many bytes the value takes in a body (exact for most types).
    @inline(__always)
    package var estimatedSize: Int {
        switch self {
        case .string(let s): return 3 + s.utf8.count
        case .data(let d): return 5 + d.count
        case .transformable(let t): return 12 + t.typeName.utf8.count + t.mimeType.utf8.count + t.data.count
        default: return 19
        }
    }
}

/// A value's tag and its verified payload bytes, borrowed from a log body.
/// Valid only while the body it points into is alive.
package struct RawValue {
    /// The value tag (see ``ValueCodec``).
    package let tag: UInt8
    /// The payload bytes after the tag.
    package let payload: UnsafeRawBufferPointer

    /// The value as a ``Value``.
    package var value: Value { ValueCodec.materialize(self) }
}

extension ByteWriter {
    /// Writes a value in its log encoding (tag and payload).
    package mutating func writeValue(_ value: Value) {
        ValueCodec.write(value, to: &self)
    }
}

extension ByteReader {
    /// Reads a value in its log encoding.
    package mutating func readValue(limit: Int) throws(ChronicleError) -> Value {
        try ValueCodec.read(from: &self, limit: limit)
    }
}
