import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import ChronicleTestSupport
import Foundation
import GRDB
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `chronicle` command keeps the word of its `--help` and docs/cli.md:
/// exit status, one JSON value per `--json` run, typed query output, refused
/// input that means nothing, progress on standard error.
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLIContractTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-contract-\(UUID().uuidString)")
    var container: String { root.appendingPathComponent("container").path }

    /// A schema with every attribute type and a to-one relationship.
    static let schema = #"""
        {"version": 1, "entities": [
          {"name": "Folder", "attributes": [{"name": "name", "type": "string"}],
           "relationships": [{"name": "items", "toMany": true, "destination": "Item", "inverse": "folder"}]},
          {"name": "Item", "attributes": [
             {"name": "title", "type": "string"}, {"name": "count", "type": "int64", "optional": true},
             {"name": "score", "type": "double", "optional": true}, {"name": "low", "type": "double", "optional": true},
             {"name": "odd", "type": "double", "optional": true}, {"name": "done", "type": "bool", "optional": true},
             {"name": "due", "type": "date", "optional": true}, {"name": "raw", "type": "data", "optional": true},
             {"name": "price", "type": "decimal", "optional": true}, {"name": "tag", "type": "uuid", "optional": true},
             {"name": "extra", "type": "transformable", "optional": true}],
           "relationships": [{"name": "folder", "destination": "Folder", "inverse": "items"}]}
        ]}
        """#

    init() throws {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data(Self.schema.utf8).write(to: root.appendingPathComponent("schema.json"))
        #expect(try CLIErrorTests.run(["init", "--container", container]).status == 0)
    }

    func device(_ name: String, schema: String = "schema.json") -> [String] {
        ["--device-dir", root.appendingPathComponent(name).path, "--container", container, "--schema", root.appendingPathComponent(schema).path]
    }

    func save(_ name: String, _ lines: String, json: Bool = true) throws -> CLIErrorTests.Run {
        try CLIErrorTests.run(["save"] + device(name) + (json ? ["--json"] : []), input: lines)
    }

    func query(_ name: String, _ sql: String, json: Bool = true) throws -> CLIErrorTests.Run {
        try CLIErrorTests.run(["query", "--device-dir", root.appendingPathComponent(name).path] + (json ? ["--json"] : []) + [sql])
    }

    static func object(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(String(decoding: data, as: UTF8.self))")
    }

    static func rows(_ data: Data) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]], "\(String(decoding: data, as: UTF8.self))")
    }

    // MARK: Exit status

    /// Regression: usage errors exited 64 (ArgumentParser's EX_USAGE) while
    /// `--help` promised 2, and printed text under `--json`.
    @Test(arguments: [
        ["frobnicate"], ["save", "--bogus"], ["query"], ["simulate", "--devices", "0"], ["simulate", "--seed", "zz"],
        ["bench", "codec", "--only", "nope", "--seconds", "0.01"], ["bench", "scenarios", "--only", "nope"],
        // Regression: these ran (`help bogus` printed the top-level help and
        // exited 0) or trapped on the value (NaN, a negative count).
        ["help", "bogus"], ["help", "bench", "nope"], ["simulate", "--seeds=-1"], ["bench", "scenarios", "--scale", "abc"],
        ["bench", "scenarios", "--scale", "nan"], ["bench", "scenarios", "--scale=-1"], ["bench", "codec", "--changes=-5"],
        ["bench", "codec", "--seconds=-1"], ["bench", "codec", "--rounds", "0"], ["bench", "fetch", "--records=-1"],
        ["bench", "fetch", "--rounds", "0"], ["demo", "--saves=-1"], ["demo", "--seed", "18446744073709551615"], ["simulate", "--processes", "0"], ["simulate", "--processes", "33"],
        // Regression: an empty path was the current folder (`init` made it a container).
        ["init", "--container", ""], ["inspect", "--container="], ["query", "--device-dir", "", "SELECT 1"],
        ["save", "--device-dir", "", "--container", "c", "--schema", "s"], ["dump", "--file", ""],
        ["baseline", "--part-kib", "99999999999999999", "--device-dir", "d", "--container", "c", "--schema", "s"],
    ])
    func usageErrorsExitTwo(arguments: [String]) throws {
        let text = try CLIErrorTests.run(arguments)
        #expect(text.status == 2, "\(arguments): \(text.stderr)")
        #expect(text.stderr.contains("Error") || text.stderr.contains("Usage"), "\(text.stderr)")
        let json = try CLIErrorTests.run(arguments + ["--json"])
        #expect(json.status == 2)
        let error = try #require(try Self.object(json.stdout)["error"] as? [String: Any])
        #expect(error["code"] as? String == "usage")
        #expect((error["message"] as? String)?.isEmpty == false)
    }

    @Test func helpDocumentsTheExitStatusItKeeps() throws {
        let help = try CLIErrorTests.run(["--help"])
        #expect(help.status == 0)
        let text = String(decoding: help.stdout, as: UTF8.self).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains("2 on bad usage") && text.contains("1 when the command found a problem"), "\(text)")
        let sync = String(decoding: try CLIErrorTests.run(["sync", "--help"]).stdout, as: UTF8.self)
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(sync.contains("3 when something is not visible yet") && sync.contains("2 on bad usage"), "\(sync)")
    }

    // MARK: One JSON value of one shape

    /// Regression: with `--processes` the JSON had other field names and no
    /// state hash than the in-process run's.
    @Test func simulateJSONHasOneShapeForOneSeedManySeedsAndProcesses() throws {
        let runs = [
            ["simulate", "--seed", "3", "--devices", "2", "--saves", "3", "--json"],
            ["simulate", "--seed", "3", "--seeds", "2", "--devices", "2", "--saves", "3", "--json"],
            ["simulate", "--processes", "2", "--seeds", "2", "--saves", "2", "--json"],
        ]
        var shapes: [Set<String>] = []
        var resultShapes: [Set<String>] = []
        for arguments in runs {
            let run = try CLIErrorTests.run(arguments)
            #expect(run.status == 0, "\(arguments): \(run.stderr)")
            let report = try Self.object(run.stdout)
            shapes.append(Set(report.keys))
            let results = try #require(report["results"] as? [[String: Any]])
            #expect(results.count == (arguments.contains("--seeds") ? 2 : 1))
            #expect(report["seeds"] as? Int == results.count && report["passed"] as? Int == results.count && report["failed"] as? Int == 0)
            for result in results {
                resultShapes.append(Set(result.keys))
                #expect((result["stateHash"] as? String)?.count == 16, "\(result)")
                #expect((result["savesAcknowledged"] as? Int ?? 0) > 0)
            }
            #expect(report["mode"] as? String == (arguments.contains("--processes") ? "processes" : "simulated"))
        }
        #expect(Set(shapes).count == 1, "\(shapes)")
        #expect(Set(resultShapes).count == 1, "\(resultShapes)")
        #expect(resultShapes.first == ["seed", "passed", "stateHash", "savesAcknowledged", "violations", "reproduce", "details"])
    }

    /// Regression: `demo` had no `--json`, although every command but `dump` was said to.
    @Test func demoPrintsOneJSONObject() throws {
        let run = try CLIErrorTests.run(["demo", "--saves", "2", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let report = try Self.object(run.stdout)
        #expect(report["converged"] as? Bool == true)
        let devices = try #require(report["devices"] as? [[String: Any]])
        #expect(devices.count == 5)
        #expect(Set(devices.compactMap { $0["stateHash"] as? String }).count == 1)
        #expect((report["steps"] as? [String])?.isEmpty == false)
    }

    /// Regression: `bench codec --only` printed text under `--json`.
    @Test func benchCodecOnlyPrintsJSON() throws {
        let run = try CLIErrorTests.run(["bench", "codec", "--only", "encode", "--seconds", "0.05", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let report = try Self.object(run.stdout)
        #expect(report["path"] as? String == "encode" && (report["MBps"] as? Double ?? 0) > 0)
    }

    // MARK: Query output

    /// Regression: `query --json` printed null for the whole output when a
    /// double was infinite, and showed every 16-byte blob as a UUID.
    @Test func queryJSONPrintsEachColumnByItsTypeInTheFormsSaveReads() throws {
        let folder = "018b0000-0000-7000-8000-00000000f01d"
        let raw = Data((0..<16).map { UInt8($0 * 7) }).base64EncodedString()
        let lines = """
            {"op": "insert", "entity": "Folder", "id": "\(folder)", "values": {"name": "inbox"}}
            {"op": "insert", "entity": "Item", "values": {"title": "all", "count": 5, "score": "inf", "low": "-inf", "odd": "nan", "done": true, "due": "2026-01-31T12:00:00.123456Z", "raw": "\(raw)", "price": "9.99", "tag": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "extra": {"type": "Color", "mime": "application/json", "base64": "e30="}, "folder": "\(folder)"}}
            """
        #expect(try save("a", lines).status == 0)
        let columns = "title, count, score, low, odd, done, due, raw, price, tag, extra, folder"
        let first = try query("a", "SELECT id, \(columns) FROM Item")
        #expect(first.status == 0, "\(first.stderr)")
        let row = try #require(try Self.rows(first.stdout).first)
        #expect(row["raw"] as? String == raw)
        #expect(row["score"] as? String == "inf" && row["low"] as? String == "-inf" && row["odd"] as? String == "nan")
        #expect(row["due"] as? String == "2026-01-31T12:00:00.123456Z")
        #expect(row["tag"] as? String == "6f9619ff-8b86-d011-b42d-00c04fc964ff")
        #expect(row["folder"] as? String == folder)
        #expect(row["price"] as? String == "9.99")
        #expect(String(decoding: first.stdout, as: UTF8.self).contains("\"done\" : true"))
        #expect((row["extra"] as? [String: Any])?["type"] as? String == "Color")
        #expect(RecordID(string: row["id"] as? String ?? "") != nil)
        // Saved back as it is, the row reads back the same.
        var values = row
        values["id"] = nil
        values["title"] = "copy"
        let line = String(decoding: try JSONSerialization.data(withJSONObject: ["op": "insert", "entity": "Item", "values": values]), as: UTF8.self)
        let copied = try save("a", line)
        #expect(copied.status == 0, "\(copied.stderr)")
        let copy = try #require(try Self.rows(try query("a", "SELECT \(columns) FROM Item WHERE title = 'copy'").stdout).first)
        values["title"] = "all"
        var copyValues = copy
        copyValues["title"] = "all"
        func canonical(_ object: [String: Any]) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        }
        #expect(try canonical(copyValues) == canonical(values), "\(copy) vs \(row)")
        // Expressions print by their SQLite type.
        let expression = try #require(try Self.rows(try query("a", "SELECT CAST(round(due * 1000000) AS INTEGER) AS micros, hex(raw) AS h FROM Item LIMIT 1").stdout).first)
        #expect(expression["micros"] as? Int == 1_769_860_800_123_456)
        #expect(expression["h"] as? String == Data(base64Encoded: raw)!.map { String(format: "%02X", $0) }.joined())
    }

    /// A record is found by the UUID string `save` printed for it, in any
    /// case, through `uuid()`; text that is no UUID matches nothing.
    @Test func queryFindsARecordByTheIDSavePrinted() throws {
        let saved = try save("a", #"{"op": "insert", "entity": "Folder", "values": {"name": "x"}}"# + "\n" + #"{"op": "insert", "entity": "Folder", "values": {"name": "y"}}"#)
        let id = try #require((try Self.object(saved.stdout)["inserted"] as? [String])?.last)
        for spelling in [id, id.uppercased()] {
            let rows = try Self.rows(try query("a", "SELECT name FROM Folder WHERE id = uuid('\(spelling)')").stdout)
            #expect(rows.compactMap { $0["name"] as? String } == ["y"], "\(spelling)")
        }
        let none = try query("a", "SELECT name FROM Folder WHERE id = uuid('not a uuid')")
        let found = try Self.rows(none.stdout)
        #expect(none.status == 0 && found.isEmpty, "\(none.stderr)")
    }

    /// Regression: two columns of one name trapped (a dictionary with a duplicate key).
    @Test func queryJSONRefusesColumnsOfOneName() throws {
        #expect(try save("a", #"{"op": "insert", "entity": "Folder", "values": {"name": "x"}}"#).status == 0)
        let run = try query("a", "SELECT name, name FROM Folder")
        #expect(!run.signaled && run.status == 2, "\(run.stderr)")
        #expect(String(decoding: run.stdout, as: UTF8.self).contains("rename one with AS"))
    }

    /// Regression: several statements and writes were refused with
    /// SQLite's words ("Multiple statements found", "cannot modify Folder
    /// because it is a view", "attempt to write a readonly database"), as a
    /// failure (exit 1) rather than bad usage, and ATTACH ran.
    @Test(arguments: [
        ("SELECT 1; DELETE FROM Folder", "several SQL statements"),
        ("SELECT name FROM Folder; SELECT 2", "several SQL statements"),
        ("DELETE FROM Folder", "the query is DELETE: query runs one statement that only reads"),
        ("delete from _chronicle_rows_Folder", "the query is DELETE"),
        ("  /* hm */ UPDATE _chronicle_rows_Folder SET name = 'y'", "the query is UPDATE"),
        ("PRAGMA user_version = 99", "the query writes"),
        ("VACUUM INTO '/tmp/chronicle-vacuum-copy.sqlite'", "the query is VACUUM"),
        ("ATTACH '/tmp/chronicle-attached.sqlite' AS a", "the query is ATTACH"),
        ("BEGIN", "the query is BEGIN"),
        (" ; ", "no SQL statement"),
    ])
    func queryRunsExactlyOneReadOnlyStatement(_ sql: String, _ message: String) throws {
        #expect(try save("a", #"{"op": "insert", "entity": "Folder", "values": {"name": "x"}}"#).status == 0)
        let text = try query("a", sql, json: false)
        #expect(text.status == 2 && text.stderr.contains(message), "\(sql): \(text.stderr)")
        // The usage of the command that ran, not of `chronicle` itself.
        #expect(text.stderr.contains("Usage: chronicle query --device-dir"), "\(text.stderr)")
        let json = try query("a", sql)
        let error = try #require(try Self.object(json.stdout)["error"] as? [String: Any], "\(sql)")
        #expect(json.status == 2 && error["code"] as? String == "usage" && (error["message"] as? String)?.contains(message) == true, "\(error)")
        let names = try Self.rows(try query("a", "SELECT name FROM Folder").stdout).compactMap { $0["name"] as? String }
        #expect(names == ["x"])
        #expect(try Self.rows(try query("a", "PRAGMA user_version").stdout).first?["user_version"] as? Int != 99)
    }

    /// Regression: a query without end (a recursive WITH) read rows until
    /// memory ran out, and one huge value was built before anything said no.
    @Test func aQueryResultHasALimit() throws {
        #expect(try save("a", #"{"op": "insert", "entity": "Folder", "values": {"name": "x"}}"#).status == 0)
        let endless = try query("a", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT randomblob(1000000) FROM c")
        #expect(!endless.signaled && endless.status == 1, "\(endless.stderr)")
        let error = try #require(try Self.object(endless.stdout)["error"] as? [String: Any])
        #expect(error["code"] as? String == "sizeOverCap" && (error["message"] as? String)?.contains("larger than 256 MiB") == true, "\(error)")
        let huge = try query("a", "SELECT length(zeroblob(1000000000))", json: false)
        #expect(huge.status == 1 && huge.stderr.contains("string or blob too big"), "\(huge.stderr)")
    }

    /// Regression: plain `query` printed values as they were, so a tab or a
    /// line break in a value broke the rows apart.
    @Test func plainQueryEscapesSeparators() throws {
        let titles = ["tab\there", "line\nbreak", "back\\slash", "cr\rhere", "pipe|here"]
        let lines = titles.map { title in
            String(decoding: try! JSONSerialization.data(withJSONObject: ["op": "insert", "entity": "Item", "values": ["title": title]]), as: UTF8.self)
        }.joined(separator: "\n")
        #expect(try save("a", lines).status == 0)
        let run = try query("a", "SELECT title, count, 'a\tb' AS \"odd\tname\" FROM Item ORDER BY title", json: false)
        #expect(run.status == 0, "\(run.stderr)")
        let output = String(decoding: run.stdout, as: UTF8.self)
        #expect(!output.contains("\r"))
        let printed = output.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(printed.count == titles.count + 1, "\(output)")
        #expect(printed.first == "title\tcount\todd\\tname")
        func unescape(_ s: Substring) -> String {
            var out = ""
            var escaped = false
            for c in s {
                if escaped {
                    out.append(["t": "\t", "n": "\n", "r": "\r", "\\": "\\"][c] ?? c)
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else {
                    out.append(c)
                }
            }
            return out
        }
        var read: [String] = []
        for line in printed.dropFirst() {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            try #require(fields.count == 3, "\(line)")
            #expect(fields[1] == "\\N" && fields[2] == "a\\tb")
            read.append(unescape(fields[0]))
        }
        #expect(read == titles.sorted())
    }

    // MARK: Input

    /// Regression: schema syntax errors had a line and column only when
    /// Foundation's message gave an offset, and schema errors never did.
    @Test(arguments: [
        ("truncated", "{\n  \"version\": 1,\n  \"entities\": [", "line 3, column 16"),
        ("bad token", "{\n  \"version\": 1,\n  \"entities\": [}\n}", "line 3, column 16"),
        ("trailing comma in an object", "{\n  \"version\": 1,\n  \"entities\": [],\n}", "line 4, column 1"),
        ("trailing comma in an array", "{\"version\": 1, \"entities\": [\n  {\"name\": \"A\"},\n]}", "line 3, column 1"),
        ("bad literal", "{\"version\": 1, \"entities\": [\n  {\"name\": \"A\", \"attributes\": [{\"name\": \"x\", \"type\": \"string\", \"optional\": tru}]}]}", "line 2, column 76"),
        ("unterminated string", "{\"version\": 1, \"entities\": [\n  {\"name\": \"A]}", "line 2, column 16"),
        ("duplicate key", "{\"version\": 1, \"entities\": [\n  {\"name\": \"A\", \"name\": \"B\"}]}", "line 2, column 17"),
        ("wrong type", "{\n  \"version\": \"1\",\n  \"entities\": []}", "line 2, column 14"),
        ("unknown attribute type", "{\"version\": 1, \"entities\": [\n  {\"name\": \"A\",\n   \"attributes\": [{\"name\": \"x\", \"type\": \"integer\"}]}]}", "line 3, column 41"),
        ("missing name", "{\"version\": 1, \"entities\": [\n  {\"attributes\": []}]}", "line 2, column 3"),
        ("bad default", "{\"version\": 1, \"entities\": [\n  {\"name\": \"A\", \"attributes\": [{\"name\": \"x\", \"type\": \"int64\", \"default\": \"ten\"}]}]}", "line 2, column 74"),
        ("empty", "", "line 1, column 1"),
    ])
    func schemaErrorsGiveTheLineAndColumn(_ name: String, _ text: String, _ position: String) throws {
        try Data(text.utf8).write(to: root.appendingPathComponent("bad.json"))
        let run = try CLIErrorTests.run(["save"] + device("a", schema: "bad.json"), input: #"{"op": "insert", "entity": "A"}"#)
        #expect(run.status == 1, "\(name)")
        #expect(run.stderr.contains("bad.json: \(position): "), "\(name): \(run.stderr)")
        #expect(run.stderr.contains("schemaSyntax") || run.stderr.contains("invalidSchema"), "\(name): \(run.stderr)")
    }

    /// Regression: dates with an offset from UTC were refused.
    @Test func isoDatesWithAnOffsetAreConvertedExactly() throws {
        let dates = [
            ("2026-01-31T14:00:00.123456+02:00", "2026-01-31T12:00:00.123456Z", 1_769_860_800_123_456),
            ("2026-01-31T06:30:00.5-0530", "2026-01-31T12:00:00.500000Z", 1_769_860_800_500_000),
            ("2026-01-31t12:00:00.000001z", "2026-01-31T12:00:00.000001Z", 1_769_860_800_000_001),
            ("2026-01-31T12:00:00.123456000+00:00", "2026-01-31T12:00:00.123456Z", 1_769_860_800_123_456),
            ("2026-01-01T00:30:00+01", "2025-12-31T23:30:00.000000Z", 1_767_223_800_000_000),
            ("2024-02-29T23:59:59.999999-00:30", "2024-03-01T00:29:59.999999Z", 1_709_252_999_999_999),
        ]
        let lines = dates.enumerated().map { i, d in
            #"{"op": "insert", "entity": "Item", "values": {"title": "d\#(i)", "due": "\#(d.0)"}}"#
        }.joined(separator: "\n")
        let saved = try save("a", lines)
        #expect(saved.status == 0, "\(saved.stderr)")
        let rows = try Self.rows(try query("a", "SELECT title, due, CAST(round(due * 1000000) AS INTEGER) AS micros FROM Item ORDER BY title").stdout)
        #expect(rows.map { $0["due"] as? String } == dates.map { $0.1 })
        #expect(rows.map { $0["micros"] as? Int } == dates.map { $0.2 })
        for refused in ["2026-01-31T12:00:00.1234567Z", "2026-01-31T12:00:00", "2026-01-31T12:00:00+24:00", "2026-02-29T12:00:00Z"] {
            let run = try save("a", #"{"op": "insert", "entity": "Item", "values": {"title": "x", "due": "\#(refused)"}}"#, json: false)
            #expect(run.status == 1 && run.stderr.contains("typeMismatch"), "\(refused): \(run.stderr)")
        }
    }

    /// Regression: a delete with values was saved and its values ignored, a
    /// repeated key kept one of its values, an unknown key was ignored, and
    /// any schema version was taken.
    @Test func inputThatMeansNothingIsRefused() throws {
        let saved = try Self.object(try save("a", #"{"op": "insert", "entity": "Folder", "values": {"name": "keep"}}"#).stdout)
        let id = try #require((saved["inserted"] as? [String])?.first)
        let refused = [
            (#"{"op": "delete", "entity": "Folder", "id": "\#(id)", "values": {"name": "other"}}"#, "a delete takes no \"values\""),
            (#"{"op": "insert", "entity": "Folder", "values": {"name": "a", "name": "b"}}"#, "line 1, column 62: duplicate key \"name\""),
            (#"{"op": "insert", "op": "delete", "entity": "Folder", "id": "\#(id)"}"#, "duplicate key \"op\""),
            (#"{"op": "insert", "entity": "Folder", "valeus": {"name": "x"}}"#, "unknown key \"valeus\""),
            (#"{"op": "update", "entity": "Folder", "id": "\#(id)"}"#, "an update needs \"values\""),
            (#"{"op": "update", "entity": "Folder", "id": "\#(id)", "values": {}}"#, "an update needs \"values\""),
            (#"{"op": "insert", "entity": "Folder", "id": 7, "values": {"name": "x"}}"#, "\"id\" must be a UUID string"),
        ]
        for (line, message) in refused {
            // After a good line: the transaction is refused whole.
            let input = #"{"op": "insert", "entity": "Folder", "values": {"name": "first"}}"# + "\n" + line
            let run = try save("a", input, json: false)
            #expect(run.status == 1 && run.stderr.contains("malformedBody: line 2"), "\(line): \(run.stderr)")
            #expect(run.stderr.contains(message.replacingOccurrences(of: "line 1", with: "line 2")), "\(line): \(run.stderr)")
        }
        let names = try Self.rows(try query("a", "SELECT name FROM Folder").stdout).compactMap { $0["name"] as? String }
        #expect(names == ["keep"])
        for version in ["0", "-3", "2147483648"] {
            try Data(#"{"version": \#(version), "entities": [{"name": "A"}]}"#.utf8).write(to: root.appendingPathComponent("v.json"))
            let run = try CLIErrorTests.run(["save"] + device("b", schema: "v.json"), input: #"{"op": "insert", "entity": "A"}"#)
            #expect(run.status == 1 && run.stderr.contains("invalidSchema: v.json: line 1, column 13: version: \(version) is not a version"),
                    "\(version): \(run.stderr)")
        }
    }

    // MARK: Save

    /// `save` prints the sequence its own commit got, also when other saves
    /// run at the same time on the same device and on another one.
    @Test func saveUnderConcurrencyPrintsTheSequenceItCommitted() throws {
        let jobs = (0..<6).map { i in (device: i % 2 == 0 ? "a" : "b", title: "concurrent \(i)") }
        final class Outcomes: Sendable {
            let runs = Mutex<[Int: CLIErrorTests.Run]>([:])
        }
        let outcomes = Outcomes()
        let group = DispatchGroup()
        for (i, job) in jobs.enumerated() {
            group.enter()
            let arguments = ["save"] + device(job.device) + ["--json"]
            Thread {
                let run = try? CLIErrorTests.run(arguments, input: #"{"op": "insert", "entity": "Folder", "values": {"name": "\#(job.title)"}}"#)
                outcomes.runs.withLock { $0[i] = run }
                group.leave()
            }.start()
        }
        group.wait()
        var printed: [String: [Int: String]] = [:]
        for (i, job) in jobs.enumerated() {
            let run = try #require(outcomes.runs.withLock { $0[i] })
            #expect(run.status == 0, "\(run.stderr)")
            let report = try Self.object(run.stdout)
            let sequence = try #require(report["sequence"] as? Int)
            #expect(printed[job.device]?[sequence] == nil, "sequence \(sequence) printed twice on \(job.device)")
            printed[job.device, default: [:]][sequence] = try #require((report["inserted"] as? [String])?.first)
        }
        // What each log holds, by sequence: the record each save inserted.
        for name in ["a", "b"] {
            #expect(try CLIErrorTests.run(["sync"] + device(name)).status == 0)
            let deviceID = try #require(try Self.object(Data(contentsOf: root.appendingPathComponent(name).appendingPathComponent("device.json")))["device"] as? String)
            var logged: [Int: String] = [:]
            let logs = try #require(FileManager.default.enumerator(atPath: container))
            for case let path as String in logs where path.contains("/logs/\(deviceID)/") && path.hasSuffix(".chlog") {
                let dump = try Self.object(try CLIErrorTests.run(["dump", "--file", container + "/" + path]).stdout)
                for t in dump["transactions"] as? [[String: Any]] ?? [] {
                    logged[t["sequence"] as? Int ?? -1] = ((t["changes"] as? [[String: Any]])?.first?["id"] as? String)
                }
            }
            #expect(logged == printed[name], "device \(name)")
            #expect(printed[name]?.keys.sorted() == [1, 2, 3])
        }
    }

    // MARK: Progress

    /// Regression: a sync of many logs printed nothing until it ended.
    @Test func syncReportsImportProgressWithARateAndPlainLinesWhenPiped() async throws {
        let schema = try Schema(json: Data(Self.schema.utf8))
        let store = try await Store.open(Store.Configuration(
            schema: schema, directory: root.appendingPathComponent("writer"),
            container: try DirectoryContainer(root: URL(fileURLWithPath: container)),
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, durability: .normal))
        let logs = 300
        for i in 0..<logs {
            try await store.write { tx in tx.insert("Folder", ["name": .string("folder \(i)")]) }
            try await store.upload()
        }
        try await store.close()
        let run = try CLIErrorTests.run(["sync"] + device("reader"), environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stderr.contains("\r"))
        let progress = run.stderr.split(separator: "\n").filter { $0.hasPrefix("sync: importing: ") }
        #expect(progress.count >= 2, "\(run.stderr)")
        #expect(progress.allSatisfy { $0.contains(" logs/s") && $0.contains(" transactions") }, "\(progress)")
        #expect(progress.last?.hasPrefix("sync: importing: \(logs) logs, ") == true, "\(progress)")
        // A sync with nothing to wait for says nothing on a pipe.
        let quiet = try CLIErrorTests.run(["sync"] + device("reader"))
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
    }

    /// Regression: the sweep's progress had no rate (and was a `\r` line
    /// on a terminal only because the check happened to be there).
    @Test func sweepProgressHasARateOnPlainLinesWhenPipedAndOneLineOnATerminal() throws {
        let arguments = ["simulate", "--seeds", "3", "--devices", "1", "--saves", "1"]
        let piped = try CLIErrorTests.run(arguments, environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(!piped.stderr.contains("\r"))
        let lines = piped.stderr.split(separator: "\n")
        #expect(lines.count == 3 && lines.allSatisfy { $0.hasPrefix("simulate: ") && $0.contains(" seeds/s") }, "\(piped.stderr)")
        let terminal = try Self.runWithTerminalStderr(arguments, environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
        #expect(terminal.status == 0)
        #expect(terminal.output.contains("\rsimulate: 1/3 seeds") && terminal.output.contains("\rsimulate: 3/3 seeds"), "\(terminal.output.debugDescription)")
        #expect(terminal.output.contains("\u{1B}[K"))
        // The line is ended, so what the command prints next starts a line of its own.
        let lastProgress = try #require(terminal.output.range(of: "simulate: 3/3 seeds", options: .backwards))
        // (The terminal turns the line break into "\r\n".)
        #expect(terminal.output[lastProgress.upperBound...].unicodeScalars.last == "\n", "\(terminal.output.debugDescription)")
    }

    /// `bench` reports each long loop with a rate.
    @Test func benchReportsProgressWithARate() throws {
        let run = try CLIErrorTests.run(["bench", "scenarios", "--only", "save", "--scale", "0.001"], environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stderr.contains("\r"))
        #expect(run.stderr.contains("bench save, full: 49/50 transactions, ") && run.stderr.contains(" transactions/s"), "\(run.stderr)")
    }

    /// Runs the binary with standard error on a pseudo-terminal; returns its
    /// status and what it wrote there.
    static func runWithTerminalStderr(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
        var master: Int32 = -1
        var terminal: Int32 = -1
        try #require(openpty(&master, &terminal, nil, nil, nil) == 0)
        defer { close(master) }
        // Not inherited by processes other tests start meanwhile.
        _ = fcntl(master, F_SETFD, FD_CLOEXEC)
        _ = fcntl(terminal, F_SETFD, FD_CLOEXEC)
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        try #require(null >= 0)
        defer { close(null) }
        let process = try SpawnedProcess.spawn(CrashSafetyTests.binary!.path, arguments,
                                               environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                               stdin: null, stdout: null, stderr: terminal)
        close(terminal)
        var output = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
        let started = Date()
        func drain() {
            while true {
                let n = read(master, &buffer, buffer.count)
                if n <= 0 { return }
                output.append(contentsOf: buffer[0..<n])
            }
        }
        while process.isRunning && Date().timeIntervalSince(started) < 300 {
            drain()
            usleep(10_000)
        }
        process.kill()
        let ended = process.waitUntilExit()
        drain()
        return (ended.signaled ? -1 : ended.status, String(decoding: output, as: UTF8.self))
    }
}
