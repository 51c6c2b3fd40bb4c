import ChronicleCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct SchemaTests {
    static let libraryJSON = """
    {"version": 1, "entities": [
      {"name": "Author",
       "attributes": [{"name": "name", "type": "string"}, {"name": "born", "type": "date", "optional": true}],
       "relationships": [{"name": "books", "toMany": true, "destination": "Book", "inverse": "author"}],
       "unique": [["name"]]},
      {"name": "Book",
       "attributes": [{"name": "title", "type": "string"},
                      {"name": "pages", "type": "int64", "default": 0},
                      {"name": "rating", "type": "double", "optional": true},
                      {"name": "inPrint", "type": "bool", "default": true},
                      {"name": "price", "type": "decimal", "optional": true},
                      {"name": "isbn", "type": "uuid", "optional": true},
                      {"name": "cover", "type": "data", "optional": true},
                      {"name": "extra", "type": "transformable", "optional": true}],
       "relationships": [{"name": "author", "destination": "Author", "inverse": "books", "deleteRule": "cascade"}]}
    ]}
    """

    @Test func jsonAndSwiftDeclarationsAgree() throws {
        let loaded = try Schema(json: Data(Self.libraryJSON.utf8))
        #expect(loaded == Samples.library)
        #expect(loaded.hash == Samples.library.hash)
    }

    @Test func jsonFormRoundTrips() throws {
        let encoded = try JSONEncoder().encode(Samples.library.jsonValue)
        #expect(try Schema(json: encoded) == Samples.library)
    }

    @Test func hashIgnoresDeclarationOrderButNotContent() throws {
        let a = try Schema(version: 1, entities: [
            Entity("A", attributes: [Attribute("x", .int64), Attribute("y", .string)]),
            Entity("B", attributes: [Attribute("z", .bool)]),
        ])
        let b = try Schema(version: 1, entities: [
            Entity("B", attributes: [Attribute("z", .bool)]),
            Entity("A", attributes: [Attribute("y", .string), Attribute("x", .int64)]),
        ])
        let c = try Schema(version: 1, entities: [
            Entity("A", attributes: [Attribute("x", .int64), Attribute("y", .string, optional: true)]),
            Entity("B", attributes: [Attribute("z", .bool)]),
        ])
        #expect(a.hash == b.hash)
        #expect(a.hash != c.hash)
    }

    /// The library schema's hash is part of the golden fixtures: it must never drift.
    @Test func hashIsStable() {
        #expect(Samples.library.hashString == GoldenTests.libraryHash)
    }

    @Test(arguments: [
        (#"{"version": 1, "entities": [{"name": "A", "attributes": [{"name": "x", "type": "integer"}]}]}"#,
         "entities[0].attributes[0].type: unknown type 'integer'"),
        (#"{"version": 1, "entities": [{"name": "A", "attributes": [{"name": "id", "type": "string"}]}]}"#,
         "entities[0] (A).attributes[0] (id): 'id' is reserved"),
        (#"{"version": 1, "entities": [{"name": "A", "attributes": [{"type": "string"}]}]}"#,
         "entities[0].attributes[0].name: is missing"),
        (#"{"version": 1, "entities": [{"name": "A", "relationships": [{"name": "b", "destination": "Nope"}]}]}"#,
         "destination 'Nope' is not an entity"),
        // A misspelt destination on the to-one side is named, even when the
        // to-many side is checked first.
        (#"{"version": 1, "entities": [{"name": "Folder", "relationships": [{"name": "notes", "destination": "Note", "toMany": true, "inverse": "folder"}]}, {"name": "Note", "relationships": [{"name": "folder", "destination": "Folders", "inverse": "notes"}]}]}"#,
         "Note.folder's destination 'Folders' is not an entity"),
        (#"{"version": 1, "entities": [{"name": "A", "attributes": [{"name": "x", "type": "int64", "default": "ten"}]}]}"#,
         "entities[0].attributes[0].default: expected int64"),
        (#"{"version": 1, "entities": [{"name": "A", "unique": [["nope"]]}]}"#,
         "entities[0] (A).unique[0]: 'nope' is not an attribute"),
        (#"{"version": 1, "entities": [{"name": "A; DROP TABLE x", "attributes": []}]}"#,
         "must be an ASCII letter followed by"),
        (#"{"version": 1, "entities": [{"name": "A", "colour": 1}]}"#,
         "entities[0].colour: unknown key"),
        (#"{"version": "1", "entities": []}"#, "version: must be an integer"),
        (#"{"version": 1, "entities": [{"name": "A"}, {"name": "a"}]}"#, "is used twice"),
        // A save refuses such text; a default would write it past that check.
        (#"{"version": 1, "entities": [{"name": "A", "attributes": [{"name": "x", "type": "string", "default": "a\u0000b"}]}]}"#,
         "entities[0] (A).attributes[0] (x): default value holds the character U+0000"),
    ])
    func invalidSchemasNameTheField(json: String, expected: String) {
        #expect {
            try Schema(json: Data(json.utf8))
        } throws: { error in
            guard let e = error as? ChronicleError, e.code == .invalidSchema else { return false }
            return e.message.contains(expected)
        }
    }

    /// Regression: a schema that was valid JSON but broke a naming or
    /// relationship rule was refused without a line and column; a name
    /// SQLite keeps for itself passed and failed later, at the first save;
    /// and a 10,000-character or multi-line name was echoed whole.
    @Test(arguments: [
        ("{\"version\": 1, \"entities\": [\n  {\"name\": \"sqlite_stat1\"}]}",
         "line 2, column 12: entities[0] (sqlite_stat1): entity name 'sqlite_stat1' starts with sqlite_"),
        ("{\"version\": 1, \"entities\": [\n  {\"name\": \"A\",\n   \"attributes\": [{\"name\": \"a\\\"b\\nc\", \"type\": \"string\"}]}]}",
         #"line 3, column 28: entities[0] (A).attributes[0] (a\"b\nc): name 'a\"b\nc' must be an ASCII letter"#),
        ("{\"version\": 1, \"entities\": [{\"name\": \"A\"},\n {\"name\": \"a\"}]}",
         "line 2, column 11: entities[1] (a): entity name 'a' is used twice"),
        ("{\"version\": 1, \"entities\": [{\"name\": \"A\",\n \"relationships\": [{\"name\": \"b\", \"destination\": \"Nope\"}]}]}",
         "line 2, column 49: entities[0] (A).relationships[0] (b): destination 'Nope' is not an entity"),
        ("{\"version\": 1, \"entities\": [{\"name\": \"\(String(repeating: "x", count: 10_000))\"}]}",
         "line 1, column 38: entities[0] (\(String(repeating: "x", count: 40))…): name"),
    ])
    func validationFaultsNameTheLineAndColumn(json: String, expected: String) {
        let error = #expect(throws: ChronicleError.self) { try Schema(json: Data(json.utf8)) }
        #expect(error?.code == .invalidSchema)
        #expect(error?.message.hasPrefix(expected) == true, "\(error?.message.prefix(300) ?? "")")
        #expect((error?.message.count ?? 0) < 400)
    }

    /// Regression: a FIFO no one writes to was waited on forever, and
    /// `/dev/zero` read until memory ran out.
    @Test func aSchemaFileMustBeARegularFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let fifo = folder.appendingPathComponent("fifo.json")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        for url in [fifo, URL(fileURLWithPath: "/dev/zero"), folder] {
            let error = #expect(throws: ChronicleError.self) { try Schema(contentsOf: url) }
            #expect(error?.code == .io && error?.message.contains("is not a regular file") == true, "\(url.path): \(String(describing: error))")
        }
        let missing = #expect(throws: ChronicleError.self) { try Schema(contentsOf: folder.appendingPathComponent("none.json")) }
        #expect(missing?.code == .notFound)
        let file = folder.appendingPathComponent("schema.json")
        try Data(#"{"version": 1, "entities": [{"name": "A"}]}"#.utf8).write(to: file)
        #expect(try Schema(contentsOf: file).entities.map(\.name) == ["A"])
    }

    @Test func malformedJSONNamesTheLine() {
        let json = "{\n  \"version\": 1,\n  \"entities\": [\n    {\"name\": \"A\",, }\n  ]\n}"
        #expect {
            try Schema(json: Data(json.utf8))
        } throws: { error in
            guard let e = error as? ChronicleError, e.code == .schemaSyntax else { return false }
            return e.message.contains("line 4")
        }
    }
}
