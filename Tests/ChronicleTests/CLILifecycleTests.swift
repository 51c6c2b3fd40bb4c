import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `chronicle cloud` and `chronicle store` on device folders, as a user
/// runs them.
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLILifecycleTests {
    typealias Workspace = CLIDataSafetyTests.Workspace

    /// `chronicle cloud|store <sub> --device-dir ... <extra>`.
    static func run(_ w: Workspace, _ command: String, _ device: String, _ sub: String, _ extra: [String] = []) throws -> (status: Int32, stdout: String, stderr: String) {
        let outcome = try CLIErrorTests.run([command, sub, "--device-dir", w.device(device), "--container", w.container, "--schema", w.schema] + extra)
        return (outcome.status, String(decoding: outcome.stdout, as: UTF8.self), "\(outcome.stderr)")
    }

    static func object(_ text: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
    }

    /// Two devices turn the cloud on at once, each with local data; both
    /// save; one turns the cloud off; the other deletes the cloud store
    /// everywhere. Every acknowledged save is where the docs say, and
    /// `cloud status` says which store is loaded.
    @Test func enableTogetherSaveDisableAndDeleteEverywhere() async throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        for d in ["a", "b"] {
            #expect(try Self.run(w, "cloud", d, "disable").status == 0)
            try w.save(d, "\(d) local")
        }
        let started = try await withThrowingTaskGroup(of: Int32.self) { group in
            for d in ["a", "b"] { group.addTask { try Self.run(w, "cloud", d, "enable").status } }
            return try await group.reduce(into: [Int32]()) { $0.append($1) }
        }
        #expect(started == [0, 0])
        try w.save("a", "a cloud")
        try w.save("b", "b cloud")
        for d in ["a", "b", "a", "b"] { #expect(try w.run("sync", d).status == 0) }
        #expect(try w.titles("a") == ["a local", "b local", "a cloud", "b cloud"])
        #expect(try w.stateHash("a") == (try w.stateHash("b")))

        try w.save("a", "a unsynced")
        #expect(try Self.run(w, "cloud", "a", "disable").status == 0)
        #expect(try w.titles("a") == ["a local"], "the local store as a left it")
        try w.save("b", "b unsynced")
        let refused = try Self.run(w, "store", "b", "delete-cloud")
        #expect(refused.status == 2 && refused.stderr.contains("--yes"), "\(refused.stderr)")
        #expect(try Self.run(w, "store", "b", "delete-cloud", ["--yes"]).status == 0)
        let b = try Self.object(try Self.run(w, "cloud", "b", "status", ["--json"]).stdout)
        #expect(b["cloudEnabled"] as? Bool == false && b["loaded"] as? String == "local")
        let deleted = try #require(b["cloudStoreDeleted"] as? [String: Any], "the status says the cloud store was deleted")
        #expect(deleted["carriedToLocal"] as? Int == 1, "\(deleted)")
        let text = try Self.run(w, "cloud", "b", "status").stdout
        #expect(text.contains("was deleted everywhere") && text.contains("carried into its local store"), "\(text)")
        #expect(try w.titles("b") == ["b local", "b unsynced"], "b's unsynced save is carried to its local store")
        // a, with the cloud off, is told that the store its waiting save belongs to is gone, and where that save goes.
        let aOff = try Self.run(w, "cloud", "a", "status")
        #expect(aOff.stdout.contains("deleted that store everywhere") && aOff.stdout.contains("go to the local store when the cloud is turned on"),
                "\(aOff.stdout)")
        let aOffJSON = try Self.object(try Self.run(w, "cloud", "a", "status", ["--json"]).stdout)
        #expect((aOffJSON["cloudCopyDeleted"] as? [String: Any])?["store"] as? String != nil, "\(aOffJSON)")
        // inspect says what became of the store.
        let inspected = try Self.object(String(decoding: try CLIErrorTests.run(["inspect", "--container", w.container, "--json"]).stdout, as: UTF8.self))
        let states = (inspected["stores"] as? [String: [String: Any]] ?? [:]).values.compactMap { $0["state"] as? String }
        #expect(states.contains("deleted"), "\(states)")

        // a turns the cloud on again: its unsynced save comes out of the deleted store, into a new one.
        #expect(try Self.run(w, "cloud", "a", "enable").status == 0)
        let a = try Self.object(try Self.run(w, "cloud", "a", "status", ["--json"]).stdout)
        #expect(a["cloudEnabled"] as? Bool == true && a["loaded"] as? String == "cloud")
        #expect(try w.run("sync", "a").status == 0)
        #expect(try w.titles("a") == ["a local", "a unsynced"])
        // b's local store never syncs.
        let sync = try w.run("sync", "b", ["--json"])
        let synced = try Self.object(sync.stdout)
        #expect(sync.status == 0)
        #expect(synced["status"] as? String == "cloudOff")
    }

    @Test func rebuildAndMigrateFromTheCommandLine() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("a", "one")
        try w.save("b", "two")
        for d in ["a", "b", "a"] { #expect(try w.run("sync", d).status == 0) }
        let before = try Self.object(try Self.run(w, "cloud", "a", "status", ["--json"]).stdout)["store"] as? String
        #expect(try Self.run(w, "store", "a", "rebuild").status == 2, "needs --yes")
        #expect(try Self.run(w, "store", "a", "rebuild", ["--yes"]).status == 0)
        let after = try Self.object(try Self.run(w, "cloud", "a", "status", ["--json"]).stdout)["store"] as? String
        #expect(before != nil && after != nil && before != after)
        for d in ["b", "a", "b"] { _ = try w.run("sync", d) }
        #expect(try Self.object(try Self.run(w, "cloud", "b", "status", ["--json"]).stdout)["store"] as? String == after, "b moved")
        #expect(try w.titles("b") == ["one", "two"])

        #expect(try Self.run(w, "store", "b", "migrate-to-local").status == 0)
        #expect(try w.titles("b") == ["one", "two"], "now in b's local store")
        let status = try Self.object(try Self.run(w, "cloud", "b", "status", ["--json"]).stdout)
        #expect(status["loaded"] as? String == "local")
        #expect(try Self.run(w, "store", "b", "delete-local", ["--yes"]).status == 0)
        #expect(try w.titles("b").isEmpty)

        // The rebuilt store's logs start after what its baseline holds: that
        // is no gap for `verify` and `inspect`.
        for title in ["three", "four"] {
            try w.save("a", title)
            #expect(try w.run("sync", "a").status == 0)
        }
        for command in ["verify", "inspect"] {
            let run = try CLIErrorTests.run([command, "--container", w.container])
            #expect(run.status == 0, "\(command): \(String(decoding: run.stdout, as: UTF8.self)) \(run.stderr)")
        }
        // A log missing after them is one.
        let logs = try FileManager.default.subpathsOfDirectory(atPath: w.container + "/blobs")
            .filter { $0.hasPrefix(after! + "/logs/") && $0.hasSuffix(".chlog") }.sorted()
        #expect(logs.count >= 2, "\(logs)")
        try FileManager.default.removeItem(atPath: w.container + "/blobs/" + logs[logs.count - 2])
        let verify = try CLIErrorTests.run(["verify", "--container", w.container])
        #expect(verify.status == 1 && String(decoding: verify.stdout, as: UTF8.self).contains("stop before the gap"),
                "\(String(decoding: verify.stdout, as: UTF8.self)) \(verify.stderr)")
    }

    /// `store delete-container` deletes every store of the container and
    /// says which; the other device falls back at its next sync with its
    /// unsynced save. `health` takes the timings `sync` runs with.
    @Test func deleteContainerDeletesEveryStoreAndSaysWhich() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("a", "a1")
        #expect(try w.run("sync", "a").status == 0)
        #expect(try w.run("sync", "b").status == 0)
        try w.save("b", "b unsynced")
        let refused = try Self.run(w, "store", "a", "delete-container")
        #expect(refused.status == 2 && refused.stderr.contains("--yes"), "\(refused.stderr)")
        let deleted = try Self.run(w, "store", "a", "delete-container", ["--yes", "--json"])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        let object = try Self.object(deleted.stdout)
        #expect((object["deletedStores"] as? [String])?.count == 1 && object["loaded"] as? String == "local", "\(object)")
        #expect(try w.run("sync", "b").status == 0)
        #expect(try w.titles("b") == ["b unsynced"], "b's unsynced save is carried to its local store")
        let health = try w.run("health", "b", ["--repair-wait", "5", "--grace-period", "1"])
        #expect(health.status == 0, "\(health.stderr)")
        // A negative timing is out of range, not a missing value.
        let negative = try w.run("health", "b", ["--grace-period", "-1"])
        #expect(negative.status == 2 && negative.stderr.contains("--grace-period is -1"), "\(negative.stderr)")
    }

    @Test func cloudDisableOnANewFolderMakesNoCloudStore() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        #expect(try Self.run(w, "cloud", "a", "disable").status == 0)
        let inspected = try CLIErrorTests.run(["inspect", "--container", w.container, "--json"])
        let object = try Self.object(String(decoding: inspected.stdout, as: UTF8.self))
        #expect(object["activeStore"] is NSNull, "no store was created in the container: \(object)")
    }

    /// Regression: `cloud status` on a folder that did not exist made the
    /// folder, the container's account token and a first, empty cloud store.
    @Test func cloudStatusOfAMissingFolderIsAnErrorAndMakesNothing() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        let status = try Self.run(w, "cloud", "nowhere", "status")
        #expect(status.status == 1 && status.stderr.contains("notFound: no device folder at"), "\(status.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.device("nowhere")))
        let inspected = try Self.object(String(decoding: try CLIErrorTests.run(["inspect", "--container", w.container, "--json"]).stdout, as: UTF8.self))
        // Only the account marker `init` writes.
        #expect(inspected["activeStore"] is NSNull && (inspected["markers"] as? [String]) == ["account"], "\(inspected)")
    }

    /// Regression: `compact` and `baseline` with a mistyped --device-dir made
    /// a new device folder and answered as that device (a compaction that
    /// waited for "this device"). They now refuse, and make nothing.
    @Test(arguments: ["compact", "baseline"])
    func compactAndBaselineOfAMissingFolderAreAnErrorAndMakeNothing(command: String) throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        let outcome = try CLIErrorTests.run([command, "--device-dir", w.device("typo"), "--container", w.container, "--schema", w.schema])
        #expect(outcome.status == 1 && "\(outcome.stderr)".contains("notFound: no device folder at"), "\(outcome.stderr)")
        #expect(!FileManager.default.fileExists(atPath: w.device("typo")))
    }

    /// Regression: two first devices on copies of one container (a sync
    /// service's replicas, before either synced) each wrote an account
    /// marker; the service kept one, and the other device's saves went
    /// under an account that never comes back. `init` writes the marker, so
    /// every copy of the folder has it from the start.
    @Test func devicesOnCopiesOfANewContainerAgreeOnTheAccount() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        let marker = URL(fileURLWithPath: w.container).appendingPathComponent("markers/account")
        #expect(FileManager.default.fileExists(atPath: marker.path), "init wrote the account marker")
        let before = try Data(contentsOf: marker)
        #expect(try CLIErrorTests.run(["init", "--container", w.container]).status == 0)
        #expect(try Data(contentsOf: marker) == before, "running init again keeps it")
        // Two replicas of the new container, a first device on each, merged back.
        let replica = w.root.appendingPathComponent("replica").path
        try FileManager.default.copyItem(atPath: w.container, toPath: replica)
        try w.save("a", "a1")
        #expect(try w.run("sync", "a").status == 0)
        let b = try CLIErrorTests.run(["save", "--device-dir", w.device("b"), "--container", replica, "--schema", w.schema],
                                      input: #"{"op":"insert","entity":"Note","values":{"title":"b1"}}"# + "\n")
        #expect(b.status == 0, "\(b.stderr)")
        #expect(try CLIErrorTests.run(["sync", "--device-dir", w.device("b"), "--container", replica, "--schema", w.schema]).status == 0)
        // The sync service copies replica files the main one lacks (the account marker is the same file).
        try copyMissingFiles(from: URL(fileURLWithPath: replica), into: URL(fileURLWithPath: w.container))
        for d in ["b", "a", "b", "a"] { #expect(try w.run("sync", d).status == 0) }
        #expect(try w.titles("a") == (try w.titles("b")), "both devices on one account and one store")
        let titles = try w.titles("a")
        #expect(titles == ["a1", "b1"], "\(titles)")
    }

    /// Regression: a FIFO where the device's snapshot belongs blocked
    /// `sync`, `health` and `cloud status` for good (SQLite's open waits for
    /// a writer that never comes). Each now says what is there, at once.
    @Test func aFIFOWhereTheSnapshotBelongsIsATypedErrorWithoutBlocking() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("a", "one")
        let folder = URL(fileURLWithPath: w.device("a"))
        let snapshot = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasSuffix(".sqlite") })
        let path = folder.appendingPathComponent(snapshot).path
        try FileManager.default.removeItem(atPath: path)
        #expect(mkfifo(path, 0o600) == 0)
        for arguments in [["sync"], ["health"], ["cloud", "status"]] {
            let run = try CLIErrorTests.run(arguments + ["--device-dir", w.device("a"), "--container", w.container, "--schema", w.schema],
                                            timeLimitSeconds: 20)
            #expect(!run.signaled && run.status == 1, "\(arguments): \(run.stderr)")
            #expect(run.stderr.contains("foreignEntry") && run.stderr.contains("is not a regular file"), "\(arguments): \(run.stderr)")
        }
    }

    /// Regression: with the snapshot moved elsewhere and linked back, `save`
    /// and `sync` went through the link while `query` and `state-hash`
    /// refused it as "not a regular file". Readers and writers now agree:
    /// a link to a regular file is followed; anything else is refused.
    @Test func aSnapshotLinkedFromElsewhereIsReadAndWrittenAlike() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("a", "one")
        #expect(try w.run("sync", "a").status == 0)
        let folder = URL(fileURLWithPath: w.device("a"))
        let snapshot = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasSuffix(".sqlite") })
        let path = folder.appendingPathComponent(snapshot).path
        let elsewhere = w.root.appendingPathComponent("elsewhere.sqlite").path
        try FileManager.default.moveItem(atPath: path, toPath: elsewhere)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.moveItem(atPath: path + suffix, toPath: elsewhere + suffix)
        }
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: elsewhere)
        try w.save("a", "two")
        #expect(try w.titles("a") == ["one", "two"])
        let hash = try CLIErrorTests.run(["state-hash", "--device-dir", w.device("a")])
        #expect(hash.status == 0, "\(hash.stderr)")
    }

    /// Regression: `query` printed the escape character and bidirectional
    /// overrides of a title as they were, so a record could rewrite the
    /// user's terminal. They print as `\u{hex}`.
    @Test func queryTextEscapesWhatATerminalWouldActOn() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("a", #"x\u001b[31my\u202ez"#)
        let run = try CLIErrorTests.run(["query", "--device-dir", w.device("a"), "SELECT title FROM Note"])
        let text = String(decoding: run.stdout, as: UTF8.self)
        #expect(run.status == 0)
        #expect(!text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E }, "\(text.debugDescription)")
        #expect(text.contains(#"x\u{1b}[31my\u{202e}z"#), "\(text.debugDescription)")
        #expect(try w.titles("a") == ["x\u{1b}[31my\u{202e}z"], "--json keeps the value as it is")
    }

    @Test func inspectListsTheBlobNamesDumpTakes() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("a", "one")
        #expect(try w.run("sync", "a").status == 0)
        let inspected = try CLIErrorTests.run(["inspect", "--container", w.container, "--logs", "--json"])
        let blobs = try Self.object(String(decoding: inspected.stdout, as: UTF8.self))["blobs"] as? [[String: Any]] ?? []
        let name = try #require(blobs.compactMap { $0["name"] as? String }.first { $0.hasSuffix(".chlog") })
        let dumped = try CLIErrorTests.run(["dump", "--container", w.container, "--name", name])
        #expect(dumped.status == 0, "\(dumped.stderr)")
        #expect(String(decoding: dumped.stdout, as: UTF8.self).contains("one"))
    }

    /// Real processes as devices, killed and restarted at random, turning
    /// the cloud off and on while the first one deletes the cloud store
    /// everywhere half-way: every journaled save that did not go with the
    /// deleted store is on every device, which all converge.
    @Test func processesTogglingTheCloudAndDeletingItLoseNothing() throws {
        let run = try CLIErrorTests.run(["simulate", "--processes", "3", "--lifecycle", "--saves", "40", "--seed", "7", "--json"])
        #expect(run.status == 0, "\(String(decoding: run.stdout, as: UTF8.self)) \(run.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any])
        let result = try #require((report["results"] as? [[String: Any]])?.first)
        let details = try #require(result["details"] as? [String: Any])
        #expect(result["passed"] as? Bool == true, "\(result)")
        #expect(details["deletedStores"] as? Int == 1, "the first device deletes the cloud store once: \(details)")
        #expect((details["savesDeletedWithTheirStore"] as? Int ?? -1) >= 0)
        #expect((details["acknowledged"] as? Int ?? 0) > 0)
    }

    /// Real processes as devices on a PostgreSQL container, the processes
    /// and the server itself killed with SIGKILL mid-run and restarted:
    /// every journaled save is on every device, the devices converge, and
    /// every log in the container verifies.
    @Test func processesOnAPostgreSQLServerKilledMidRunLoseNothing() throws {
        let run = try CLIErrorTests.run(["simulate", "--processes", "3", "--postgres", "--saves", "80", "--seed", "11", "--json"])
        #expect(run.status == 0, "\(String(decoding: run.stdout, as: UTF8.self)) \(run.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any])
        let result = try #require((report["results"] as? [[String: Any]])?.first)
        let details = try #require(result["details"] as? [String: Any])
        #expect(result["passed"] as? Bool == true, "\(result)")
        #expect((details["serverKills"] as? Int ?? 0) >= 1, "the server was killed mid-run: \(details)")
        #expect((details["kills"] as? Int ?? 0) >= 1)
        #expect((details["acknowledged"] as? Int ?? 0) > 0)
    }
}

