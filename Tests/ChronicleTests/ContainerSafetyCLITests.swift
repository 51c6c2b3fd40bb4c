import ChronicleTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A hostile or careless user at the container folder, driven through the
/// `chronicle` binary: links, FIFOs and folders where logs belong, a huge
/// sparse file, a missing registration, a copied device folder, an unmounted
/// share, temporary files of killed writers. Each ends in a typed error and
/// exit code 1 (or in the right data), never a write outside the folder, a
/// hang, an unbounded allocation or a silent skip.
///
/// The containers here are made as plain folders (`blobs/`, `markers/`,
/// `tmp/`), as any version of the tool accepts them.
@Suite(.serialized, .enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct ContainerSafetyCLITests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-cli-safety-\(UUID().uuidString)")
    var container: String { root.appendingPathComponent("container").path }
    var outside: URL { root.appendingPathComponent("outside") }

    struct Outcome {
        var status: Int32?  // nil: killed at the time limit
        var output: String  // standard output, then standard error
        var seconds: Double
    }

    init() throws {
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        for sub in ["blobs", "markers", "tmp"] {
            try FileManager.default.createDirectory(atPath: container + "/" + sub, withIntermediateDirectories: true)
        }
        try Data(CrashSafetyTests.schemaJSON.utf8).write(to: root.appendingPathComponent("schema.json"))
    }

    /// Runs `chronicle`, killing it after `limit` seconds; `shellPrefix`
    /// runs first in a shell (`ulimit -v …`).
    func run(_ arguments: [String], input: String = "", limit: Double = 120, shellPrefix: String? = nil) throws -> Outcome {
        let run = try CLIErrorTests.run(arguments, input: input, timeLimitSeconds: limit, shellPrefix: shellPrefix)
        return Outcome(status: run.signaled ? nil : run.status, output: String(decoding: run.stdout, as: UTF8.self) + run.stderr, seconds: run.seconds)
    }

    func device(_ name: String) -> [String] {
        ["--device-dir", root.appendingPathComponent(name).path, "--container", container,
         "--schema", root.appendingPathComponent("schema.json").path]
    }

    /// Saves a note with `title` on device `name`, then syncs it.
    func saveAndSync(_ name: String, _ title: String, sync: Bool = true) throws {
        let saved = try run(["save"] + device(name), input: #"{"op": "insert", "entity": "Note", "values": {"title": "\#(title)"}}"#)
        #expect(saved.status == 0, "\(saved.output)")
        if sync {
            let synced = try run(["sync"] + device(name))
            #expect(synced.status == 0, "\(synced.output)")
        }
    }

    func notes(on name: String) throws -> Int {
        let outcome = try run(["query", "--json", "--device-dir", root.appendingPathComponent(name).path, "SELECT count(*) AS n FROM Note"])
        let rows = try JSONSerialization.jsonObject(with: Data(outcome.output.utf8)) as? [[String: Any]]
        return rows?.first?["n"] as? Int ?? -1
    }

    func store() throws -> String {
        let folders = try FileManager.default.contentsOfDirectory(atPath: container + "/blobs")
        return try #require(folders.first)
    }

    func deviceID(_ name: String) throws -> String {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent("\(name)/device.json"))) as? [String: Any]
        return try #require(json?["device"] as? String).lowercased()
    }

    /// The paths of the log files under the container, sorted.
    func logFiles() -> [String] {
        let blobs = container + "/blobs"
        let all = (FileManager.default.enumerator(atPath: blobs)?.allObjects as? [String]) ?? []
        return all.filter { $0.hasSuffix(".chlog") }.map { blobs + "/" + $0 }.sorted()
    }

    func cleanUp() { try? FileManager.default.removeItem(at: root) }

    // MARK: Links

    /// Regression: a link at a device's log folder sent its new log outside
    /// the container (sync exit 0), `verify` said "0 valid log(s)" and exit 0,
    /// and a linked `markers/<store>/devices` sent registrations outside.
    @Test func linksInsideTheContainerAreRefusedNeverFollowed() throws {
        defer { cleanUp() }
        try saveAndSync("a", "first")
        let store = try store()
        #expect(try run(["sync"] + device("b")).status == 0)
        let b = try deviceID("b")
        let linked = outside.appendingPathComponent("logs")
        try FileManager.default.createDirectory(at: linked, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: "\(container)/blobs/\(store)/logs/\(b)", withDestinationPath: linked.path)
        try saveAndSync("b", "second", sync: false)
        let synced = try run(["sync"] + device("b"))
        #expect(synced.status == 1 && synced.output.contains("foreignEntry"), "\(synced.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: linked.path).isEmpty, "a log was written through the link")
        let verified = try run(["verify", "--container", container])
        #expect(verified.status == 1 && verified.output.contains("blobs/\(store)/logs/\(b)"), "\(verified.output)")

        // Registrations: the devices folder replaced by a link to a copy of it.
        let registrations = outside.appendingPathComponent("devices")
        try FileManager.default.moveItem(atPath: "\(container)/markers/\(store)/devices", toPath: registrations.path)
        try FileManager.default.createSymbolicLink(atPath: "\(container)/markers/\(store)/devices", withDestinationPath: registrations.path)
        let before = try FileManager.default.contentsOfDirectory(atPath: registrations.path).sorted()
        let c = try run(["sync"] + device("c"))
        #expect(c.status == 1 && c.output.contains("foreignEntry"), "\(c.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: registrations.path).sorted() == before, "a registration was written through the link")
        let inspected = try run(["inspect", "--container", container])
        #expect(inspected.status == 1 && inspected.output.contains("markers/\(store)/devices"), "\(inspected.output)")
    }

    // MARK: The container folder

    /// Regression: `sync --container /not-mounted/share` made a new, empty
    /// container there and exited 0.
    @Test func aMissingOrEmptyContainerFolderIsAnError() throws {
        defer { cleanUp() }
        let missing = root.appendingPathComponent("not-mounted/share").path
        let args = ["--device-dir", root.appendingPathComponent("a").path, "--schema", root.appendingPathComponent("schema.json").path]
        let outcome = try run(["sync", "--container", missing] + args)
        #expect(outcome.status == 1 && outcome.output.contains("notFound: no container at"), "\(outcome.output)")
        #expect(!FileManager.default.fileExists(atPath: missing), "sync created the container folder")
        // A mount point with nothing mounted: an empty folder.
        let empty = root.appendingPathComponent("mountpoint").path
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let onEmpty = try run(["sync", "--container", empty] + args)
        #expect(onEmpty.status == 1 && onEmpty.output.contains("chronicle init"), "\(onEmpty.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("a").path), "a device folder was left behind")
        // Made on purpose, it works.
        #expect(try run(["init", "--container", missing]).status == 0)
        #expect(try run(["sync", "--container", missing] + args).status == 0)
    }

    // MARK: FIFOs and folders

    /// Regression: a FIFO or a folder at a log's name made `verify` exit 0,
    /// sync only reported "waiting", and `dump` on the FIFO blocked forever.
    @Test(arguments: ["fifo", "folder"])
    func aFIFOOrFolderAtALogsNameIsAnError(kind: String) throws {
        defer { cleanUp() }
        try saveAndSync("a", "first")
        try saveAndSync("a", "second")
        let logs = logFiles()
        try #require(logs.count == 2)
        try FileManager.default.removeItem(atPath: logs[0])
        if kind == "fifo" {
            #expect(mkfifo(logs[0], 0o644) == 0)
        } else {
            try FileManager.default.createDirectory(atPath: logs[0], withIntermediateDirectories: false)
        }
        let name = String(logs[0].dropFirst(container.count + "/blobs/".count))
        let synced = try run(["sync"] + device("b"))
        #expect(synced.status == 1 && synced.output.contains("foreignEntry"), "\(synced.output)")
        let verified = try run(["verify", "--container", container])
        #expect(verified.status == 1 && verified.output.contains(name), "\(verified.output)")
        let dumped = try run(["dump", "--container", container, "--name", name], limit: 20)
        #expect(dumped.status == 1 && dumped.output.contains("foreignEntry"), "dump: \(dumped.status.map(String.init) ?? "killed after 20 s") \(dumped.output)")
    }

    // MARK: Registrations

    /// Regression: a device whose registration marker was missing had its
    /// logs ignored by every other device.
    @Test func logsOfADeviceWithoutARegistrationAreImported() throws {
        defer { cleanUp() }
        try saveAndSync("a", "first")
        let registration = "\(container)/markers/\(try store())/devices/\(try deviceID("a"))"
        try FileManager.default.removeItem(atPath: registration)
        #expect(try run(["sync"] + device("b")).status == 0)
        #expect(try notes(on: "b") == 1)
    }

    // MARK: Bounded reads

    /// Regression: a 4 GiB sparse file in a log's place was read whole before
    /// its size was checked: a new device's sync allocated 4 GiB, and under
    /// a 3 GiB address-space limit it aborted.
    @Test func aHugeSparseFileInALogsPlaceIsRefusedWithinAnAddressSpaceLimit() throws {
        defer { cleanUp() }
        try saveAndSync("a", "first")
        let log = try #require(logFiles().first)
        try FileManager.default.removeItem(atPath: log)
        let fd = open(log, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0 && ftruncate(fd, 4 << 30) == 0)
        close(fd)
        let limit = "ulimit -v \(3 << 20)"  // KiB: 3 GiB of address space
        let synced = try run(["sync"] + device("b"), limit: 60, shellPrefix: limit)
        #expect(synced.status == 1 && synced.output.contains("sizeOverCap"), "\(synced.status.map(String.init) ?? "killed") \(synced.output)")
        #expect(synced.seconds < 10, "took \(synced.seconds) s")
        let verified = try run(["verify", "--container", container], limit: 60, shellPrefix: limit)
        #expect(verified.status == 1 && verified.output.contains("sizeOverCap"), "\(verified.output)")
    }

    // MARK: Temporary files

    /// Regression: temporary files of killed processes stayed in `tmp/` for ever.
    @Test func temporaryFilesOfKilledWritersAreRemoved() throws {
        defer { cleanUp() }
        let ended = try TestProcesses.pidOfAnEndedProcess()
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).filter(\.isHexDigit)
        let files: [(String, TimeInterval)] = [("\(ended)-3-9f.tmp", 2 * 86_400), ("\(boot)-\(ended)-1-1-9f.tmp", 3_600)]
        for (name, age) in files {
            let path = "\(container)/tmp/\(name)"
            try Data(count: 100).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-age)], ofItemAtPath: path)
        }
        try saveAndSync("a", "first")
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(container)/tmp").isEmpty)
    }

    // MARK: One log per sequence

    /// Regression: two devices holding one device ID (a copied device
    /// folder) stored logs `2-2` and `2-3` side by side, for readers to mix.
    @Test func aCopiedDeviceFolderCannotStoreOverlappingLogs() throws {
        defer { cleanUp() }
        try saveAndSync("a", "first")
        try FileManager.default.copyItem(at: root.appendingPathComponent("a"), to: root.appendingPathComponent("copy"))
        try saveAndSync("a", "second")
        try saveAndSync("copy", "other second", sync: false)
        try saveAndSync("copy", "other third", sync: false)
        // The container refuses the copy's log 2-3 beside the original's
        // 2-2; the copy then moves to a new device ID and carries its two
        // saves over, so no sequence of one ID is ever stored twice.
        let synced = try run(["sync"] + device("copy"))
        #expect(synced.status == 0 && synced.output.contains("continues as device"), "\(synced.output)")
        let logs = logFiles()
        let byDevice = Dictionary(grouping: logs) { $0.split(separator: "/").dropLast(2).last.map(String.init) ?? "" }
        #expect(byDevice.count == 2, "\(logs)")
        #expect(byDevice.values.map { $0.map { String($0.suffix(39)) }.sorted() }.sorted { $0.count > $1.count } == [
            ["0000000000000001-0000000000000001.chlog", "0000000000000002-0000000000000002.chlog"],
            ["0000000000000001-0000000000000002.chlog"],
        ], "\(logs)")
        #expect(try run(["verify", "--container", container]).status == 0)
        #expect(try run(["sync"] + device("b")).status == 0)
        #expect(try notes(on: "b") == 4)
    }
}
