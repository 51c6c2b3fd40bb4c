/// The names of a schema's entities and fields as they appear in a log body
/// (a one-byte varint length, then the UTF-8 bytes), laid out flat in memory
/// once per schema so that the body walker matches a name with one or two
/// word compares and touches no reference-counted value per change or value.
///
/// Names are at most ``Schema/maxNameLength`` (63) bytes, so an encoded name
/// is at most 64 bytes and its length prefix is always one byte. Each slot is
/// ``stride`` bytes:
///
/// | offset | size | content |
/// |---|---|---|
/// | 0 | 64 | the encoded name, zero-padded |
/// | 64 | 8 | mask of the name's first `min(length, 8)` bytes, as a word |
/// | 72 | 1 | encoded length (1 + the name's UTF-8 length) |
/// | 74 | 2 | fields: the value tags the field accepts; entities: field count |
/// | 76 | 4 | entities: index of the first field slot |
///
/// The memory is written once in `init` and only read afterwards, which is
/// what makes sharing it across threads safe.
final class NameTable: @unchecked Sendable {
    static let stride = 80
    private let entitySlots: UnsafeMutableRawPointer
    private let fieldSlots: UnsafeMutableRawPointer
    /// The number of entities.
    let entityCount: Int
    /// The entity names, by entity index.
    let entityNames: [String]
    /// Every entity's field names, one after the other, by field slot index
    /// (``Slots/first`` plus the field's index).
    let fieldNames: [String]

    init(_ entities: [Entity]) {
        entityCount = entities.count
        entityNames = entities.map(\.name)
        fieldNames = entities.flatMap { $0.fields.map(\.name) }
        let fieldCount = entities.reduce(0) { $0 + $1.fields.count }
        entitySlots = .allocate(byteCount: max(1, entities.count) * Self.stride, alignment: 8)
        fieldSlots = .allocate(byteCount: max(1, fieldCount) * Self.stride, alignment: 8)
        entitySlots.initializeMemory(as: UInt8.self, repeating: 0, count: max(1, entities.count) * Self.stride)
        fieldSlots.initializeMemory(as: UInt8.self, repeating: 0, count: max(1, fieldCount) * Self.stride)
        var nextField = 0
        for (e, entity) in entities.enumerated() {
            let slot = entitySlots + e * Self.stride
            Self.writeName(entity.name, to: slot)
            slot.storeBytes(of: UInt16(entity.fields.count), toByteOffset: 74, as: UInt16.self)
            slot.storeBytes(of: UInt32(nextField), toByteOffset: 76, as: UInt32.self)
            for field in entity.fields {
                let f = fieldSlots + nextField * Self.stride
                Self.writeName(field.name, to: f)
                f.storeBytes(of: ValueCodec.tagMask(for: field), toByteOffset: 74, as: UInt16.self)
                nextField += 1
            }
        }
    }

    deinit {
        entitySlots.deallocate()
        fieldSlots.deallocate()
    }

    private static func writeName(_ name: String, to slot: UnsafeMutableRawPointer) {
        // A validated schema's names are 1...63 bytes; clamp anyway so a
        // slot can never overflow.
        let utf8 = Array(name.utf8.prefix(Schema.maxNameLength))
        slot.storeBytes(of: UInt8(utf8.count), as: UInt8.self)
        for (i, b) in utf8.enumerated() { slot.storeBytes(of: b, toByteOffset: 1 + i, as: UInt8.self) }
        let length = 1 + utf8.count
        var maskBytes = [UInt8](repeating: 0, count: 8)
        for i in 0..<min(length, 8) { maskBytes[i] = 0xFF }
        let mask = maskBytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        slot.storeBytes(of: mask, toByteOffset: 64, as: UInt64.self)
        slot.storeBytes(of: UInt8(length), toByteOffset: 72, as: UInt8.self)
    }

    /// The slots of the fields of entity `e`.
    @inline(__always)
    func fields(of e: Int) -> Slots { view.fields(of: e) }

    /// The entity slots.
    @inline(__always)
    var entities: Slots { Slots(base: UnsafeRawPointer(entitySlots), count: entityCount, first: 0) }

