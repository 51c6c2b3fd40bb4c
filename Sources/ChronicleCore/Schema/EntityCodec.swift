#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the log decoder needs of an entity, precomputed once per schema and
/// held by reference, so decoding a change copies no `Entity` or `Field`
/// values: the field names as UTF-8 for matching, the names as `String`s to
/// hand out, and the value tags each field accepts.
final class EntityCodec: Sendable {
    let name: String
    let nameUTF8: [UInt8]
    let fieldNames: [String]
    let fieldNamesUTF8: [[UInt8]]
    let tagMasks: [UInt16]

    init(_ entity: Entity) {
        name = entity.name
        nameUTF8 = Array(entity.name.utf8)
        fieldNames = entity.fields.map(\.name)
        fieldNamesUTF8 = entity.fields.map { Array($0.name.utf8) }
        tagMasks = entity.fields.map(ValueCodec.tagMask(for:))
    }

    /// The index of the field whose name has these UTF-8 bytes. Encoders
    /// write fields in schema order, so `hint` (the field after the previous
    /// one) is tried first.
    @inline(__always)
    func fieldIndex(utf8 bytes: UnsafeRawBufferPointer, hint: Int = 0) -> Int? {
        if hint < fieldNamesUTF8.count && Self.equal(fieldNamesUTF8[hint], bytes) { return hint }
        for i in fieldNamesUTF8.indices where Self.equal(fieldNamesUTF8[i], bytes) { return i }
        return nil
    }

    @inline(__always)
    private static func equal(_ name: [UInt8], _ bytes: UnsafeRawBufferPointer) -> Bool {
        name.count == bytes.count && name.withUnsafeBytes { c in
            c.count == 0 || memcmp(c.baseAddress!, bytes.baseAddress!, c.count) == 0
        }
    }

    /// Whether this entity's name has these UTF-8 bytes.
    @inline(__always)
    func hasName(utf8 bytes: UnsafeRawBufferPointer) -> Bool {
        nameUTF8.count == bytes.count && nameUTF8.withUnsafeBytes { c in
            c.count == 0 || memcmp(c.baseAddress!, bytes.baseAddress!, c.count) == 0
        }
    }
}
