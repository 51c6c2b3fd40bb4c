import ChronicleContainer
import ChronicleCore
import ChronicleTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What only a directory can hold: links, FIFOs, folders at a file's name,
/// files larger than memory, temporary files of killed writers; and what
/// only a path can be: missing, empty, a link.
@Suite struct DirectoryContainerTests {
    let root = temporaryFolder("dir")
    let outside = temporaryFolder("outside")
    let store = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))
    let device = DeviceID(index: 7)

    init() throws {
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
    }

    func open() throws -> DirectoryContainer { try DirectoryContainer(root: root, create: true) }
    func path(_ relative: String) -> String { root.appendingPathComponent(relative).path }
    func log(_ first: UInt64, _ last: UInt64) -> ContainerName {
        ContainerLayout.log(store: store, device: device, first: first, last: last)
    }
    func outsideEntries() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: outside.path) }
    func expectError(_ code: ChronicleError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        await ContainerConformance.expectError(code, sourceLocation: sourceLocation, body)
    }

    // MARK: Links

    /// Regression: a link at a blob's name was followed by `get`, and a
    /// link at a folder of a name sent a device's new log outside the container.
    /// A marker file written by hand at the highest version is replaced
    /// (its version wraps to 1), not a crash on every later write.
    @Test func aMarkerAtTheHighestVersionIsReplaced() async throws {
        let container = try open()
        let name = ContainerLayout.election(store: store)
        _ = try await container.createMarker(name, Array("{}".utf8))
        let file = path("markers/\(store)/election")
        var bytes = [UInt8](repeating: 0xFF, count: 8)
        bytes += Array("{}".utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let current = try #require(try await container.readMarker(name))
        #expect(current.version == .max)
        let replaced = try await container.replaceMarker(name, Array("{\"a\":1}".utf8), expected: .max)
        #expect(replaced.version == 1)
        #expect(try await container.readMarker(name)?.bytes == Array("{\"a\":1}".utf8))
    }

    @Test func aLinkedFolderInsideTheContainerIsNeverWrittenThrough() async throws {
        let c = try open()
        try await c.put(log(1, 1), [1])
        let deviceFolder = path("blobs/" + ContainerLayout.logPrefix(store: store, device: device).dropLast())
        try FileManager.default.removeItem(atPath: deviceFolder)
        try FileManager.default.createSymbolicLink(atPath: deviceFolder, withDestinationPath: outside.path)
        await expectError(.foreignEntry) { try await c.put(log(2, 2), [2]) }
        await expectError(.foreignEntry) { _ = try await c.get(log(1, 1)) }
        await expectError(.foreignEntry) { _ = try await c.list(prefix: ContainerLayout.logPrefix(store: store, device: device), after: nil, limit: 10) }
        #expect(try outsideEntries().isEmpty, "a write went through the link")
        let foreign = try await c.foreignEntries()
        #expect(foreign == [ForeignEntry(path: "blobs/" + String(ContainerLayout.logPrefix(store: store, device: device).dropLast()),
                                         reason: .notARegularFile(.symbolicLink))])
    }

    /// Regression: a linked `markers/<store>/devices` sent device registrations outside.
    @Test func aLinkedMarkerFolderIsNeverWrittenThrough() async throws {
        let c = try open()
        try FileManager.default.createDirectory(atPath: path("markers/\(store)"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: path("markers/\(store)/devices"), withDestinationPath: outside.path)
        let registration = ContainerLayout.deviceRegistration(store: store, device: device)
        await expectError(.foreignEntry) { _ = try await c.createMarker(registration, [1]) }
        await expectError(.foreignEntry) { _ = try await c.readMarker(registration) }
        // A log's put takes the device's lock in that folder: refused too.
        await expectError(.foreignEntry) { try await c.put(log(1, 1), [1]) }
        #expect(try outsideEntries().isEmpty)
        #expect(try await c.foreignEntries().map(\.path) == ["markers/\(store)/devices"])
    }

    @Test func aLinkAtABlobOrMarkerNameIsRefusedNotFollowed() async throws {
        let c = try open()
        let secret = outside.appendingPathComponent("secret")
        try Data([42]).write(to: secret)
        try await c.put(log(1, 1), [1])
        try FileManager.default.createSymbolicLink(atPath: path("blobs/\(log(2, 2))"), withDestinationPath: secret.path)
        try FileManager.default.createSymbolicLink(atPath: path("markers/active-store"), withDestinationPath: secret.path)
        await expectError(.foreignEntry) { _ = try await c.get(log(2, 2)) }
        await expectError(.foreignEntry) { try await c.put(log(2, 2), [42]) }
        await expectError(.foreignEntry) { _ = try await c.readMarker(ContainerLayout.activeStore) }
        await expectError(.foreignEntry) { _ = try await c.replaceMarker(ContainerLayout.activeStore, [1], expected: 1) }
        // Listed, so that a reader fails loudly on it instead of skipping a sequence in silence.
        #expect(try await c.listAll(prefix: ContainerLayout.logPrefix(store: store, device: device)).map(\.name) == [log(1, 1), log(2, 2)])
        #expect(try Data(contentsOf: secret) == Data([42]))
        #expect(Set(try await c.foreignEntries().map(\.path)) == ["blobs/\(log(2, 2))", "markers/active-store"])
    }

    // MARK: FIFOs and folders

    /// Regression: a FIFO at a log's name blocked `get` forever, and
    /// listings skipped it (and a folder there) in silence.
    @Test(.timeLimit(.minutes(1)))
    func aFIFOOrFolderAtABlobNameIsATypedErrorWithoutBlocking() async throws {
        let c = try open()
        try await c.put(log(1, 1), [1])
        #expect(mkfifo(path("blobs/\(log(2, 2))"), 0o644) == 0)
        try FileManager.default.createDirectory(atPath: path("blobs/\(log(3, 3))"), withIntermediateDirectories: false)
        #expect(mkfifo(path("markers/active-store"), 0o644) == 0)
        await expectError(.foreignEntry) { _ = try await c.get(log(2, 2)) }
        await expectError(.foreignEntry) { _ = try await c.get(log(3, 3)) }
        await expectError(.foreignEntry) { _ = try await c.readMarker(ContainerLayout.activeStore) }
        await expectError(.foreignEntry) { try await c.put(log(2, 2), [2]) }
        await expectError(.foreignEntry) { try await c.put(log(3, 3), [3]) }
        #expect(try await c.listAll(prefix: "").map(\.name) == [log(1, 1), log(2, 2), log(3, 3)])
        #expect(try await c.foreignEntries() == [
            ForeignEntry(path: "blobs/\(log(2, 2))", reason: .notARegularFile(.fifo)),
            ForeignEntry(path: "blobs/\(log(3, 3))", reason: .folderAtAFileName),
            ForeignEntry(path: "markers/active-store", reason: .notARegularFile(.fifo)),
        ])
        // The owner can clear a FIFO at its log's name and put the log back.
        try await c.delete(log(2, 2))
        try await c.put(log(2, 2), [2])
        await expectError(.foreignEntry) { try await c.delete(log(3, 3)) }
    }

    @Test func foreignNamesAreReportedAndNeverListed() async throws {
        let c = try open()
        try await c.put(name("s/logs/d/a.chlog"), [1])
        try Data([9]).write(to: root.appendingPathComponent("blobs/s/logs/d/a (conflicted copy).chlog"))
        try Data([9]).write(to: root.appendingPathComponent("blobs/s/logs/d/.DS_Store"))
        #expect(try await c.listAll(prefix: "s/").map(\.name.rawValue) == ["s/logs/d/a.chlog"])
        #expect(try await c.foreignEntries().map(\.path) == ["blobs/s/logs/d/.DS_Store", "blobs/s/logs/d/a (conflicted copy).chlog"])
    }

    /// Regression: lock files of replaced markers were listed as markers.
    @Test func lockFilesAreNeitherMarkersNorForeign() async throws {
        let c = try open()
        _ = try await c.createMarker(name("s/election"), [1])
        _ = try await c.replaceMarker(name("s/election"), [2], expected: 1)
        try await c.put(log(1, 1), [1])
        #expect(FileManager.default.fileExists(atPath: path("markers/s/election.lock")))
        #expect(try await c.listMarkers(prefix: "").map(\.rawValue) == ["s/election"])
        #expect(try await c.foreignEntries().isEmpty)
        await expectError(.invalidName) { _ = try await c.createMarker(name("s/election.lock"), [1]) }
    }

    // MARK: The root

    /// Regression: opening a missing folder created it, so a mistyped or
    /// unmounted share became a separate, empty container.
    @Test func aMissingOrEmptyRootIsNotFoundUnlessCreated() async throws {
        do {
            _ = try DirectoryContainer(root: root)
            Issue.record("opened a missing folder")
        } catch {
            #expect(error.code == .notFound && error.message.contains("chronicle init"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: root.path), "the folder was created")
        // An empty folder (a mount point with nothing mounted) is no container either.
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        #expect(throws: ChronicleError.self) { try DirectoryContainer(root: root) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).isEmpty)
        let created = try DirectoryContainer(root: root, create: true)
        try await created.put(name("a"), [1])
        // Once made, it opens without `create`, even if a sync service dropped its empty tmp/.
        try FileManager.default.removeItem(atPath: path("tmp"))
        #expect(try await DirectoryContainer(root: root).get(name("a")) == [1])
    }

    /// A share unmounted under a running app leaves an empty mount point:
    /// operations fail as transient instead of filling it with a new container,
    /// and work again once the share is back.
    @Test func aShareUnmountedWhileOpenIsUnavailableNotRecreated() async throws {
        let c = try open()
        try await c.put(name("a"), [1])
        let away = temporaryFolder("away")
        try FileManager.default.moveItem(at: root, to: away)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: false)
        await expectError(.unavailable) { try await c.put(name("b"), [2]) }
        await expectError(.unavailable) { _ = try await c.get(name("a")) }
        await expectError(.unavailable) { _ = try await c.createMarker(name("m"), [1]) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).isEmpty)
        try FileManager.default.removeItem(at: root)
        try FileManager.default.moveItem(at: away, to: root)
        #expect(try await c.get(name("a")) == [1])
    }

    @Test func aLinkedRootIsRefusedUnlessAllowed() async throws {
        let real = try open()
        try await real.put(name("a"), [1])
        let link = temporaryFolder("link")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: root.path)
        do {
            _ = try DirectoryContainer(root: link)
            Issue.record("opened a linked root")
        } catch {
            #expect(error.code == .foreignEntry && error.message.contains("symbolic link"), "\(error)")
        }
        #expect(try await DirectoryContainer(root: link, rootMayBeSymlink: true).get(name("a")) == [1])
        // A linked blobs/ is refused even when the root may be a link.
        try FileManager.default.moveItem(atPath: path("blobs"), toPath: outside.appendingPathComponent("blobs").path)
        try FileManager.default.createSymbolicLink(atPath: path("blobs"), withDestinationPath: outside.appendingPathComponent("blobs").path)
        #expect(throws: ChronicleError.self) { try DirectoryContainer(root: root) }
    }

    // MARK: Bounded reads

    /// Regression: a blob was read whole before its size was checked, so a
    /// 4 GiB sparse file in a log's place allocated 4 GiB (and aborted under
    /// an address-space limit).
    @Test func aHugeSparseBlobIsRefusedWithoutAllocatingIt() async throws {
        let c = try open()
        try await c.put(log(1, 1), [1])
        let huge = path("blobs/\(log(2, 2))")
        let fd = Glibc.open(huge, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0)
        #expect(ftruncate(fd, 4 << 30) == 0)
        close(fd)
        let before = Self.residentBytes()
        let clock = ContinuousClock()
        let started = clock.now
        await expectError(.sizeOverCap) { _ = try await c.get(log(2, 2), maxBytes: DecodingLimits().maxLogBytes) }
        await expectError(.sizeOverCap) { _ = try await c.get(log(2, 2)) }
        // A put of other bytes under its name is a conflict, decided without reading it.
        await expectError(.blobConflict) { try await c.put(log(2, 2), [2]) }
        #expect(clock.now - started < .seconds(2))
        #expect(Self.residentBytes() - before < 256 << 20, "memory grew by \((Self.residentBytes() - before) >> 20) MiB")
        #expect(try await c.listAll(prefix: "").first { $0.name == log(2, 2) }?.size == 4 << 30)
    }

    /// The process's resident memory now, from /proc/self/statm.
    static func residentBytes() -> Int {
        let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    // MARK: Temporary files

    @Test func putsLeaveNoTemporaryFiles() async throws {
        let c = try open()
        for i in 0..<20 { try await c.put(name("s/\(i)"), [UInt8(i)]) }
        try? await c.put(name("s/1"), [0xFF])
        #expect(try FileManager.default.contentsOfDirectory(atPath: path("tmp")).isEmpty)
    }

    /// Regression: temporary files of killed writers stayed in tmp/ forever.
    @Test func staleTemporaryFilesOfEndedWritersAreRemovedOnOpen() async throws {
        _ = try open()
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).filter(\.isHexDigit)
        let ended = try TestProcesses.pidOfAnEndedProcess()
        let me = getpid()
        let myStart = try #require(Self.startTime(of: me))
        let hour: TimeInterval = 3600
        let files: [(name: String, age: TimeInterval, removed: Bool)] = [
            ("\(boot)-\(ended)-1-1-a.tmp", hour, true),             // writer ended, old enough
            ("\(boot)-\(ended)-1-2-a.tmp", 60, false),              // writer ended, too recent
            ("\(boot)-\(me)-\(myStart)-3-a.tmp", 2 * hour, false),  // writer alive (this process)
            ("\(boot)-\(me)-\(myStart &+ 1)-4-a.tmp", hour, true),  // this pid, another process (reused pid)
            ("\(String(repeating: "f", count: 32))-\(ended)-1-5-a.tmp", 2 * hour, false), // another machine or boot
            ("\(String(repeating: "f", count: 32))-\(ended)-1-6-a.tmp", 25 * hour, true),
            ("123-7-abc.tmp", 2 * hour, false),                     // an older version's name
            ("123-8-abc.tmp", 25 * hour, true),
        ]
        for file in files {
            let url = root.appendingPathComponent("tmp/\(file.name)")
            try Data([1]).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-file.age)], ofItemAtPath: url.path)
        }
        _ = try DirectoryContainer(root: root)
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: path("tmp")))
        for file in files {
            #expect(left.contains(file.name) == !file.removed, "\(file.name)")
        }
    }

    static func startTime(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    // MARK: Inventory and verification

    /// Overlapping logs that arrived around the put check (a sync service,
    /// a person) and foreign entries are problems for both reports.
    @Test func verificationAndInventoryReportOverlapsAndForeignEntries() async throws {
        let c = try open()
        let encoder = LogEncoder(storeID: store)
        for sequence: UInt64 in [1, 2] {
            let bytes = try encoder.encode([Transaction(deviceID: device, sequence: sequence, clock: HybridTimestamp(rawValue: sequence << 16), schemaHash: 0, changes: [])])
            try await c.put(log(sequence, sequence), bytes)
        }
        // A second log of the device for sequences 2...3, delivered past the put check.
        let folder = path("blobs/\(log(2, 3))")
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: folder))
        #expect(mkfifo(path("blobs/\(log(4, 4))"), 0o644) == 0)
        let verification = try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil))
        #expect(!verification.passed)
        #expect(verification.valid == 2, "\(verification.problems)")
        let byName = Dictionary(grouping: verification.problems, by: \.name).mapValues { $0.map(\.error.code) }
        #expect(byName[log(2, 3).rawValue]?.contains(.blobConflict) == true, "\(verification.problems)")
        #expect(byName["blobs/\(log(4, 4))"] == [.foreignEntry], "\(verification.problems)")
        #expect(byName[log(4, 4).rawValue] == nil, "a foreign entry is reported once")
        let inventory = try await ContainerInventory(of: c)
        #expect(inventory.problems.map(\.error.code).sorted { $0.name < $1.name } == [.blobConflict, .foreignEntry])
        #expect(inventory.stores["\(store)"]?.devices[device]?.logs == 4)
    }

    /// Sequences of a device that no log holds, before one that is there
    /// (a lost log; readers stop before it), are problems for both reports.
    @Test func verificationAndInventoryReportMissingSequences() async throws {
        let c = try open()
        let encoder = LogEncoder(storeID: store)
        func put(_ first: UInt64, _ last: UInt64) async throws {
            let transactions = (first...last).map { Transaction(deviceID: device, sequence: $0, clock: HybridTimestamp(rawValue: $0 << 16), schemaHash: 0, changes: []) }
            try await c.put(log(first, last), try encoder.encode(transactions))
        }
        try await put(1, 2)
        try await put(3, 4)
        #expect(try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil)).passed, "no gap yet")
        try await put(8, 9)
        try await put(10, 10)
        let verification = try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil))
        #expect(verification.valid == 4)
        #expect(verification.problems.map(\.name) == [log(8, 9).rawValue], "\(verification.problems)")
        #expect(verification.problems.first?.error.code == .notFound)
        #expect(verification.problems.first?.error.message.contains("sequences 5...7") == true, "\(verification.problems)")
        let inventory = try await ContainerInventory(of: c)
        #expect(inventory.problems.map(\.name) == [log(8, 9).rawValue])
        // A file where a shard folder belongs is no log either.
        try Data([1]).write(to: URL(fileURLWithPath: path("blobs/\(store)/logs/\(device)/stray")))
        let stray = try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil))
        #expect(stray.problems.contains { $0.name == "\(store)/logs/\(device)/stray" && $0.error.code == .foreignEntry }, "\(stray.problems)")
        try FileManager.default.removeItem(atPath: path("blobs/\(store)/logs/\(device)/stray"))
        // A device whose first log is missing: nothing of it can be imported.
        try await c.delete(log(1, 2))
        let again = try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil))
        #expect(again.problems.map(\.name) == [log(3, 4).rawValue, log(8, 9).rawValue], "\(again.problems)")
    }

    /// The markers devices read are checked: an active-store pointer that
    /// names no store, a registration that is not one, names another device
    /// or is too large to read.
    @Test func verificationChecksTheMarkersDevicesRead() async throws {
        let c = try open()
        let other = DeviceID(index: 9)
        _ = try await c.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: store))
        _ = try await c.createMarker(ContainerLayout.deviceRegistration(store: store, device: device), DeviceRegistration(device: device, incarnation: 7))
        #expect(try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil)).passed)

        func writeMarker(_ name: ContainerName, _ bytes: [UInt8]) throws {
            let file = URL(fileURLWithPath: path("markers/\(name.rawValue)"))
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data([0, 0, 0, 0, 0, 0, 0, 1] + bytes).write(to: file)
        }
        try writeMarker(ContainerLayout.activeStore, Array("not json".utf8))
        try writeMarker(ContainerLayout.deviceRegistration(store: store, device: device), try DeviceRegistration(device: other, incarnation: 1).markerBytes())
        try writeMarker(ContainerLayout.deviceRegistration(store: store, device: other), Array(repeating: 0x20, count: Marker.maxBytes + 1))
        let verification = try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil))
        let byName = Dictionary(grouping: verification.problems, by: \.name).mapValues { $0.map(\.error.code) }
        #expect(byName[ContainerLayout.activeStore.rawValue] == [.malformedBody], "\(verification.problems)")
        #expect(byName[ContainerLayout.deviceRegistration(store: store, device: device).rawValue] == [.malformedBody], "\(verification.problems)")
        #expect(byName[ContainerLayout.deviceRegistration(store: store, device: other).rawValue] == [.sizeOverCap], "\(verification.problems)")
        // The inventory (`inspect`) reports the same markers.
        let inventory = try await ContainerInventory(of: c)
        #expect(Set(inventory.problems.map(\.name)) == Set(byName.keys), "\(inventory.problems)")
        // An empty pointer is no pointer either, and does not stop the inventory.
        try writeMarker(ContainerLayout.activeStore, [])
        let empty = try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil))
        #expect(empty.problems.contains { $0.name == ContainerLayout.activeStore.rawValue }, "\(empty.problems)")
        #expect(try await ContainerInventory(of: c).problems.contains { $0.name == ContainerLayout.activeStore.rawValue })
        // A marker at a name Chronicle never writes.
        try writeMarker(try ContainerName("junk"), [1])
        #expect(try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil)).problems.contains { $0.name == "junk" && $0.error.code == .foreignEntry })
    }

    /// Entries at the container's root beside blobs/, markers/ and tmp/ (a
    /// stray file, a device folder pointed at the container) are foreign, and
    /// so is a blob that is neither a log nor a baseline part, for both reports.
    @Test func strayEntriesAreReportedByBothReports() async throws {
        let c = try open()
        try Data([1]).write(to: URL(fileURLWithPath: path("stray.txt")))
        try Data([1]).write(to: URL(fileURLWithPath: path("device.json")))
        try FileManager.default.createDirectory(atPath: path("blobs/\(store)/logs"), withIntermediateDirectories: true)
        try Data([1]).write(to: URL(fileURLWithPath: path("blobs/\(store)/logs/\(device)")))
        let foreign = try await c.foreignEntries()
        #expect(Set(foreign.filter { $0.reason == .outsideTheLayout }.map(\.path)) == ["stray.txt", "device.json"], "\(foreign)")
        for problems in [try await ContainerVerification(of: c, decoder: LogDecoder(schema: nil)).problems, try await ContainerInventory(of: c).problems] {
            #expect(problems.contains { $0.name == "stray.txt" }, "\(problems)")
            #expect(problems.contains { $0.name == "\(store)/logs/\(device)" && $0.error.code == .foreignEntry }, "\(problems)")
        }
    }
}
