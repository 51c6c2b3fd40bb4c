import Foundation

/// The data model of a store: its entities, their attributes and
/// relationships, and a version.
///
/// A schema is validated when it is made, so a `Schema` value is always
/// consistent. Its ``hash`` is stable across platforms and runs and is written
/// into every log; a device refuses logs written for another schema.
///
/// ```swift
/// let schema = try Schema(version: 1, entities: [
///     Entity("Author", attributes: [Attribute("name", .string)],
///            relationships: [.toMany("books", to: "Book", inverse: "author")],
///            unique: [["name"]]),
///     Entity("Book", attributes: [Attribute("title", .string)],
///            relationships: [.toOne("author", to: "Author", inverse: "books", deleteRule: .cascade)]),
/// ])
/// ```
public struct Schema: Hashable, Sendable {
    /// The app's version number for this model.
    public let version: Int
    /// The entities, in declared order.
    public let entities: [Entity]
    /// A stable 64-bit hash of everything that affects storage and merging.
    public let hash: UInt64
    private let indexByName: [String: Int]
    /// The encoded entity and field names, for the log decoder.
    let nameTable: NameTable

    /// The longest entity, attribute or relationship name.
    public static let maxNameLength = 63

    /// Creates and validates a schema.
    ///
    /// - Throws: ``ChronicleError/Code/invalidSchema`` naming the entity and
    ///   field at fault.
    public init(version: Int, entities: [Entity]) throws(ChronicleError) {
        try self.init(version: version, entities: entities, locate: { _ in "" })
    }

    /// Creates and validates a schema; `locate` gives "line 3, column 17: "
    /// for a path of the schema's JSON form (`entities[0].attributes[1].name`),
    /// for messages about a schema read from a file.
    init(version: Int, entities: [Entity], locate: @escaping (String) -> String) throws(ChronicleError) {
        self.version = version
        self.entities = entities
        var index: [String: Int] = [:]
        for (i, e) in entities.enumerated() { index[e.name] = i }
        self.indexByName = index
        self.nameTable = NameTable(entities)
        self.hash = Schema.computeHash(version: version, entities: entities)
        try SchemaValidator(schema: self, locate: locate).validate()
    }

    /// The entity named `name`.
    public func entity(named name: String) -> Entity? {
        indexByName[name].map { entities[$0] }
    }

    /// The index of the entity named `name` in ``entities``.
    public func entityIndex(named name: String) -> Int? { indexByName[name] }

    /// The hash as 16 lowercase hex digits.
    public var hashString: String { hash.paddedHex }

    public static func == (lhs: Schema, rhs: Schema) -> Bool {
        lhs.hash == rhs.hash && lhs.version == rhs.version && lhs.entities == rhs.entities
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(hash) }

    /// Hashes a canonical encoding: entities and their members sorted by name,
    /// so declaration order does not matter.
    private static func computeHash(version: Int, entities: [Entity]) -> UInt64 {
        var w = ByteWriter()
        w.writeRaw(Array("chronicle-schema-v1".utf8))
        w.writeSignedVarint(Int64(version))
        for e in entities.sorted(by: { $0.name < $1.name }) {
            w.writeString(e.name)
            for a in e.attributes.sorted(by: { $0.name < $1.name }) {
                w.writeString(a.name)
                w.writeString(a.type.rawValue)
                w.writeUInt8(a.isOptional ? 1 : 0)
                if let d = a.defaultValue {
                    w.writeUInt8(1)
                    ValueCodec.write(d, to: &w)
                } else {
                    w.writeUInt8(0)
                }
            }
            for r in e.relationships.sorted(by: { $0.name < $1.name }) {
                w.writeString(r.name)
                w.writeString(r.destination)
                w.writeUInt8(r.isToMany ? 1 : 0)
                w.writeString(r.inverse ?? "")
                w.writeString(r.deleteRule.rawValue)
                w.writeUInt8(r.isOptional ? 1 : 0)
            }
            for u in e.uniqueConstraints.map({ $0.joined(separator: ",") }).sorted() {
                w.writeString(u)
            }
            w.writeUInt8(0xFF)
        }
        // Indexes and earlier names came later: a schema without any hashes
        // as it did before them, so existing snapshots and logs keep theirs.
        let evolving = entities.filter { e in
            !e.indexes.isEmpty || !e.renamedFrom.isEmpty || e.fields.contains { !$0.renamedFrom.isEmpty }
        }
        if !evolving.isEmpty {
            w.writeRaw(Array("evolution-v1".utf8))
            for e in evolving.sorted(by: { $0.name < $1.name }) {
                w.writeString(e.name)
                writeEarlierNames(e.renamedFrom, to: &w)
                w.writeVarint(UInt64(e.indexes.count))
                for index in e.indexes {
                    w.writeVarint(UInt64(index.count))
                    for name in index { w.writeString(name) }
                }
                let renamed = e.fields.filter { !$0.renamedFrom.isEmpty }.sorted { $0.name < $1.name }
                w.writeVarint(UInt64(renamed.count))
                for f in renamed {
                    w.writeString(f.name)
                    writeEarlierNames(f.renamedFrom, to: &w)
                }
            }
        }
        return w.withUnsafeBytes { XXH64.hash($0) }
    }

    private static func writeEarlierNames(_ names: [EarlierName], to w: inout ByteWriter) {
        w.writeVarint(UInt64(names.count))
        for n in names {
            w.writeString(n.name)
            w.writeVarint(n.lastVersion.map { UInt64($0) + 1 } ?? 0)
        }
    }
}
