import ChronicleCore
import Foundation
import Testing

/// What ``SchemaMigration`` finds between two versions of a schema, and the
/// JSON form of what a later version declares (earlier names, indexes).
@Suite struct SchemaMigrationTests {
    static let v1JSON = """
    {"version": 1, "entities": [
      {"name": "Folder", "attributes": [{"name": "name", "type": "string"}], "unique": [["name"]],
       "relationships": [{"name": "notes", "toMany": true, "destination": "Note", "inverse": "folder"}]},
      {"name": "Note", "attributes": [{"name": "title", "type": "string"}, {"name": "body", "type": "string"},
                                      {"name": "stars", "type": "int64"}],
       "relationships": [{"name": "folder", "destination": "Folder", "inverse": "notes"}]}
    ]}
    """
    static let v2JSON = """
    {"version": 2, "entities": [
      {"name": "Notebook", "renamedFrom": "Folder", "attributes": [{"name": "name", "type": "string"}],
       "relationships": [{"name": "notes", "toMany": true, "destination": "Note", "inverse": "notebook"}]},
      {"name": "Note", "attributes": [{"name": "title", "type": "string"},
                                      {"name": "text", "type": "string", "renamedFrom": ["body", "content"]},
                                      {"name": "stars", "type": "int64", "optional": true},
                                      {"name": "color", "type": "string", "optional": true},
                                      {"name": "rating", "type": "int64", "default": 3}],
       "relationships": [{"name": "notebook", "destination": "Notebook", "inverse": "notes", "renamedFrom": "folder"}],
       "indexes": [["title", "rating"]]},
      {"name": "Tag", "attributes": [{"name": "label", "type": "string"}]}
    ]}
    """

