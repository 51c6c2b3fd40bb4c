import Foundation
import Testing

/// The server `make test` starts beside the tests (scripts/with-postgres).
private let postgresURL = ProcessInfo.processInfo.environment["CHRONICLE_TEST_POSTGRES"]

/// The command line on a container in PostgreSQL: `--container` takes a
/// postgres:// URL wherever it takes a directory.
@Suite(.enabled(if: CrashSafetyTests.binary != nil && postgresURL != nil,
                "needs the chronicle binary and a PostgreSQL server: run `make test`"))
struct CLIPostgresTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-cli-postgres-\(UUID().uuidString)")
    /// A container of its own: the test server's URL with a fresh schema.
    let container = "\(postgresURL ?? "")&schema=cli_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16))"

    init() throws {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data(CLIContractTests.schema.utf8).write(to: root.appendingPathComponent("schema.json"))
    }

    func device(_ name: String) -> [String] {
        ["--device-dir", root.appendingPathComponent(name).path, "--container", container, "--schema", root.appendingPathComponent("schema.json").path]
    }

    /// The server gone (its socket nowhere): a device that synced before
    /// still saves, and `sync` says to run it again later (exit 3), with
    /// nothing lost once the server is back.
    @Test func aServerThatCannotBeReachedIsRunAgainLaterNotAFailure() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(try CLIErrorTests.run(["init", "--container", container]).status == 0)
        #expect(try CLIErrorTests.run(["save"] + device("a"), input: #"{"op": "insert", "entity": "Folder", "values": {"name": "Inbox"}}"#).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("a")).status == 0)
        let socket = try #require(URLComponents(string: container)?.queryItems?.first { $0.name == "host" }?.value)
        let gone = container.replacingOccurrences(of: "host=\(socket)", with: "host=\(root.appendingPathComponent("no-server").path)")
        let away = ["--device-dir", root.appendingPathComponent("a").path, "--container", gone, "--schema", root.appendingPathComponent("schema.json").path]
        let saved = try CLIErrorTests.run(["save"] + away, input: #"{"op": "insert", "entity": "Folder", "values": {"name": "Offline"}}"#)
        #expect(saved.status == 0, "a save does not need the server: \(saved.stderr)")
        let sync = try CLIErrorTests.run(["sync"] + away)
        #expect(sync.status == 3, "\(sync.status): \(sync.stderr)")
        #expect(sync.stderr.contains("unavailable"), "\(sync.stderr)")
        let json = try CLIErrorTests.run(["sync", "--json"] + away)
        #expect(json.status == 3)
        #expect((try CLIContractTests.object(json.stdout)["error"] as? [String: Any])?["code"] as? String == "unavailable")
        // Back: the save made while it was gone reaches another device.
        #expect(try CLIErrorTests.run(["sync"] + device("a")).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("b")).status == 0)
        let seen = try CLIErrorTests.run(["query", "--device-dir", root.appendingPathComponent("b").path, "SELECT name FROM Folder ORDER BY name"])
        #expect(String(decoding: seen.stdout, as: UTF8.self).contains("Offline"), "\(String(decoding: seen.stdout, as: UTF8.self))")
    }

    @Test func twoDevicesSyncThroughAPostgresContainer() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        // Before init, the schema holds no container: refused, naming init.
        let early = try CLIErrorTests.run(["save"] + device("a"), input: #"{"op": "insert", "entity": "Folder", "values": {"name": "x"}}"#)
        #expect(early.status != 0)
        #expect(early.stderr.contains("chronicle init"), "\(early.stderr)")

        #expect(try CLIErrorTests.run(["init", "--container", container]).status == 0)
        let again = try CLIErrorTests.run(["init", "--container", container])
        #expect(String(decoding: again.stdout, as: UTF8.self).contains("already there"))
        #expect(try CLIErrorTests.run(["save"] + device("a"), input: #"{"op": "insert", "entity": "Folder", "values": {"name": "Inbox"}}"#).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("a")).status == 0)
        #expect(try CLIErrorTests.run(["sync"] + device("b")).status == 0)
        let query = try CLIErrorTests.run(["query", "--device-dir", root.appendingPathComponent("b").path, "--json", "SELECT name FROM Folder"])
        #expect(query.status == 0)
        #expect(String(decoding: query.stdout, as: UTF8.self).contains("Inbox"), "\(String(decoding: query.stdout, as: UTF8.self))")
        let inspect = try CLIErrorTests.run(["inspect", "--container", container])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        // A log read back from the database.
        let listed = try CLIContractTests.object(try CLIErrorTests.run(["inspect", "--container", container, "--logs", "--json"]).stdout)
        let log = try #require((listed["blobs"] as? [[String: Any]])?.compactMap { $0["name"] as? String }.first { $0.hasSuffix(".chlog") })
        let dumped = try CLIErrorTests.run(["dump", "--container", container, "--name", log])
        #expect(dumped.status == 0 && String(decoding: dumped.stdout, as: UTF8.self).contains("Inbox"), "\(dumped.stderr)")

        // The store replicated to a folder, which a third device syncs from.
        let folder = root.appendingPathComponent("replica").path
        let copied = try CLIErrorTests.run(["replicate", "--from", container, "--to", folder, "--json"])
        #expect(copied.status == 0, "\(copied.stderr)")
        let report = try CLIContractTests.object(copied.stdout)
        #expect((report["copied"] as? Int ?? 0) > 0 && (report["conflicts"] as? [Any])?.isEmpty == true, "\(report)")
        let rerun = try CLIContractTests.object(try CLIErrorTests.run(["replicate", "--from", container, "--to", folder, "--json"]).stdout)
        #expect(rerun["copied"] as? Int == 0, "run again, it copies nothing: \(rerun)")
        let third = ["--device-dir", root.appendingPathComponent("c").path, "--container", folder,
                     "--schema", root.appendingPathComponent("schema.json").path]
        #expect(try CLIErrorTests.run(["sync"] + third).status == 0)
        let seen = try CLIErrorTests.run(["query", "--device-dir", root.appendingPathComponent("c").path, "SELECT name FROM Folder"])
        #expect(String(decoding: seen.stdout, as: UTF8.self).contains("Inbox"))
    }

    /// A store's history carried from a folder to PostgreSQL as portable
    /// JSON: a device that syncs there builds the same state.
    @Test func logsExportedFromAFolderImportIntoPostgres() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("folder").path
        let onFolder = { (name: String) in
            ["--device-dir", self.root.appendingPathComponent(name).path, "--container", folder, "--schema", self.root.appendingPathComponent("schema.json").path]
        }
        #expect(try CLIErrorTests.run(["init", "--container", folder]).status == 0)
        #expect(try CLIErrorTests.run(["save"] + onFolder("a"), input: #"{"op": "insert", "entity": "Folder", "values": {"name": "Inbox"}}"#).status == 0)
        #expect(try CLIErrorTests.run(["save"] + onFolder("b"), input: #"{"op": "insert", "entity": "Folder", "values": {"name": "Work"}}"#).status == 0)
        for name in ["a", "b", "a"] { #expect(try CLIErrorTests.run(["sync"] + onFolder(name)).status == 0) }
        let exportFile = root.appendingPathComponent("logs.json").path
        let exported = try CLIErrorTests.run(["export-logs", "--container", folder, "--output", exportFile], environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(exported.stderr.contains("export-logs") && !exported.stderr.contains("\r"), "progress in plain lines when piped: \(exported.stderr)")

        let imported = try CLIErrorTests.run(["import-logs", "--json", "--container", container, exportFile])
        #expect(imported.status == 0, "\(imported.stderr)")
        let report = try CLIContractTests.object(imported.stdout)
        #expect(report["written"] as? Int == 3, "two logs and the schema record: \(report)")
        #expect((report["conflicts"] as? [Any])?.isEmpty == true)
        #expect(try CLIErrorTests.run(["sync"] + device("c")).status == 0)
        let hash = { (dir: String) throws -> String in
            String(decoding: try CLIErrorTests.run(["state-hash", "--device-dir", self.root.appendingPathComponent(dir).path]).stdout, as: UTF8.self)
        }
        #expect(try hash("c") == (try hash("a")) && !(try hash("a")).isEmpty)
        // Again: nothing written twice.
        let again = try CLIContractTests.object(try CLIErrorTests.run(["import-logs", "--json", "--container", container, exportFile]).stdout)
        #expect(again["written"] as? Int == 0 && again["alreadyThere"] as? Int == 3)
    }
}
