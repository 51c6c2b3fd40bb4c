import Foundation
import Testing

/// `chronicle schema diff|migrate`, `--earlier-schema`, and what `sync`
/// says about held logs and a migration, as a user sees them.
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLISchemaTests {
    static let v1 = """
    {"version": 1, "entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string"}, {"name": "body", "type": "string"}]}]}
    """
    static let v2 = """
    {"version": 2, "entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string"},
      {"name": "text", "type": "string", "renamedFrom": "body"}, {"name": "color", "type": "string", "optional": true}],
      "indexes": [["title"]]}]}
    """
    static let dropped = """
    {"version": 2, "entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string"}]}]}
    """

    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-cli-schema-\(UUID().uuidString)")

    func file(_ name: String, _ text: String) throws -> String {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let url = root.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }

    func device(_ name: String, _ schema: String, earlier: [String] = []) -> [String] {
        ["--device-dir", root.appendingPathComponent(name).path, "--container", root.appendingPathComponent("shared").path, "--schema", schema]
            + earlier.flatMap { ["--earlier-schema", $0] }
    }

    func json(_ run: CLIErrorTests.Run) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: run.stdout) as? [String: Any], "\(String(decoding: run.stdout, as: UTF8.self)) \(run.stderr)")
    }

    @Test func diffListsTheStepsAndExitsFourForWhatNeedsCode() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let v1 = try file("v1.json", Self.v1), v2 = try file("v2.json", Self.v2), dropped = try file("dropped.json", Self.dropped)
        let ok = try CLIErrorTests.run(["schema", "diff", v1, v2])
        #expect(ok.status == 0)
        #expect(String(decoding: ok.stdout, as: UTF8.self) == """
            schema version 1 (\(try hash(Self.v1))) to 2 (\(try hash(Self.v2)))
              rename Note.body to Note.text
              add Note.color (earlier records read null)
              add index Note(title)
            migrates by declaration

            """)
        let code = try CLIErrorTests.run(["schema", "diff", v1, dropped, "--json"])
        #expect(code.status == 4)
        let steps = try #require(try json(code)["steps"] as? [[String: Any]])
        #expect(steps.map { $0["step"] as? String } == ["remove Note.body and its values"])
        #expect(steps.map { $0["needsAppCode"] as? Bool } == [true])
        // Plain renames across three versions: the path goes through the middle one.
        let v3 = try file("v3.json", """
            {"version": 3, "entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string"},
              {"name": "content", "type": "string", "renamedFrom": "text"}, {"name": "color", "type": "string", "optional": true}],
              "indexes": [["title"]]}]}
            """)
        let skipped = try CLIErrorTests.run(["schema", "diff", v1, v3])
        #expect(skipped.status == 4 && String(decoding: skipped.stdout, as: UTF8.self).contains("version 2 lies between"))
        let through = try CLIErrorTests.run(["schema", "diff", v1, v3, "--through", v2])
        #expect(through.status == 0 && String(decoding: through.stdout, as: UTF8.self).contains("rename Note.text to Note.content"),
                "\(String(decoding: through.stdout, as: UTF8.self))")
        let backwards = try CLIErrorTests.run(["schema", "diff", v2, v1])
        #expect(backwards.status == 1 && backwards.stderr.contains("schema version 1 is not later than version 2"), "\(backwards.stderr)")
    }

    @Test func devicesOnTwoVersionsShareAContainer() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let v1 = try file("v1.json", Self.v1), v2 = try file("v2.json", Self.v2), dropped = try file("dropped.json", Self.dropped)
        #expect(try CLIErrorTests.run(["init", "--container", root.appendingPathComponent("shared").path]).status == 0)
        #expect(try CLIErrorTests.run(["save"] + device("old", v1), input: #"{"op":"insert","entity":"Note","values":{"title":"a","body":"from v1"}}"#).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("old", v1)).status == 0)
        // A new device on v2 that knows v1 applies the v1 log.
        let fresh = try CLIErrorTests.run(["sync", "--json"] + device("new", v2, earlier: [v1]))
        #expect(fresh.status == 0, "\(fresh.stderr)")
        #expect(try json(fresh)["importedLogs"] as? Int == 1)
        // Its log waits on the v1 device: held, not a failure.
        #expect(try CLIErrorTests.run(["save"] + device("new", v2, earlier: [v1]),
                                      input: #"{"op":"insert","entity":"Note","values":{"title":"b","text":"from v2","color":"red"}}"#).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("new", v2, earlier: [v1])).status == 0)
        let held = try CLIErrorTests.run(["sync", "--json"] + device("old", v1))
        #expect(held.status == 3)
        let report = try json(held)
        #expect((report["held"] as? [[String: Any]])?.count == 1)
        #expect((report["failures"] as? [Any])?.isEmpty == true)
        // Verifying against v2 reads the v1 log through the migration (the store records v1).
        let verify = try CLIErrorTests.run(["verify", "--container", root.appendingPathComponent("shared").path, "--schema", v2])
        #expect(verify.status == 0, "\(String(decoding: verify.stdout, as: UTF8.self))")
        // A record the container lost is written again by a device that knows the version.
        let records = root.appendingPathComponent("shared/markers").path
        let enumerator = FileManager.default.enumerator(atPath: records)
        let schemaFolders = (enumerator?.allObjects as? [String] ?? []).filter { $0.hasSuffix("/schemas") }
        #expect(!schemaFolders.isEmpty)
        for folder in schemaFolders { try FileManager.default.removeItem(atPath: records + "/" + folder) }
        #expect(try CLIErrorTests.run(["sync"] + device("new", v2, earlier: [v1])).status == 0)
        let rewritten = (FileManager.default.enumerator(atPath: records)?.allObjects as? [String] ?? []).filter { $0.contains("/schemas/") && !$0.hasSuffix(".lock") }
        #expect(rewritten.count == 2, "\(rewritten)")
        // Verifying against v1 passes over the v2 log: not damaged, another version.
        let older = try CLIErrorTests.run(["verify", "--container", root.appendingPathComponent("shared").path, "--schema", v1])
        #expect(older.status == 0 && String(decoding: older.stdout, as: UTF8.self).contains("not checked, another schema version"))
        // An earlier schema that is not earlier is named as the problem.
        let wrong = try CLIErrorTests.run(["sync"] + device("old", v1, earlier: [v2]))
        #expect(wrong.status == 1 && wrong.stderr.contains("--earlier-schema"), "\(wrong.stderr)")
        // A change that needs the app's code is refused, and the device still opens as it was.
        let refused = try CLIErrorTests.run(["sync"] + device("old", dropped))
        #expect(refused.status == 1 && refused.stderr.contains("unsupportedMigration") && refused.stderr.contains("remove Note.body"), "\(refused.stderr)")
        // The v1 device upgrades: it says what it migrated, and applies the held log.
        let migrate = try CLIErrorTests.run(["schema", "migrate"] + device("old", v2))
        #expect(migrate.status == 0, "\(migrate.stderr)")
        #expect(String(decoding: migrate.stdout, as: UTF8.self).contains("from schema version 1 to 2:\n  rename Note.body to Note.text"))
        let after = try CLIErrorTests.run(["sync"] + device("old", v2))
        #expect(after.status == 0, "\(after.stderr)")
        let rows = try CLIErrorTests.run(["query", "--device-dir", root.appendingPathComponent("old").path,
                                          "SELECT title || ':' || text || ':' || coalesce(color, '-') FROM Note ORDER BY title"])
        #expect(String(decoding: rows.stdout, as: UTF8.self).contains("a:from v1:-") && String(decoding: rows.stdout, as: UTF8.self).contains("b:from v2:red"))
        let hashes = try ["old", "new"].map { name in
            String(decoding: try CLIErrorTests.run(["state-hash", "--device-dir", root.appendingPathComponent(name).path]).stdout, as: UTF8.self)
        }
        #expect(hashes[0] == hashes[1] && !hashes[0].isEmpty)
    }

    /// Two apps whose schemas differ under one version number: devices could
    /// not tell them apart, and would hold each other's logs for good. The
    /// store keeps the first; the newcomer's saves stay pending with an error
    /// that says what to do, and `schema diff` says what differs.
    @Test func aSecondSchemaUnderTheSameVersionIsRefused() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let v1 = try file("v1.json", Self.v1)
        let other = try file("other.json", """
            {"version": 1, "entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string"}, {"name": "body", "type": "string"},
              {"name": "color", "type": "string", "optional": true}]}]}
            """)
        #expect(try CLIErrorTests.run(["init", "--container", root.appendingPathComponent("shared").path]).status == 0)
        #expect(try CLIErrorTests.run(["save"] + device("first", v1), input: #"{"op":"insert","entity":"Note","values":{"title":"a","body":"b"}}"#).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("first", v1)).status == 0)
        #expect(try CLIErrorTests.run(["save"] + device("second", other), input: #"{"op":"insert","entity":"Note","values":{"title":"c","body":"d"}}"#).status == 0)
        let refused = try CLIErrorTests.run(["sync", "--json"] + device("second", other))
        #expect(refused.status == 1, "\(refused.stderr)")
        let error = try #require(try json(refused)["error"] as? [String: Any])
        #expect(error["code"] as? String == "schemaMismatch")
        #expect((error["message"] as? String)?.contains("higher version number") == true, "\(error)")
        // Nothing of it reached the container: the first device has nothing held.
        let first = try CLIErrorTests.run(["sync", "--json"] + device("first", v1))
        #expect(first.status == 0, "\(first.stderr)")
        #expect((try json(first)["held"] as? [Any])?.isEmpty ?? true)
        // The saves were kept: with a version of its own, they upload.
        let bumped = try file("bumped.json", try String(contentsOfFile: other, encoding: .utf8).replacingOccurrences(of: #""version": 1"#, with: #""version": 2"#))
        let diff = try CLIErrorTests.run(["schema", "diff", v1, other])
        #expect(diff.status == 1 && diff.stderr.contains("both version 1") && diff.stderr.contains("add Note.color"), "\(diff.stderr)")
        let after = try CLIErrorTests.run(["sync", "--json"] + device("second", bumped, earlier: [other]))
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try json(after)["uploadedLogs"] as? Int == 1)
    }

    /// The hash `chronicle` prints for a schema text.
    func hash(_ text: String) throws -> String {
        let url = try file("hash-\(UUID().uuidString).json", text)
        let run = try CLIErrorTests.run(["schema", "diff", url, url, "--json"])
        return try #require((try json(run)["to"] as? [String: Any])?["hash"] as? String)
    }
}
