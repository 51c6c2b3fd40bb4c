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

    /// Names are short (at most 63 bytes): comparing 8 bytes at a time
    /// inline beats a call to `memcmp`.
    @inline(__always)
    static func equal(_ name: [UInt8], _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard name.count == bytes.count else { return false }
        return name.withUnsafeBytes { c in
            let n = c.count
            var i = 0
            while i + 8 <= n {
                if c.loadUnaligned(fromByteOffset: i, as: UInt64.self) != bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
                i += 8
            }
            while i < n {
                if c[i] != bytes[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// Whether this entity's name has these UTF-8 bytes.
    @inline(__always)
    func hasName(utf8 bytes: UnsafeRawBufferPointer) -> Bool {
        Self.equal(nameUTF8, bytes)
    }
}
