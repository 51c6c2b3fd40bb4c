import Foundation
import GRDB
import Testing

/// Careful and hostile uses of the `chronicle` tool that once lost saves or
/// left devices apart, replayed command by command.
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLIDataSafetyTests {
    /// A folder with a schema, a container and device folders.
    struct Workspace {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-cli-safety-\(UUID().uuidString)")
        var schema: String { root.appendingPathComponent("schema.json").path }
        var container: String { root.appendingPathComponent("shared").path }

        init() throws {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            try Data(CrashSafetyTests.schemaJSON.utf8).write(to: URL(fileURLWithPath: schema))
            let made = try CLIErrorTests.run(["init", "--container", container])
            #expect(made.status == 0, "init: \(made.stderr)")
        }

        func device(_ name: String) -> String { root.appendingPathComponent(name).path }

        /// `chronicle <command> --device-dir <device> --container ... --schema ...` plus `extra`.
        func run(_ command: String, _ device: String, _ extra: [String] = []) throws -> (status: Int32, stdout: String, stderr: String) {
            let outcome = try CLIErrorTests.run([command, "--device-dir", self.device(device), "--container", container, "--schema", schema] + extra)
            return (outcome.status, String(decoding: outcome.stdout, as: UTF8.self), "\(outcome.stderr)")
        }

        /// Saves one note titled `title` on `device`; the save must succeed.
        func save(_ device: String, _ title: String) throws {
            let input = root.appendingPathComponent("input-\(UUID().uuidString).jsonl")
            try Data(#"{"op": "insert", "entity": "Note", "values": {"title": "\#(title)"}}"#.utf8).write(to: input)
            let outcome = try run("save", device, ["--input", input.path])
            #expect(outcome.status == 0, "save \(title) on \(device): \(outcome.stderr)")
        }

        /// The titles visible on `device`.
        func titles(_ device: String) throws -> Set<String> {
            let outcome = try CLIErrorTests.run(["query", "--device-dir", self.device(device), "--json", "SELECT title FROM Note"])
            #expect(outcome.status == 0, "query on \(device): \(outcome.stderr)")
            guard case let rows as [[String: Any]] = try JSONSerialization.jsonObject(with: outcome.stdout) else { return [] }
            return Set(rows.compactMap { $0["title"] as? String })
        }

        func stateHash(_ device: String) throws -> String {
            let outcome = try CLIErrorTests.run(["state-hash", "--device-dir", self.device(device)])
            return outcome.stdout.isEmpty ? "" : String(decoding: outcome.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Reading commands change nothing in a device folder: `state-hash` and
    /// `query` open the snapshot read-only (a snapshot of an earlier format
    /// is not upgraded by printing its hash).
    @Test func stateHashAndQueryLeaveTheDeviceFolderAsItWas() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("phone", "kept")
        // A snapshot as the previous format left it: no table of device numbers.
        let snapshot = try #require(FileManager.default.enumerator(atPath: w.device("phone"))?.compactMap { $0 as? String }
            .first { $0.hasSuffix(".sqlite") })
        let queue = try DatabaseQueue(path: w.device("phone") + "/" + snapshot)
        try queue.write { db in try db.execute(sql: "DROP TABLE _chronicle_devices; PRAGMA user_version = 7") }
        try queue.close()
        func files() throws -> [String: Data] {
            let folder = URL(fileURLWithPath: w.device("phone"))
            var found: [String: Data] = [:]
            let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
            while let url = walker?.nextObject() as? URL {
                // The shared-memory index is SQLite's scratch space, rebuilt
                // by any reader, and an empty write-ahead log is as none.
                guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true, !url.path.hasSuffix("-shm") else { continue }
                let data = try Data(contentsOf: url)
                if url.path.hasSuffix("-wal"), data.isEmpty { continue }
                found[url.path] = data
            }
            return found
        }
        let before = try files()
        #expect(!before.isEmpty)
        #expect(try w.stateHash("phone").count == 16)
        #expect(try w.titles("phone") == ["kept"])
        let after = try files()
        #expect(after == before, "changed: \(Set(after.keys).union(before.keys).filter { after[$0] != before[$0] }.sorted())")
    }

    /// Regression: after a store was rebuilt as another, `verify` failed on
    /// a gap among the replaced store's logs (one lost before the rebuild),
    /// though damage there is reported apart and does not fail: no device
    /// reads that store any more.
    /// `init` pointed at a device folder (or any folder holding other
    /// files) by mistake refuses it: made a container, the device could no
    /// longer save or sync. Commands that read a container name the device
    /// folder for what it is, and do not suggest `init` there.
    /// Regression: with a device's logs gone from the container (a sync
    /// service that dropped the files for a while), another device's sync
    /// said it was up to date, and only `health` told of the damage. Every
    /// sync now says it, as text and as `storeDamage` in JSON, until the
    /// files are back.
    @Test func syncSaysWhatTheScrubFoundUntilItIsBack() throws {
        let w = try Workspace()
        try w.save("a", "kept")
        #expect(try w.run("sync", "a").status == 0)
        #expect(try w.run("sync", "b").status == 0)
        #expect(try w.titles("b") == ["kept"])
        // a's logs (b saved nothing): the folder of its device under the store's logs.
        let log = try #require(try FileManager.default.subpathsOfDirectory(atPath: w.container + "/blobs").first { $0.hasSuffix(".chlog") })
        let parts = log.split(separator: "/")
        let logsAt = try #require(parts.firstIndex(of: "logs"))
        let aLogs = URL(fileURLWithPath: w.container + "/blobs/" + parts[...(logsAt + 1)].joined(separator: "/"))
        let aside = w.root.appendingPathComponent("aside")
        try FileManager.default.moveItem(at: aLogs, to: aside)
        let missing = try w.run("sync", "b")
        #expect(missing.status == 0 && missing.stdout.contains("store damage: ") && missing.stdout.contains("is missing in the container"), "\(missing.stdout)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(try w.run("sync", "b", ["--json"]).stdout.utf8)) as? [String: Any])
        #expect((json["storeDamage"] as? [String])?.count == 1, "\(json)")
        try FileManager.default.moveItem(at: aside, to: aLogs)
        let back = try w.run("sync", "b")
        #expect(back.status == 0 && !back.stdout.contains("store damage"), "\(back.stdout)")
    }

    @Test func initRefusesADeviceFolderAndAFolderOfOtherFiles() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("phone", "kept")
        let refused = try CLIErrorTests.run(["init", "--container", w.device("phone")])
        #expect(refused.status == 1 && refused.stderr.contains("it is a device folder"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.device("phone") + "/blobs"))
        let verify = try CLIErrorTests.run(["verify", "--container", w.device("phone")])
        #expect(verify.status == 1 && verify.stderr.contains("it is a device folder") && !verify.stderr.contains("chronicle init"), "\(verify.stderr)")
        let other = w.root.appendingPathComponent("notes")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        try Data("hi".utf8).write(to: other.appendingPathComponent("notes.txt"))
        #expect(try CLIErrorTests.run(["init", "--container", other.path]).status == 1)
        try w.save("phone", "still saving")
        #expect(try w.titles("phone") == ["kept", "still saving"])
    }

    @Test func aGapInAReplacedStoreIsReportedApart() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        for title in ["a1", "a2"] {
            try w.save("a", title)
            #expect(try w.run("sync", "a").status == 0)
        }
        try w.save("b", "b1")
        #expect(try w.run("sync", "b").status == 0)
        let logs = try FileManager.default.subpathsOfDirectory(atPath: w.container + "/blobs").filter { $0.hasSuffix("0000000000000001-0000000000000001.chlog") }
        let device = try #require(String(data: try Data(contentsOf: URL(fileURLWithPath: w.device("a") + "/device.json")), encoding: .utf8))
        let first = try #require(logs.first { path in device.contains(path.split(separator: "/")[2]) })
        try FileManager.default.removeItem(atPath: w.container + "/blobs/" + first)
        try FileManager.default.removeItem(atPath: w.device("a"))
        let rebuilt = try CLIErrorTests.run(["store", "rebuild", "--device-dir", w.device("b"), "--container", w.container, "--schema", w.schema, "--yes"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        let verify = try CLIErrorTests.run(["verify", "--container", w.container, "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: verify.stdout) as? [String: Any])
        #expect(verify.status == 0, "\(object)")
        #expect((object["bad"] as? [Any])?.isEmpty == true, "\(object)")
        #expect((object["badInReplacedStores"] as? [[String: Any]])?.contains { ($0["code"] as? String) == "notFound" } == true, "\(object)")
    }

    /// Restore a device folder from a copy taken ten saves earlier, then
    /// save and sync on it and on two other devices: all three converge,
    /// every acknowledged save is there, and `verify` is clean.
    @Test func aDeviceFolderRestoredFromAnOlderCopy() throws {
        let w = try Workspace()
        var acknowledged: Set<String> = []
        for i in 0..<3 { try w.save("phone", "early-\(i)"); acknowledged.insert("early-\(i)") }
        #expect(try w.run("sync", "phone").status == 0)
        try FileManager.default.copyItem(atPath: w.device("phone"), toPath: w.device("phone-backup"))
        for i in 0..<10 { try w.save("phone", "late-\(i)"); acknowledged.insert("late-\(i)") }
        #expect(try w.run("sync", "phone").status == 0)
        try FileManager.default.removeItem(atPath: w.device("phone"))
        try FileManager.default.moveItem(atPath: w.device("phone-backup"), toPath: w.device("phone"))

        for (device, title) in [("phone", "after-restore"), ("laptop", "laptop"), ("tablet", "tablet")] {
            try w.save(device, title)
            acknowledged.insert(title)
        }
        let moved = try w.run("sync", "phone")
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(moved.stdout.contains("continues as device"), "\(moved.stdout)")
        for _ in 0..<2 { for d in ["phone", "laptop", "tablet"] { #expect(try w.run("sync", d).status == 0) } }
        let hashes = try Set(["phone", "laptop", "tablet"].map { try w.stateHash($0) })
        #expect(hashes.count == 1, "\(hashes)")
        for d in ["phone", "laptop", "tablet"] { #expect(try w.titles(d) == acknowledged, "\(d)") }
        let verify = try CLIErrorTests.run(["verify", "--container", w.container])
        #expect(verify.status == 0, "\(verify.stderr) \(String(decoding: verify.stdout, as: UTF8.self))")
    }

    /// Eight `save`s at once on a device folder that does not exist yet:
    /// every one is acknowledged, all under one device ID.
    @Test func concurrentFirstSavesShareOneDevice() async throws {
        let w = try Workspace()
        let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
            for i in 0..<8 {
                group.addTask {
                    let input = w.root.appendingPathComponent("input-\(i).jsonl")
                    try Data(#"{"op": "insert", "entity": "Note", "values": {"title": "n\#(i)"}}"#.utf8).write(to: input)
                    return try w.run("save", "new", ["--input", input.path]).status
                }
            }
            return try await group.reduce(into: [Int32]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 0, count: 8))
        #expect(try w.titles("new") == Set((0..<8).map { "n\($0)" }))
        #expect(try w.run("sync", "new").status == 0)
    }

    /// A second process on a device folder in use is told which process has it.
    @Test func aDeviceFolderInUseNamesItsHolder() async throws {
        let w = try Workspace()
        try w.save("phone", "first")
        // Hold the folder's lock from this process, as a running app would.
        let lock = open(w.device("phone") + "/chronicle.lock", O_RDWR)
        #expect(lock >= 0)
        defer { close(lock) }
        #expect(flock(lock, LOCK_EX | LOCK_NB) == 0)
        _ = ftruncate(lock, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(lock, $0.baseAddress, $0.count, 0) }
        let outcome = try w.run("sync", "phone")
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("deviceInUse") && outcome.stderr.contains("process \(getpid())"), "\(outcome.stderr)")
    }

    /// A save too large for any device to read is refused with a message,
    /// and the device's later saves still reach the others.
    @Test func aSaveOverTheLimitIsRefused() throws {
        let w = try Workspace()
        let input = w.root.appendingPathComponent("big.jsonl")
        let big = String(repeating: "x", count: 66 << 20)
        try Data(#"{"op": "insert", "entity": "Note", "values": {"title": "\#(big)"}}"#.utf8).write(to: input)
        let refused = try w.run("save", "phone", ["--input", input.path])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("sizeOverCap"), "\(refused.stderr)")
        try w.save("phone", "small")
        #expect(try w.run("sync", "phone").status == 0)
        #expect(try w.run("sync", "laptop").status == 0)
        #expect(try w.titles("laptop") == ["small"])
    }

    /// A device's log that vanished from the container: the devices that
    /// need it say they are waiting (exit 3); the owner's next sync puts it
    /// back, and they catch up.
    @Test func aVanishedLogIsPutBackByItsOwnersSync() throws {
        let w = try Workspace()
        for i in 0..<3 {
            try w.save("phone", "n\(i)")
            #expect(try w.run("sync", "phone").status == 0)
        }
        let logs = try FileManager.default.subpathsOfDirectory(atPath: w.container + "/blobs").filter { $0.hasSuffix(".chlog") }.sorted()
        #expect(logs.count == 3)
        try FileManager.default.removeItem(atPath: w.container + "/blobs/" + logs[0])
        let waiting = try w.run("sync", "laptop", ["--json"])
        #expect(waiting.status == 3, "\(waiting.stdout)")
        #expect(waiting.stdout.contains(#""status" : "waiting""#), "\(waiting.stdout)")
        let report = try JSONSerialization.jsonObject(with: Data(waiting.stdout.utf8)) as? [String: Any]
        let gaps = report?["waitingForLogs"] as? [[String: Any]]
        #expect(gaps?.count == 1 && gaps?.first?["expected"] as? Int == 1 && gaps?.first?["found"] as? Int == 2, "\(waiting.stdout)")
        let owner = try w.run("sync", "phone")
        #expect(owner.status == 0)
        #expect(owner.stdout.contains("put back 1 of its own"), "\(owner.stdout)")
        #expect(try w.run("sync", "laptop").status == 0)
        #expect(try w.titles("laptop") == ["n0", "n1", "n2"])
    }
}