    @Test func findsEveryDeclaredStep() throws {
        let v1 = try Schema(json: Data(Self.v1JSON.utf8)), v2 = try Schema(json: Data(Self.v2JSON.utf8))
        let migration = try SchemaMigration(from: v1, to: v2)
        #expect(migration.steps.map(\.description) == [
            "rename entity Folder to Notebook",
            "remove unique constraint Notebook(name)",
            "rename Note.body to Note.text",
            "make Note.stars optional",
            "add Note.color (earlier records read null)",
            "add Note.rating (earlier records read 3)",
            "rename Note.folder to Note.notebook",
            "add index Note(title, rating)",
            "add entity Tag",
        ])
        #expect(migration.isComplete)
        try migration.requireComplete()
        // The JSON form keeps what the later version declares.
        let again = try Schema(json: try JSONEncoder().encode(v2.jsonValue))
        #expect(again == v2 && again.hash == v2.hash)
    }

    @Test func aRenameClaimsItsEarlierNameBeforeANewFieldOfThatName() throws {
        let v1 = try Schema(version: 1, entities: [Entity("E", attributes: [Attribute("a", .string), Attribute("b", .int64)])])
        // b became c, and a became b: each earlier field goes to one place.
        let v2 = try Schema(version: 2, entities: [Entity("E", attributes: [
            Attribute("b", .string, renamedFrom: ["a"]), Attribute("c", .int64, renamedFrom: ["b"]),
        ])])
        let migration = try SchemaMigration(from: v1, to: v2)
        #expect(migration.steps.map(\.description) == ["rename E.a to E.b", "rename E.b to E.c"])
        #expect(migration.isComplete)
    }

    @Test func whatChangesTheMeaningOfEarlierDataNeedsTheAppsCode() throws {
        let v1 = try Schema(version: 1, entities: [
            Entity("A", attributes: [Attribute("x", .string), Attribute("y", .string, optional: true), Attribute("gone", .bool)]),
            Entity("Old", attributes: [Attribute("v", .int64)]),
        ])
        let v2 = try Schema(version: 2, entities: [
            Entity("A", attributes: [Attribute("x", .int64), Attribute("y", .string), Attribute("z", .string)]),
        ])
        let migration = try SchemaMigration(from: v1, to: v2)
        #expect(migration.missingAppCode.map(\.description) == [
            "change A.x from string attribute to int64 attribute",
            "make A.y required",
            "add required A.z, which has no default: give it one (earlier records need a value)",
            "remove A.gone and its values",
            "remove entity Old and its records",
        ])
        let error = #expect(throws: ChronicleError.self) { try migration.requireComplete() }
        #expect(error?.code == .unsupportedMigration)
        #expect(error?.message.hasPrefix("schema version 1 to 2: cannot change A.x from string attribute to int64 attribute") == true)
        // Conversions cover all but the field that has nothing to be computed from.
        let covered = try SchemaMigration(from: v1, to: v2, conversions: [
            .convert("A", "x", in: 2) { _ in .int(0) },
            .convert("A", "y", in: 2) { $0 == .null ? .string("") : $0 },
            .drop("A", field: "gone", in: 2),
            .drop(entity: "Old", in: 2),
        ])
        #expect(covered.missingAppCode.map(\.description) == ["add required A.z, which has no default: give it one (earlier records need a value)"])
        let noDefault = #expect(throws: ChronicleError.self) { try covered.requireComplete() }
        #expect(noDefault?.message == "schema version 1 to 2: cannot add required A.z, which has no default: give it one (earlier records need a value); see docs/schema-evolution.md")
        // A conversion of another version range does not apply.
        let elsewhere = try SchemaMigration(from: v1, to: v2, conversions: [.drop("A", field: "gone", in: 5)])
        #expect(elsewhere.missingAppCode.contains(.removeField(entity: "A", field: "gone")))
    }

    @Test func aChangedSchemaNeedsAHigherVersion() throws {
        let v1 = try Schema(version: 1, entities: [Entity("A", attributes: [Attribute("x", .string)])])
        let changed = try Schema(version: 1, entities: [Entity("A", attributes: [Attribute("x", .string, optional: true)])])
        let same = #expect(throws: ChronicleError.self) { try SchemaMigration(from: v1, to: changed) }
        #expect(same?.code == .schemaMismatch && same?.message.contains("higher version number") == true)
        let later = try Schema(version: 2, entities: v1.entities)
        let back = #expect(throws: ChronicleError.self) { try SchemaMigration(from: later, to: v1) }
        #expect(back?.message.contains("is not later than version 2") == true)
        #expect(try SchemaMigration(from: v1, to: v1).steps.isEmpty)
    }

    @Test func earlierNamesAndIndexesAreValidated() throws {
        func invalid(_ entities: [Entity]) -> String? {
            (#expect(throws: ChronicleError.self) { try Schema(version: 2, entities: entities) })?.message
        }
        #expect(invalid([Entity("A", attributes: [Attribute("x", .string, renamedFrom: ["x"])])])?.contains("its current name") == true)
        #expect(invalid([Entity("A", attributes: [Attribute("x", .string, renamedFrom: ["w"]), Attribute("y", .string, renamedFrom: ["w"])])])?
            .contains("claimed twice") == true)
        #expect(invalid([Entity("A", attributes: [Attribute("x", .string, renamedFrom: ["1bad"])])])?.contains("must be an ASCII letter") == true)
        #expect(invalid([Entity("A", attributes: [Attribute("x", .string)], indexes: [["nope"]])])?.contains("'nope' is not an attribute") == true)
        #expect(invalid([Entity("A", attributes: [Attribute("x", .string)], indexes: [[]])])?.contains("at least one field") == true)
        #expect(invalid([Entity("A", attributes: [Attribute("x", .string)], renamedFrom: ["B"]),
                         Entity("C", attributes: [Attribute("x", .string)], renamedFrom: ["b"])])?.contains("claimed twice") == true)
    }

    @Test func indexesAndEarlierNamesArePartOfTheHash() throws {
        // (A schema without either hashes as before they existed: the
        // golden logs, which carry their schema's hash, pin that.)
        let v1 = try Schema(json: Data(Self.v1JSON.utf8))
        func variant(_ change: (Entity) -> Entity) throws -> Schema { try Schema(version: 1, entities: v1.entities.map(change)) }
        let withIndex = try variant {
            Entity($0.name, attributes: $0.attributes, relationships: $0.relationships, unique: $0.uniqueConstraints, indexes: [[$0.fields[0].name]])
        }
        let renamed = try variant {
            Entity($0.name, attributes: $0.attributes, relationships: $0.relationships, unique: $0.uniqueConstraints, renamedFrom: [EarlierName("Was\($0.name)")])
        }
        let same = try variant {
            Entity($0.name, attributes: $0.attributes, relationships: $0.relationships, unique: $0.uniqueConstraints)
        }
        #expect(Set([v1.hash, withIndex.hash, renamed.hash]).count == 3)
        #expect(same.hash == v1.hash)
    }

    @Test func aRemovedAndAnAddedFieldOfOneKindSuggestARename() throws {
        let v1 = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("body", .string)])])
        let v2 = try Schema(version: 2, entities: [Entity("Note", attributes: [Attribute("text", .string)])])
        let error = #expect(throws: ChronicleError.self) { try SchemaMigration(from: v1, to: v2).requireComplete() }
        #expect(error?.message.contains("if Note.body was renamed text, say so: \"renamedFrom\": \"body\" on text") == true, "\(error?.message ?? "")")
    }

    /// A schema file copied forward to the next version keeps its renames'
    /// meaning: they were made before, and are not made again (a swap made
    /// twice would exchange the fields' data back on some devices only).
    @Test func renamesCopiedForwardAreNotMadeAgain() throws {
        let v1 = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .string), Attribute("body", .string)])])
        let swapped = [Attribute("title", .string, renamedFrom: ["body"]), Attribute("body", .string, renamedFrom: ["title"])]
        let v2 = try Schema(version: 2, entities: [Entity("Note", attributes: swapped)])
        let v3 = try Schema(version: 3, entities: [Entity("Note", attributes: swapped + [Attribute("extra", .string, optional: true)])])
        #expect(try SchemaMigration(from: v1, to: v2).steps.map(\.description) == ["rename Note.body to Note.title", "rename Note.title to Note.body"])
        #expect(try SchemaMigration(from: v2, to: v3).steps.map(\.description) == ["add Note.extra (earlier records read null)"])
        // A device that skips version 2 still swaps.
        #expect(try SchemaMigration(from: v1, to: v3).steps.map(\.description).prefix(2) == ["rename Note.body to Note.title", "rename Note.title to Note.body"])

        // A renamed field and a new one that took the old name, copied forward.
        let w2 = try Schema(version: 2, entities: [Entity("Note", attributes: [
            Attribute("title", .string), Attribute("text", .string, renamedFrom: ["body"]), Attribute("body", .string, optional: true),
        ])])
        let w3 = try Schema(version: 3, entities: w2.entities)
        let copied = try SchemaMigration(from: w2, to: w3)
        #expect(copied.steps.isEmpty && copied.isComplete, "\(copied.steps)")
    }

    /// An earlier name given with its last version applies to migrations
    /// from that version or before, and says what the field was called then.
    @Test func versionedEarlierNamesSayWhichVersionUsedThem() throws {
        let v1 = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("a", .string)])])
        let v2 = try Schema(version: 2, entities: [Entity("Note", attributes: [Attribute("b", .string, renamedFrom: ["a"])])])
        let v3 = try Schema(version: 3, entities: [Entity("Note", attributes: [
            Attribute("c", .string, renamedFrom: [EarlierName("a", lastVersion: 1), EarlierName("b", lastVersion: 2)]),
        ])])
        #expect(try SchemaMigration(from: v1, to: v3).steps.map(\.description) == ["rename Note.a to Note.c"])
        #expect(try SchemaMigration(from: v2, to: v3).steps.map(\.description) == ["rename Note.b to Note.c"])
        // The JSON form keeps the versions.
        let json = try JSONEncoder().encode(v3.jsonValue)
        #expect(String(decoding: json, as: UTF8.self).contains(#"{"name":"a","version":1}"#) || String(decoding: json, as: UTF8.self).contains(#"{"version":1,"name":"a"}"#))
        #expect(try Schema(json: json) == v3)
        let later = #expect(throws: ChronicleError.self) {
            try Schema(version: 3, entities: [Entity("Note", attributes: [Attribute("c", .string, renamedFrom: [EarlierName("a", lastVersion: 3)])])])
        }
        #expect(later?.message.contains("not earlier than this schema's version 3") == true)
    }
}
