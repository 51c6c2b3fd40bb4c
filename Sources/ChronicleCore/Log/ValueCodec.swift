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
        case .uuid(let u): w.writeUInt8(9); w.writeRaw(RecordID(u).bytes)
        case .transformable(let t):
            w.writeUInt8(10)
            w.writeString(t.typeName)
            w.writeString(t.mimeType)
            w.writeLengthPrefixed(t.data)
        case .reference(let r): w.writeUInt8(11); w.writeRaw(r.bytes)
        }
    }

    /// Reads one value; `limit` bounds every length (the body's size).
    @inline(__always)
    static func read(from r: inout ByteReader, limit: Int) throws(ChronicleError) -> Value {
        let tag = try r.readUInt8("value tag")
        switch tag {
        case 0: return .null
        case 1: return .string(try r.readString(max: limit, "string value"))
        case 2: return .int(try r.readSignedVarint("int value"))
        case 3: return .double(Double(bitPattern: try r.readUInt64("double value")))
        case 4: return .bool(false)
        case 5: return .bool(true)
        case 6: return .date(Timestamp(microsecondsSinceEpoch: try r.readSignedVarint("date value")))
        case 7: return .data(Data(try r.readLengthPrefixed(max: limit, "data value")))
        case 8:
            let sign = try r.readUInt8("decimal sign")
            let exponent = Int8(bitPattern: try r.readUInt8("decimal exponent"))
            let high = try r.readVarint("decimal significand")
            let low = try r.readVarint("decimal significand")
            guard sign <= 1 else { throw ChronicleError(.malformedBody, "body: decimal sign byte \(sign) at offset \(r.offset)") }
            do {
                return .decimal(try ChronicleDecimal(isNegative: sign == 1, significand: UInt128(high) << 64 | UInt128(low), exponent: exponent))
            } catch {
                throw ChronicleError(.malformedBody, "body: \(error.message)")
            }
        case 9: return .uuid(RecordID(bytes: try r.readSlice(16, "uuid value")).uuid)
        case 10:
            let typeName = try r.readString(max: limit, "transformable type name")
            let mime = try r.readString(max: limit, "transformable MIME type")
            let data = Data(try r.readLengthPrefixed(max: limit, "transformable data"))
            return .transformable(TransformableValue(typeName: typeName, mimeType: mime, data: data))
        case 11: return .reference(RecordID(bytes: try r.readSlice(16, "reference value")))
        default:
            throw ChronicleError(.malformedBody, "body: unknown value tag \(tag) at offset \(r.offset - 1)")
        }
    }
}
