import ChronicleContainer
import ChronicleCore
import Chronicle
import Foundation
import GRDB
import Logging
import Testing

/// The order an app declares its entities and fields in is no part of its
/// schema (two orders give one hash). A device whose app declares the same
/// schema in another order than its snapshot was made with keeps every
/// value in its field, and stays with the other devices.
@Suite struct SchemaOrderTests {
    static func schema(reversed: Bool) throws -> Schema {
        var entities = [
            Entity("Plain", attributes: [Attribute("a", .string), Attribute("b", .int64), Attribute("c", .double)]),
            Entity("Other", attributes: [Attribute("name", .string)]),
        ]
        if reversed {
            entities = entities.reversed().map { e in
                Entity(e.name, attributes: e.attributes.reversed(), relationships: e.relationships, unique: e.uniqueConstraints)
            }
        }
        return try Schema(version: 1, entities: entities)
    }

    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-order-\(UUID().uuidString)")

    func store(_ device: String, reversed: Bool = false) async throws -> Store {
        try await Store.open(Store.Configuration(schema: Self.schema(reversed: reversed), directory: root.appendingPathComponent(device),
                                                 container: try DirectoryContainer(root: root.appendingPathComponent("container"), create: true),
                                                 seed: UInt64(device.utf8.first!), logger: Logger(label: "test"), durability: .normal))
    }

    static func row(_ store: Store) async throws -> [String] {
        try await store.read { db in
            try Row.fetchAll(db, sql: "SELECT a, b, c FROM Plain").map { "\($0[0] as String) \($0[1] as Int64) \($0[2] as Double)" }
        }
    }

    @Test func theSameSchemaInAnotherOrderKeepsEveryValueInItsField() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(try Self.schema(reversed: true).hash == Self.schema(reversed: false).hash)
        var a = try await store("a")
        let b = try await store("b")
        let id = try await a.write { tx in tx.insert("Plain", ["a": .string("a0"), "b": .int(0), "c": .double(0.5)]) }
        _ = try await a.write { tx in tx.insert("Other", ["name": .string("o")]) }
        _ = try await a.sync()
        _ = try await b.sync()
        // b edits `a` first; a edits `c` later.
        _ = try await b.write { tx in tx.update("Plain", id: id, ["a": .string("from b")]) }
        _ = try await a.write { tx in tx.update("Plain", id: id, ["c": .double(9.5)]) }
        _ = try await a.sync()
        _ = try await b.sync()
        // a's app now declares the schema the other way round.
        try await a.close()
        a = try await store("a", reversed: true)
        _ = try await a.sync()
        _ = try await a.write { tx in tx.update("Plain", id: id, ["b": .int(8)]) }
        _ = try await a.sync()
        _ = try await b.sync()
        #expect(try await Self.row(a) == ["from b 8 9.5"])
        #expect(try await Self.row(b) == ["from b 8 9.5"])
        #expect(try await a.read { db in try String.fetchAll(db, sql: "SELECT name FROM Other") } == ["o"])
        #expect(try await a.stateHash() == b.stateHash())
        try await a.close()
        try await b.close()
    }
}