    /// The table as plain pointers, for a walker's hot loop: using a `View`
    /// retains nothing. Valid only while the table is alive (use it inside
    /// `withExtendedLifetime(table)`).
    var view: View {
        View(entities: entities, entitySlots: UnsafeRawPointer(entitySlots), fieldSlots: UnsafeRawPointer(fieldSlots),
             table: Unmanaged.passUnretained(self))
    }

    /// See ``view``.
    struct View {
        /// The entity slots.
        let entities: Slots
        fileprivate let entitySlots: UnsafeRawPointer
        fileprivate let fieldSlots: UnsafeRawPointer
        private let table: Unmanaged<NameTable>

        fileprivate init(entities: Slots, entitySlots: UnsafeRawPointer, fieldSlots: UnsafeRawPointer, table: Unmanaged<NameTable>) {
            self.entities = entities
            self.entitySlots = entitySlots
            self.fieldSlots = fieldSlots
            self.table = table
        }

        /// The slots of the fields of entity `e`.
        @inline(__always)
        func fields(of e: Int) -> Slots {
            let slot = entitySlots + e &* NameTable.stride
            let first = Int(slot.load(fromByteOffset: 76, as: UInt32.self))
            let count = Int(slot.load(fromByteOffset: 74, as: UInt16.self))
            return Slots(base: fieldSlots + first &* NameTable.stride, count: count, first: first)
        }

        /// The table itself, for the cold paths (names, error messages).
        var nameTable: NameTable { table.takeUnretainedValue() }
    }

    /// A run of slots; valid while the table is alive.
    struct Slots {
        let base: UnsafeRawPointer
        let count: Int
        /// The index of the first slot in the whole table (into ``NameTable/fieldNames`` for fields).
        let first: Int

        /// The encoded length of slot `i`'s name.
        @inline(__always)
        func length(_ i: Int) -> Int {
            Int(base.load(fromByteOffset: i &* NameTable.stride &+ 72, as: UInt8.self))
        }

        /// The tags field slot `i` accepts.
        @inline(__always)
        func tagMask(_ i: Int) -> UInt16 {
            base.load(fromByteOffset: i &* NameTable.stride &+ 74, as: UInt16.self)
        }

        /// Whether the `available` bytes at `p` begin with slot `i`'s encoded name.
        @inline(__always)
        func matches(_ i: Int, at p: UnsafeRawPointer, available: Int) -> Bool {
            let slot = base + i &* NameTable.stride
            let length = Int(slot.load(fromByteOffset: 72, as: UInt8.self))
            if available >= 8 {
                let first = p.loadUnaligned(as: UInt64.self)
                if length <= 8 {
                    return first & slot.load(fromByteOffset: 64, as: UInt64.self) == slot.load(as: UInt64.self)
                }
                guard first == slot.load(as: UInt64.self), available >= length else { return false }
                var j = 8
                while j + 8 <= length {
                    if p.loadUnaligned(fromByteOffset: j, as: UInt64.self) != slot.load(fromByteOffset: j, as: UInt64.self) { return false }
                    j += 8
                }
                // The last partial word: compare the (overlapping) final 8 bytes.
                return j == length
                    || p.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
                        == slot.loadUnaligned(fromByteOffset: length - 8, as: UInt64.self)
            }
            guard available >= length else { return false }
            for j in 0..<length where p.load(fromByteOffset: j, as: UInt8.self) != slot.load(fromByteOffset: j, as: UInt8.self) {
                return false
            }
            return true
        }

        /// Whether slot `i`'s name (without its length prefix) is `utf8`.
        func hasName(_ i: Int, utf8: UnsafeRawBufferPointer) -> Bool {
            let slot = base + i &* NameTable.stride
            guard length(i) == utf8.count + 1 else { return false }
            for j in 0..<utf8.count where slot.load(fromByteOffset: 1 + j, as: UInt8.self) != utf8[j] { return false }
            return true
        }

        /// The slot whose name (without its length prefix) is `utf8`.
        func index(utf8: UnsafeRawBufferPointer) -> Int? {
            for i in 0..<count where hasName(i, utf8: utf8) { return i }
            return nil
        }
    }
}
