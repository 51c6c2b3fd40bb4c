import ChronicleTestSupport
import Foundation
import Synchronization
import Testing
@testable import ChronicleCLI

#if canImport(Glibc)
import Glibc
#endif

/// What `save` and every schema path read is refused with a typed error
/// naming the line and column of the fault, whatever the bytes (not UTF-8,
/// CRLF line ends) and whatever the file (a pipe, process substitution, a
/// folder, a FIFO no one writes to, a device, a loop of symbolic links).
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLIInputTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-input-\(UUID().uuidString)")
    var container: String { root.appendingPathComponent("container").path }

    static let schema = #"""
        {"version": 1, "entities": [
          {"name": "Item", "attributes": [
             {"name": "title", "type": "string"}, {"name": "count", "type": "int64", "optional": true},
             {"name": "score", "type": "double", "optional": true}, {"name": "due", "type": "date", "optional": true}]}
        ]}
        """#

    init() throws {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data(Self.schema.utf8).write(to: root.appendingPathComponent("schema.json"))
        #expect(try CLIErrorTests.run(["init", "--container", container]).status == 0)
    }

    func path(_ name: String) -> String { root.appendingPathComponent(name).path }

    func device(_ name: String = "a", schema: String = "schema.json") -> [String] {
        ["--device-dir", path(name), "--container", container, "--schema", schema.hasPrefix("/") ? schema : path(schema)]
    }

    func titles(_ name: String = "a") throws -> [String] {
        let run = try CLIErrorTests.run(["query", "--device-dir", path(name), "--json", "SELECT title FROM Item ORDER BY title"])
        #expect(run.status == 0, "\(run.stderr)")
        return try CLIContractTests.rows(run.stdout).compactMap { $0["title"] as? String }
    }

    static func insert(_ title: String) -> String {
        #"{"op": "insert", "entity": "Item", "values": {"title": "\#(title)"}}"#
    }

    // MARK: Progress

    /// A save reports its progress on standard error, reading the lines
    /// and applying the changes: piped, as plain lines (here every step, as
    /// `CHRONICLE_PROGRESS_SECONDS=0` asks); a save that ends sooner than the
    /// first report prints nothing there.
    @Test func aSaveReportsItsProgressOnStandardError() throws {
        let count = 5_000
        let input = (0..<count).map { Self.insert("item \($0)") }.joined(separator: "\n") + "\n"
        let run = try CLIErrorTests.run(["save"] + device(), input: input, environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(String(decoding: run.stdout, as: UTF8.self).split(separator: "\n").count == 1 + count, "the sequence, then each inserted ID")
        #expect(run.stderr.contains("save: reading: 4096/\(count) lines"), "\(run.stderr)")
        #expect(run.stderr.contains("save: reading: \(count)/\(count) lines"), "\(run.stderr)")
        #expect(run.stderr.contains("save: 1024/\(count) changes"), "\(run.stderr)")
        #expect(run.stderr.contains("save: \(count)/\(count) changes") && run.stderr.contains("committing"), "\(run.stderr)")
        #expect(!run.stderr.contains("\r"), "piped: no carriage return")
        let quiet = try CLIErrorTests.run(["save"] + device(), input: Self.insert("one more") + "\n")
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
        // Regression: progress that could not be written (standard error on
        // a full disk, or closed) stopped the save with a trap.
        for redirection in ["exec 2>/dev/full", "exec 2>&-"] {
            let blind = try CLIErrorTests.run(["save"] + device(), input: input, shellPrefix: redirection,
                                              environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
            #expect(blind.status == 0, "\(redirection): \(blind.status)")
        }
        #expect(try titles().count == 3 * count + 1)
    }

    /// Regression: a save's commit ("committing") was reported only after
    /// it ended, held back by the least time between reports, while the
    /// line showed a count short of the total. A phase that starts is
    /// reported at once once anything was; other reports wait their turn.
    @Test func aPhaseThatStartsIsReportedAtOnce() async throws {
        let lines = LinesWritten()
        let progress = ProgressLine("save", unit: "changes", total: 10, terminal: false,
                                    environment: [ProgressLine.variable: "0.3"], write: { lines.append($0) })
        progress.update(1, note: "committing", now: true)
        #expect(lines.all.isEmpty, "nothing reported before: a quick save stays quiet")
        try await Task.sleep(for: .milliseconds(350))
        progress.update(5)
        progress.update(6)
        progress.update(10, note: "committing", now: true)
        // 6 waited its turn; the commit did not wait for the end.
        #expect(lines.all.count == 2, "\(lines.all)")
        progress.finish()
        #expect(lines.all.count == 2, "the end says nothing new: \(lines.all)")
        #expect(lines.all.first?.hasPrefix("save: 5/10 changes") == true, "\(lines.all)")
        #expect(lines.all.last?.hasPrefix("save: 10/10 changes") == true && lines.all.last?.hasSuffix("committing\n") == true, "\(lines.all)")
    }

    // MARK: Bytes

    /// Regression: a save line that was not UTF-8 was decoded lossily (the
    /// bad byte saved as U+FFFD) from standard input, and refused with
    /// Foundation's words and no position from `--input`.
    @Test func saveRefusesTextThatIsNotUTF8NamingLineAndColumn() throws {
        var bytes = Data((Self.insert("fine") + "\n").utf8)
        bytes += Data(#"{"op": "insert", "entity": "Item", "values": {"title": "caf"#.utf8) + Data([0xC3, 0x28]) + Data("\"}}\n".utf8)
        try bytes.write(to: root.appendingPathComponent("in.jsonl"))
        for arguments in [device(), device() + ["--input", path("in.jsonl")]] {
            let run = try CLIErrorTests.run(["save"] + arguments, inputBytes: bytes)
            #expect(run.status == 1, "\(run.stderr)")
            #expect(run.stderr.contains("malformedBody: line 2, column 60: the text is not valid UTF-8 (byte 0xc3)"), "\(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: path("a")), "refused input made the device folder")
    }

    /// Regression: a schema file that was not UTF-8 was refused naming the
    /// string it is in, not the byte.
    @Test func schemaThatIsNotUTF8IsRefusedNamingTheByte() throws {
        let bytes = Data("{\"version\": 1, \"entities\": [\n  {\"name\": \"It".utf8) + Data([0xFF]) + Data("em\"}]}".utf8)
        try bytes.write(to: root.appendingPathComponent("bad.json"))
        let run = try CLIErrorTests.run(["save"] + device(schema: "bad.json"), input: Self.insert("x"))
        #expect(run.status == 1)
        #expect(run.stderr.contains("schemaSyntax: bad.json: line 2, column 15: the text is not valid UTF-8 (byte 0xff)"), "\(run.stderr)")
    }

    /// Regression: CRLF input was one line (Swift reads "\r\n" as one
    /// character, so splitting at "\n" did not split it), refused as
    /// "line 1, line 2, column 1".
    @Test func crlfLineEndsAreAcceptedAndTheCarriageReturnIsNoPartOfTheValue() throws {
        let crlfSchema = Self.schema.replacingOccurrences(of: "\n", with: "\r\n")
        try Data(crlfSchema.utf8).write(to: root.appendingPathComponent("crlf.json"))
        let input = [Self.insert("b"), "", Self.insert("a")].joined(separator: "\r\n") + "\r\n"
        let run = try CLIErrorTests.run(["save"] + device(schema: "crlf.json"), input: input)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try titles() == ["a", "b"])
        // A fault after CRLF lines is on the line and column an editor shows.
        let bad = [Self.insert("c"), #"{"op": "insert", "entity": "Item", "values": {"title": 7}}"#].joined(separator: "\r\n") + "\r\n"
        let refused = try CLIErrorTests.run(["save"] + device(schema: "crlf.json"), input: bad)
        #expect(refused.status == 1 && refused.stderr.contains("typeMismatch: line 2, column 56: Item.title: expected"), "\(refused.stderr)")
    }

    // MARK: Positions

    /// Regression: a duplicate key on line 3 was said to be first "at line 1".
    @Test func aDuplicateKeyNamesTheRealLineOfBothOccurrences() throws {
        let input = [Self.insert("a"), "", #"{"op": "insert", "entity": "Item", "values": {"title": "b", "title": "c"}}"#].joined(separator: "\n")
        let run = try CLIErrorTests.run(["save"] + device(), input: input)
        #expect(run.status == 1)
        #expect(run.stderr.contains(#"malformedBody: line 3, column 61: duplicate key "title" (first at line 3, column 47)"#), "\(run.stderr)")
    }

    /// Regression: an unknown entity or attribute, a value its field cannot
    /// take and a bad `op` or `id` named the line only.
    @Test(arguments: [
        (#"{"op": "insert", "entity": "Nope", "values": {}}"#, #"unknownEntity: line 2, column 28: the schema has no entity "Nope""#),
        (#"{"op": "insert", "entity": "Item", "values": {"ti\"tle": 1}}"#, #"unknownAttribute: line 2, column 58: Item has no field "ti\"tle""#),
        (#"{"op": "insert", "entity": "Item", "values": {"title": "x", "count": 1.5}}"#, "typeMismatch: line 2, column 70: Item.count: expected"),
        (#"{"op": "insert", "entity": "Item", "values": {"title": "x", "due": "yesterday"}}"#, "typeMismatch: line 2, column 68: Item.due:"),
        (#"{"op": "upsert", "entity": "Item"}"#, #"malformedBody: line 2, column 8: "op" must be"#),
        (#"{"op": "update", "entity": "Item", "id": "nope", "values": {"title": "x"}}"#, #"malformedBody: line 2, column 42: "id" is not a UUID"#),
        (#"{"op": "delete", "entity": "Item"}"#, #"malformedBody: line 2, column 1: delete needs an "id""#),
        (#"  ["op"]"#, "malformedBody: line 2, column 3: not a JSON object"),
        (#"{"op": "insert", "entity": "Item", "values": {"title": "x"}, "more": 1}"#, #"malformedBody: line 2, column 70: unknown key "more""#),
        (#"{"op": "insert", "entity": 5}"#, #"malformedBody: line 2, column 28: "entity" must be the name"#),
        (#"{"op": "insert", "entity": "\#(String(repeating: "é", count: 10_000))"}"#,
         #"unknownEntity: line 2, column 28: the schema has no entity "\#(String(repeating: "é", count: 40))"…"#),
    ])
    func everyRefusedLineNamesLineAndColumn(_ line: String, _ message: String) throws {
        let run = try CLIErrorTests.run(["save"] + device(), input: Self.insert("fine") + "\n" + line + "\n")
        #expect(run.status == 1)
        #expect(run.stderr.contains(message), "\(run.stderr)")
    }

    /// Regression: `-0` for a double was saved as +0.0 (the parser read it
    /// as the integer 0); for other types it is still 0.
    @Test func minusZeroKeepsItsSignInADouble() throws {
        let input = [#"{"op": "insert", "entity": "Item", "values": {"title": "a", "score": -0, "count": -0, "due": -0}}"#,
                     #"{"op": "insert", "entity": "Item", "values": {"title": "b", "score": 0, "count": 0}}"#].joined(separator: "\n")
        let run = try CLIErrorTests.run(["save"] + device(), input: input)
        #expect(run.status == 0, "\(run.stderr)")
        let rows = try CLIContractTests.rows(try CLIErrorTests.run(["query", "--device-dir", path("a"), "--json",
                                                                   "SELECT title, score, count, due FROM Item ORDER BY title"]).stdout)
        #expect(rows.first?["score"] as? String == "-0.0", "\(rows)")
        #expect(rows.first?["count"] as? Int == 0 && rows.first?["due"] as? String == "1970-01-01T00:00:00.000000Z", "\(rows)")
        #expect(rows.last?["score"] as? Int == 0, "\(rows)")
    }

    /// Regression: what the save itself refuses (a required field null or
    /// missing, text holding U+0000, an ID or reference to no record, a
    /// unique key taken) had no line and column.
    @Test(arguments: [
        (#"{"op": "insert", "entity": "Item", "values": {"title": null}}"#, "missingValue: line 2, column 56: Item.title is required"),
        (#"{"op": "insert", "entity": "Item", "values": {"count": 1}}"#, "missingValue: line 2, column 46: Item.title is required"),
        (#"{"op": "insert", "entity": "Item"}"#, "missingValue: line 2, column 1: Item.title is required"),
        (#"{"op": "insert", "entity": "Item", "values": {"title": "a\u0000b"}}"#, "invalidValue: line 2, column 56: Item.title holds the character U+0000"),
        (#"{"op": "delete", "entity": "Item", "id": "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"}"#, "recordNotFound: line 2, column 43: no Item with ID"),
        (#"{"op": "insert", "entity": "Tag", "values": {"name": "x", "item": "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"}}"#,
         "recordNotFound: line 2, column 68: Tag.item refers to Item"),
        (#"{"op": "insert", "entity": "Tag", "values": {"name": "taken"}}"#, "uniqueViolation: line 2, column 1: Tag"),
        // Regression: said only that Item has no field "tags".
        (#"{"op": "insert", "entity": "Item", "values": {"title": "x", "tags": []}}"#,
         "unknownAttribute: line 2, column 69: Item.tags is a to-many relationship, which a record does not hold: set Tag.item on each Tag instead"),
    ])
    func refusalsOfTheSaveNameTheLine(_ line: String, _ message: String) throws {
        let schema = #"""
            {"version": 1, "entities": [
              {"name": "Item", "attributes": [{"name": "title", "type": "string"}, {"name": "count", "type": "int64", "optional": true}],
               "relationships": [{"name": "tags", "toMany": true, "destination": "Tag", "inverse": "item"}]},
              {"name": "Tag", "attributes": [{"name": "name", "type": "string"}], "unique": [["name"]],
               "relationships": [{"name": "item", "destination": "Item", "inverse": "tags"}]}]}
            """#
        try Data(schema.utf8).write(to: root.appendingPathComponent("tags.json"))
        let first = try CLIErrorTests.run(["save"] + device(schema: "tags.json"), input: #"{"op": "insert", "entity": "Tag", "values": {"name": "taken"}}"#)
        #expect(first.status == 0, "\(first.stderr)")
        let run = try CLIErrorTests.run(["save"] + device(schema: "tags.json"), input: Self.insert("fine") + "\n" + line + "\n")
        #expect(run.status == 1)
        #expect(run.stderr.contains(message), "\(run.stderr)")
    }

    /// Regression: a unique key given twice in one input was blamed on the
    /// line that had it first, not on the line that took it again.
    @Test func aKeyTakenTwiceInOneSaveNamesTheSecondLine() throws {
        try Data(#"{"version": 1, "entities": [{"name": "Tag", "attributes": [{"name": "name", "type": "string"}], "unique": [["name"]]}]}"#.utf8)
            .write(to: root.appendingPathComponent("tag.json"))
        let input = ["a", "b", "a"].map { #"{"op": "insert", "entity": "Tag", "values": {"name": "\#($0)"}}"# }.joined(separator: "\n")
        let run = try CLIErrorTests.run(["save"] + device(schema: "tag.json"), input: input)
        #expect(run.status == 1 && run.stderr.contains("uniqueViolation: line 3, column 1: Tag"), "\(run.stderr)")
        // The record that has the key is no record yet: the line that
        // inserts it is named too.
        #expect(run.stderr.contains("is inserted by line 1 of this input)"), "\(run.stderr)")
        #expect(!run.stderr.contains("by line 3"), "the refused record is not named as the one holding the key: \(run.stderr)")
    }

    /// Regression: with its container moved away (a share not mounted), a
    /// device folder used before refused every save (`notFound`), though
    /// the device works offline as an app does. Its saves now wait, `sync`
    /// says why and exits 3, and the container gets them once it is back.
    /// A new device folder still needs its container.
    @Test func aDeviceUsedBeforeSavesWhileItsContainerIsAway() throws {
        #expect(try CLIErrorTests.run(["save"] + device(), input: Self.insert("online")).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device()).status == 0)
        let away = root.appendingPathComponent("container.away")
        try FileManager.default.moveItem(atPath: container, toPath: away.path)
        let saved = try CLIErrorTests.run(["save"] + device(), input: Self.insert("offline"))
        // Saved, and said: a mistyped --container looks the same.
        #expect(saved.status == 0 && saved.stderr.contains("warning: the container \(container) cannot be reached: it is not there"), "\(saved.stderr)")
        let offline = try CLIErrorTests.run(["sync"] + device())
        #expect(offline.status == 3 && offline.stderr.contains("unavailable: the container \(container) cannot be reached"), "\(offline.stderr)")
        let fresh = try CLIErrorTests.run(["save"] + device("b"), input: Self.insert("nowhere"))
        #expect(fresh.status == 1 && fresh.stderr.contains("notFound"), "\(fresh.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path("b")))
        try FileManager.default.moveItem(atPath: away.path, toPath: container)
        #expect(try CLIErrorTests.run(["sync"] + device()).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("c")).status == 0)
        #expect(try titles("c") == ["offline", "online"])
    }

    /// Regression: a save inserting one ID twice named the first insert's
    /// line. The second is at fault; an insert of a record that was there
    /// before the save still names its own (first) line.
    @Test func anIDInsertedTwiceInOneSaveNamesTheSecondInsert() throws {
        let id = "01a21bc2-9f95-70d1-8524-aaaaaaaaaaaa"
        let insert = #"{"op": "insert", "entity": "Item", "id": "\#(id)", "values": {"title": "t"}}"#
        let twice = try CLIErrorTests.run(["save"] + device(), input: [Self.insert("other"), insert, insert].joined(separator: "\n"))
        #expect(twice.status == 1 && twice.stderr.contains("recordExists: line 3, column 43: Item \(id)"), "\(twice.stderr)")
        #expect(try CLIErrorTests.run(["save"] + device(), input: insert).status == 0)
        let again = try CLIErrorTests.run(["save"] + device(), input: [Self.insert("other"), insert].joined(separator: "\n"))
        #expect(again.status == 1 && again.stderr.contains("recordExists: line 2, column 43: Item \(id)"), "\(again.stderr)")
    }

    /// Regression: empty input from a file said "expected JSON lines on
    /// standard input".
    @Test func emptyInputIsRefusedNamingWhereItWasRead() throws {
        try Data("\r\n  \n\t\n".utf8).write(to: root.appendingPathComponent("empty.jsonl"))
        let file = try CLIErrorTests.run(["save"] + device() + ["--input", path("empty.jsonl")])
        #expect(file.status == 1 && file.stderr.contains("misuse: no changes given: \(path("empty.jsonl")) holds no JSON lines"), "\(file.stderr)")
        let stdin = try CLIErrorTests.run(["save"] + device(), input: "\n")
        #expect(stdin.status == 1 && stdin.stderr.contains("no changes given: standard input holds no JSON lines"), "\(stdin.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path("a")))
    }

    /// Regression: a path or name holding a line break or an escape
    /// sequence broke the one-line error on standard error (or recoloured
    /// the terminal).
    @Test func anErrorIsOneLineWhateverThePathHolds() throws {
        let hostile = root.appendingPathComponent("x\ny\u{1b}[31m").path
        let run = try CLIErrorTests.run(["save", "--device-dir", path("a"), "--container", hostile, "--schema", path("schema.json")],
                                        input: Self.insert("x"))
        #expect(run.status == 1)
        #expect(run.stderr.hasSuffix("\n") && run.stderr.filter { $0 == "\n" }.count == 1, "\(run.stderr)")
        #expect(!run.stderr.contains("\u{1b}") && run.stderr.contains(#"x\ny\u{1b}[31m"#), "\(run.stderr)")
    }

    /// Regression: `inspect` and `verify` printed a name found in the
    /// container as it was, so a line break in it split the report and an
    /// escape sequence reached the terminal.
    @Test func containerReportsEscapeTheNamesTheyFind() throws {
        let hostile = "evil\n\u{1b}[31mname"
        #expect(FileManager.default.createFile(atPath: root.appendingPathComponent("container/blobs/\(hostile)").path, contents: Data()))
        for command in ["inspect", "verify"] {
            let run = try CLIErrorTests.run([command, "--container", container])
            let stdout = String(decoding: run.stdout, as: UTF8.self)
            #expect(run.status == 1 && stdout.contains(#"blobs/evil\n\u{1b}[31mname: foreignEntry"#), "\(command): \(stdout)")
            #expect(!stdout.contains("\u{1b}"), "\(command): \(stdout)")
        }
    }

    // MARK: Files

    /// Regression: `--input` read files through Foundation, which could not
    /// read process substitution (`/dev/fd/63`: "permission denied").
    @Test func saveReadsPipesAndProcessSubstitution() throws {
        let chronicle = CrashSafetyTests.binary!.path
        let arguments = (["save"] + device()).map { "'\($0)'" }.joined(separator: " ")
        let script = """
            printf '%s\\n' '\(Self.insert("piped"))' | '\(chronicle)' \(arguments) --input /dev/stdin || exit 10
            '\(chronicle)' \(arguments) --input <(printf '%s\\r\\n' '\(Self.insert("substituted"))') || exit 11
            """
        let run = try SpawnedProcess.run("/bin/bash", ["-c", script], timeLimitSeconds: 120)
        #expect(!run.signaled && run.status == 0, "\(String(decoding: run.stderr, as: UTF8.self))")
        #expect(try titles() == ["piped", "substituted"])
    }

    /// Regression: a schema path that was a FIFO no one writes to hung,
    /// `/dev/zero` filled memory, and a folder or a loop of symbolic links
    /// gave Foundation's words.
    @Test func aSchemaPathMustBeARegularFile() throws {
        #expect(mkfifo(path("fifo.json"), 0o600) == 0)
        try FileManager.default.createDirectory(atPath: path("folder.json"), withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: path("loop.json"), withDestinationPath: path("loop.json"))
        let cases = [("fifo.json", "is a pipe, not a regular file"), ("/dev/zero", "is a device, not a regular file"),
                     ("folder.json", "is a folder, not a regular file"), ("loop.json", "is a loop of symbolic links"),
                     ("missing.json", "cannot open schema file")]
        for (name, message) in cases {
            let run = try CLIErrorTests.run(["save"] + device(schema: name), input: Self.insert("x"), timeLimitSeconds: 20)
            #expect(!run.signaled && run.status == 1, "\(name): \(run.stderr)")
            #expect(run.stderr.contains(message), "\(name): \(run.stderr)")
            let json = try CLIErrorTests.run(["save"] + device(schema: name) + ["--json"], input: Self.insert("x"), timeLimitSeconds: 20)
            let error = try #require(try CLIContractTests.object(json.stdout)["error"] as? [String: Any], "\(name)")
            #expect((error["message"] as? String)?.contains(message) == true, "\(name): \(error)")
        }
    }

    /// Regression: blank lines each cost a slice before they were skipped:
    /// 60 MB of line breaks took 2.6 GB and most of a minute.
    @Test func blankLinesCostNoMemoryPerLine() throws {
        try Data(repeating: 0x0A, count: 60_000_000).write(to: root.appendingPathComponent("blank.jsonl"))
        let run = try CLIErrorTests.run(["save"] + device() + ["--input", path("blank.jsonl")], timeLimitSeconds: 60,
                                        shellPrefix: "ulimit -v 600000")
        #expect(!run.signaled && run.status == 1 && run.stderr.contains("holds no JSON lines"), "\(run.stderr)")
    }

    /// Regression: `bench --write-docs` read a file that was not UTF-8 (or
    /// could not be read) as empty and overwrote it with the results alone.
    @Test func benchDoesNotOverwriteADocumentItCannotRead() throws {
        let original = Data("# Results\n".utf8) + Data([0xFF, 0xFE]) + Data("\n<!-- scenarios:begin -->\n<!-- scenarios:end -->\n".utf8)
        try original.write(to: root.appendingPathComponent("bench.md"))
        let run = try CLIErrorTests.run(["bench", "scenarios", "--only", "bytes", "--scale", "0.01", "--write-docs", path("bench.md")],
                                        timeLimitSeconds: 120)
        #expect(run.status == 1 && run.stderr.contains("is not UTF-8 text: refusing to rewrite it"), "\(run.stderr)")
        #expect(try Data(contentsOf: root.appendingPathComponent("bench.md")) == original)
    }

    /// Regression: `--input` of a folder gave Foundation's words, and of
    /// `/dev/zero` read until memory ran out.
    @Test func saveInputThatIsAFolderOrEndlessIsRefused() throws {
        let folder = try CLIErrorTests.run(["save"] + device() + ["--input", root.path], timeLimitSeconds: 60)
        #expect(folder.status == 1 && folder.stderr.contains("io: input \(root.path) is a folder"), "\(folder.stderr)")
        let endless = try CLIErrorTests.run(["save"] + device() + ["--input", "/dev/zero"], timeLimitSeconds: 60)
        #expect(!endless.signaled && endless.status == 1, "\(endless.stderr)")
        #expect(endless.stderr.contains("sizeOverCap: input /dev/zero is longer than 64 MiB"), "\(endless.stderr)")
    }
}

/// The CLI's log: errors only by default, more with `--log-level` or
/// `CHRONICLE_LOG`.
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLILoggingTests {
    let inputs: CLIInputTests

    init() throws {
        inputs = try CLIInputTests()
    }

    /// Regression: there was no `--log-level`, and the default let warnings through.
    @Test func ordinaryCommandsLogNothingUnlessAskedTo() throws {
        let save = try CLIErrorTests.run(["save"] + inputs.device(), input: CLIInputTests.insert("a"))
        #expect(save.status == 0 && save.stderr.isEmpty, "\(save.stderr)")
        let sync = try CLIErrorTests.run(["sync"] + inputs.device())
        #expect(sync.status == 0 && sync.stderr.isEmpty, "\(sync.stderr)")
        for arguments in [["--log-level", "info"], ["--log-level=INFO"]] {
            let loud = try CLIErrorTests.run(["sync"] + inputs.device() + arguments + ["--json"])
            #expect(loud.status == 0 && loud.stderr.contains("info chronicle:") && loud.stderr.contains("opened store"), "\(loud.stderr)")
            #expect(try CLIContractTests.object(loud.stdout)["status"] as? String == "upToDate")
        }
        let variable = try CLIErrorTests.run(["sync"] + inputs.device(), environment: ["CHRONICLE_LOG": "debug"])
        #expect(variable.status == 0 && variable.stderr.contains("opened store"), "\(variable.stderr)")
        // The option over the variable.
        let quiet = try CLIErrorTests.run(["sync"] + inputs.device() + ["--log-level", "error"], environment: ["CHRONICLE_LOG": "debug"])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
    }

    /// Regression: a progress interval too large for a Duration (1e30,
    /// 1e400) trapped, and one that was no number was ignored.
    @Test(arguments: ["1e30", "1e400", "nan", "-1", "soon"])
    func aProgressIntervalThatIsNoIntervalIsBadUsage(_ value: String) throws {
        let run = try CLIErrorTests.run(["simulate", "--seeds", "2", "--saves", "1", "--devices", "1", "--json"],
                                        environment: ["CHRONICLE_PROGRESS_SECONDS": value])
        #expect(!run.signaled && run.status == 2, "\(run.stderr)")
        let error = try #require(try CLIContractTests.object(run.stdout)["error"] as? [String: Any])
        #expect((error["message"] as? String)?.contains("CHRONICLE_PROGRESS_SECONDS=\(value) is not a number of seconds") == true, "\(error)")
    }

    @Test func aLevelThatIsNoLevelIsBadUsage() throws {
        let option = try CLIErrorTests.run(["sync"] + inputs.device() + ["--log-level", "loud", "--json"])
        #expect(option.status == 2)
        let error = try #require(try CLIContractTests.object(option.stdout)["error"] as? [String: Any])
        #expect(error["code"] as? String == "usage" && (error["message"] as? String)?.contains("--log-level loud is not a log level") == true, "\(error)")
        let variable = try CLIErrorTests.run(["sync"] + inputs.device(), environment: ["CHRONICLE_LOG": "loud"])
        #expect(variable.status == 2 && variable.stderr.contains("CHRONICLE_LOG=loud is not a log level"), "\(variable.stderr)")
        #expect(!FileManager.default.fileExists(atPath: inputs.path("a")), "bad usage made the device folder")
    }
}

/// What a ``ProgressLine`` wrote, in order.
final class LinesWritten: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