/// The health monitor through the CLI, as a user meets it: a log nobody
/// can repair, one rebuild, every device on the new store with every save.
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLIHealthTests {
    typealias Workspace = CLIDataSafetyTests.Workspace
    static let quick = ["--grace-period", "0", "--repair-wait", "0"]

    /// Damages every log of `device` in the container and removes its
    /// folder, so that nobody can put them back. Returns its store and
    /// the number of logs damaged.
    static func damageLogsAndRemove(_ device: String, in w: Workspace) throws -> (store: String, damaged: Int) {
        let status = try CLILifecycleTests.object(try CLILifecycleTests.run(w, "cloud", device, "status", ["--json"]).stdout)
        let id = try #require(status["device"] as? String)
        let store = try #require(status["store"] as? String)
        let logs = URL(fileURLWithPath: w.container).appendingPathComponent("blobs/\(store)/logs/\(id)")
        var damaged = 0
        for case let url as URL in FileManager.default.enumerator(at: logs, includingPropertiesForKeys: nil)! where url.pathExtension == "chlog" {
            var bytes = try [UInt8](Data(contentsOf: url))
            bytes[bytes.count / 2 + 8] ^= 0x5A
            try Data(bytes).write(to: url)
            damaged += 1
        }
        #expect(damaged > 0)
        try FileManager.default.removeItem(atPath: w.device(device))
        return (store, damaged)
    }

    /// On a synced folder (the deterministic rule), every sync its own
    /// process and the election window a second: a device's candidacy
    /// outlives the process that made it, one device rebuilds, and nothing
    /// is lost.
    @Test func onASyncedFolderSeparateRunsElectOneDeviceAcrossTheWindow() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        let flags = Self.quick + ["--synced-folder", "--election-window", "1", "--lease", "4", "--gap-timeout", "0"]
        try w.save("c", "c0")
        #expect(try w.run("sync", "c", flags).status == 0)
        try w.save("a", "a1")
        try w.save("b", "b1")
        #expect(try w.run("sync", "b", flags).status == 0)
        #expect(try w.run("sync", "a", flags).status == 0)
        #expect(try w.titles("a") == ["a1", "b1", "c0"])
        let (store, _) = try Self.damageLogsAndRemove("b", in: w)
        try w.save("c", "c1")
        var rounds = 0
        while rounds < 30 {
            rounds += 1
            for d in ["a", "c"] { _ = try w.run("sync", d, flags) }
            let a = try CLILifecycleTests.object(try w.run("health", "a", ["--json", "--synced-folder"]).stdout)
            let c = try CLILifecycleTests.object(try w.run("health", "c", ["--json", "--synced-folder"]).stdout)
            if a["status"] as? String == "healthy", c["status"] as? String == "healthy", let s = a["store"] as? String, s != store, c["store"] as? String == s {
                break
            }
            Thread.sleep(forTimeInterval: 0.5)
        }
        #expect(rounds < 30, "the devices did not end healthy on a rebuilt store")
        for d in ["a", "c"] {
            #expect(try w.titles(d) == ["a1", "b1", "c0", "c1"], "every acknowledged save on \(d)")
            let h = try CLILifecycleTests.object(try w.run("health", d, ["--json", "--synced-folder"]).stdout)
            #expect((h["history"] as? [Any])?.count == 1, "one rebuild: \(h)")
        }
        #expect(try w.stateHash("a") == (try w.stateHash("c")))
    }

    @Test func aDamagedLogWhoseOwnerIsGoneIsRebuiltOnceAndNothingIsLost() throws {
        let w = try Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("c", "c0")
        #expect(try w.run("sync", "c", Self.quick).status == 0)
        try w.save("a", "a1")
        try w.save("b", "b1")
        try w.save("b", "b2")
        #expect(try w.run("sync", "b", Self.quick).status == 0)
        #expect(try w.run("sync", "a", Self.quick).status == 0)
        #expect(try w.titles("a") == ["a1", "b1", "b2", "c0"], "a imported everything")

        // b's logs are damaged and b's folder is gone: nobody can put them back.
        let (store, damaged) = try Self.damageLogsAndRemove("b", in: w)
        try w.save("c", "c1")

        // c cannot import b's log, builds its copy again, fails again, marks the store.
        let marked = try w.run("sync", "c", Self.quick)
        #expect(marked.status == 1, "\(marked.stdout)\(marked.stderr)")
        #expect(marked.stdout.contains("marked store \(store) corrupted"), "\(marked.stdout)")
        let waiting = try w.run("sync", "c", Self.quick)
        #expect(waiting.status == 3 && waiting.stdout.contains("waits for a healthy device to rebuild it"), "\(waiting.stdout)\(waiting.stderr)")
        let cHealth = try w.run("health", "c", ["--json"])
        #expect(cHealth.status == 0, "\(cHealth.stderr)")
        let ch = try CLILifecycleTests.object(cHealth.stdout)
        #expect(ch["status"] as? String == "corrupted")
        #expect((ch["marks"] as? [Any])?.count == 1)

        // a is healthy: it sees the mark, takes the lease, rebuilds.
        let rebuilt = try w.run("sync", "a", Self.quick)
        #expect(rebuilt.status == 0, "\(rebuilt.stdout)\(rebuilt.stderr)")
        #expect(rebuilt.stdout.contains("elected to rebuild the corrupted store \(store)"), "\(rebuilt.stdout)")
        #expect(rebuilt.stdout.contains("rebuilt store \(store) as store"), "\(rebuilt.stdout)")
        let moved = try w.run("sync", "c", Self.quick)
        #expect(moved.status == 0, "\(moved.stdout)\(moved.stderr)")
        #expect(moved.stdout.contains("moved from store \(store)"), "\(moved.stdout)")
        for d in ["a", "c", "a", "c"] { #expect(try w.run("sync", d, Self.quick).status == 0) }
        for d in ["a", "c"] {
            #expect(try w.titles(d) == ["a1", "b1", "b2", "c0", "c1"], "every acknowledged save on \(d)")
            let h = try CLILifecycleTests.object(try w.run("health", d, ["--json"]).stdout)
            #expect(h["status"] as? String == "healthy", "\(h)")
            let history = try #require(h["history"] as? [[String: Any]])
            #expect(history.count == 1 && history.first?["from"] as? String == store, "one rebuild: \(history)")
            #expect((history.first?["reason"] as? String)?.contains("reported") == true)
        }
        #expect(try w.stateHash("a") == (try w.stateHash("c")))
        let text = try w.run("health", "a").stdout
        #expect(text.contains("healthy on store") && text.contains("rebuilt: store \(store) became store"), "\(text)")
        // The old store's damaged logs are named apart by verify, which passes.
        let verify = try CLIErrorTests.run(["verify", "--container", w.container, "--json"])
        #expect(verify.status == 0, "\(String(decoding: verify.stdout, as: UTF8.self))")
        let verified = try CLILifecycleTests.object(String(decoding: verify.stdout, as: UTF8.self))
        #expect((verified["badInReplacedStores"] as? [Any])?.count == damaged, "\(verified)")
        #expect((verified["bad"] as? [Any])?.isEmpty == true)
        // b, restored as a new device, joins the new store with everything.
        #expect(try w.run("sync", "b", Self.quick).status == 0)
        #expect(try w.titles("b") == ["a1", "b1", "b2", "c0", "c1"])
    }
}
