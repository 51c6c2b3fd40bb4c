import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// A device's files going back in time (restored from a copy, copied to a
/// second machine, a lost or damaged snapshot) never make it write a
/// sequence number twice or lose an acknowledged save: it continues under a
/// new device ID and carries over what the container lacks.
@Suite struct DeviceIdentityTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string), Attribute("body", .string, optional: true)]),
    ])

    /// A shared container, a manual clock and device folders in a temporary directory.
    final class World: @unchecked Sendable {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-identity-\(UUID().uuidString)")
        let container: DirectoryContainer
        let clock = ManualClock()
        var seed: UInt64 = 0

        init() throws {
            container = try DirectoryContainer(root: root.appendingPathComponent("container"), create: true)
        }

        func folder(_ name: String) -> URL { root.appendingPathComponent(name) }

        func open(_ name: String, device: DeviceID? = nil, limits: DecodingLimits = DecodingLimits(),
                  baselineWait: Duration = .seconds(60)) async throws -> Store {
            seed += 1
            return try await Store.open(Store.Configuration(
                schema: DeviceIdentityTests.schema, deviceID: device, directory: folder(name), container: container,
                clock: clock, seed: seed, logger: Logger(label: "test"), durability: .normal, limits: limits)
                .waitingForBaselines(baselineWait))
        }

        /// Saves `count` notes titled `prefix-i`; returns their IDs.
        func save(_ store: Store, _ prefix: String, _ count: Int) async throws -> [RecordID] {
            var ids: [RecordID] = []
            for i in 0..<count {
                clock.advance(byMilliseconds: 3)
                ids.append(try await store.write { tx in tx.insert("Note", ["title": .string("\(prefix)-\(i)")]) })
            }
            return ids
        }

        /// Copies a closed device folder.
        func copy(_ from: String, to: String) throws {
            try FileManager.default.copyItem(at: folder(from), to: folder(to))
        }

        /// Replaces folder `name` with `backup`.
        func restore(_ name: String, from backup: String) throws {
            try FileManager.default.removeItem(at: folder(name))
            try copy(backup, to: name)
        }

        /// Every log's device and range in the container.
        func logRanges() async throws -> [DeviceID: [ClosedRange<UInt64>]] {
            var result: [DeviceID: [ClosedRange<UInt64>]] = [:]
            for blob in try await container.listAll(prefix: "") {
                guard let parsed = ContainerLayout.parseLog(blob.name) else { continue }
                result[parsed.device, default: []].append(parsed.first...parsed.last)
            }
            return result
        }
    }

    /// Three syncs on every store, then their hashes must agree, every note
    /// acknowledged must be visible everywhere, and no device may have two
    /// logs covering one sequence.
    static func expectConverged(_ world: World, _ stores: [Store], notes: [RecordID]) async throws {
        for _ in 0..<3 { for s in stores { try await s.sync() } }
        var hashes = Set<String>()
        for s in stores { hashes.insert(try await s.stateHash()) }
        #expect(hashes.count == 1, "devices hold \(hashes.count) states")
        for s in stores {
            let visible = Set(try await s.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note") })
            let missing = notes.filter { !visible.contains($0) }
            #expect(missing.isEmpty, "device \(s.deviceID) lacks \(missing.count) acknowledged notes")
        }
        for (device, ranges) in try await world.logRanges() {
            let sorted = ranges.sorted { $0.lowerBound < $1.lowerBound }
            for (a, b) in zip(sorted, sorted.dropFirst()) {
                #expect(a.upperBound < b.lowerBound, "device \(device) has overlapping logs \(a) and \(b)")
            }
        }
        // A fresh device replaying everything agrees.
        let fresh = try await world.open("fresh-\(UUID().uuidString)", baselineWait: .zero)
        _ = try await fresh.sync()
        #expect(try await fresh.stateHash() == hashes.first)
        try await fresh.close()
    }

    /// The new user's check: restore a device folder from a copy taken ten
    /// saves earlier, then save and sync on it and on two other devices.
    @Test func aFolderRestoredFromAnOlderCopyMovesToANewIDAndLosesNothing() async throws {
        let world = try World()
        var a = try await world.open("a")
        let b = try await world.open("b")
        let c = try await world.open("c")
        var notes = try await world.save(a, "a", 5)
        try await a.sync()
        try await a.close()
        try world.copy("a", to: "a-backup")
        a = try await world.open("a")
        let firstID = a.deviceID
        notes += try await world.save(a, "a-late", 10)
        try await a.sync()
        try await a.close()

        try world.restore("a", from: "a-backup")
        a = try await world.open("a")
        #expect(a.deviceID == firstID, "the restored folder names its old ID until it meets the container")
        // The restored device saves before it syncs: those saves reuse
        // sequences the container already holds for its old ID.
        notes += try await world.save(a, "a-restored", 3)
        notes += try await world.save(b, "b", 4)
        notes += try await world.save(c, "c", 4)
        let report = try await a.sync()
        let change = try #require(report.identityChange)
        #expect(change.previous == firstID)
        #expect(change.current == a.deviceID && a.deviceID != firstID)
        #expect(change.carriedOver.map(\.new) == [1, 2, 3], "the three saves made after the restore are carried over")
        #expect(change.carriedOver.map(\.old) == [6, 7, 8])
        #expect(report.imported.appliedLogs >= 2, "the old ID's later logs and the others' count as imported")
        #expect(change.importedLogs > 0)
        try await Self.expectConverged(world, [a, b, c], notes: notes)
        // The folder keeps its new ID; a reopen does not move again.
        try await a.close()
        a = try await world.open("a", device: firstID)
        #expect(a.deviceID == change.current)
        #expect(try await a.sync().identityChange == nil)
        for s in [a, b, c] { try await s.close() }
    }

    /// A device folder and the container both put back from older copies
    /// (one machine's backup): the saves made after the copies were taken
    /// are gone from both, and the restored device saves new ones under the
    /// same sequences. Another device had applied the lost saves: when it
    /// builds its copy again from the container, it saves them again, with
    /// their clocks, and every device ends up with them.
    @Test func savesOnlyAnotherDeviceStillHoldsSurviveADoubleRestore() async throws {
        let world = try World()
        var a = try await world.open("a")
        var b = try await world.open("b")
        let first = try await world.save(a, "first", 3)
        try await a.sync()
        try await b.sync()
        try await a.close()
        try world.copy("a", to: "a-backup")
        a = try await world.open("a")
        let lostDevice = a.deviceID
        // Three saves the restores will lose: an insert, an edit and a delete.
        world.clock.advance(byMilliseconds: 5)
        let lost = try await a.write { tx in tx.insert("Note", ["title": .string("only b keeps this")]) }
        world.clock.advance(byMilliseconds: 5)
        try await a.write { tx in tx.update("Note", id: first[0], ["title": .string("edited")]) }
        world.clock.advance(byMilliseconds: 5)
        try await a.write { tx in tx.delete("Note", id: first[1]) }
        try await a.sync()
        try await b.sync()
        #expect(try await b.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Note") } == 3)
        try await a.close()
        try await b.close()

        // The container loses those logs, and a's folder goes back.
        for (device, ranges) in try await world.logRanges() where device == lostDevice {
            for range in ranges where range.lowerBound > 3 {
                try await world.container.delete(ContainerLayout.log(store: a.storeID, device: device, first: range.lowerBound, last: range.upperBound))
            }
        }
        try world.restore("a", from: "a-backup")
        a = try await world.open("a")
        world.clock.advance(byMilliseconds: 5)
        let later = try await a.write { tx in tx.insert("Note", ["title": .string("after the restore")]) }
        try await a.sync()

        // b's scrub meets other saves under the names of logs it applied,
        // and its health monitor builds its copy again.
        b = try await world.open("b")
        let change = try await b.rebuildLocalCopy(reason: "the container holds other saves under names b applied")
        #expect(change.keptSaves == 3, "the insert, the edit and the delete are saved again")
        try await Self.expectConverged(world, [a, b], notes: [lost, first[0], first[2], later])
        for store in [a, b] {
            let titles = try await store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title") }
            #expect(titles == ["after the restore", "edited", "first-2", "only b keeps this"])
        }
        // Saved again once: another rebuild finds nothing missing.
        #expect(try await b.rebuildLocalCopy(reason: "again").keptSaves == 0)
        for s in [a, b] { try await s.close() }
    }

    /// Sets up a's folder and the container going back in time together
    /// after `lost` (a's second save) reached b: a saves `again` under the
    /// same sequence and uploads it. Returns the stores, open.
    func restoredTogether(_ world: World) async throws -> (a: Store, b: Store, first: RecordID, lost: RecordID, again: RecordID) {
        var a = try await world.open("a")
        let b = try await world.open("b")
        let first = try await world.save(a, "first", 1)[0]
        try await a.sync()
        try await b.sync()
        try await a.close()
        try world.copy("a", to: "a-backup")
        a = try await world.open("a")
        let device = a.deviceID
        let lost = try await world.save(a, "lost", 1)[0]
        try await a.sync()
        try await b.sync()
        try await a.close()
        for (owner, ranges) in try await world.logRanges() where owner == device {
            for range in ranges where range.upperBound > 1 {
                try await world.container.delete(ContainerLayout.log(store: b.storeID, device: owner, first: range.lowerBound, last: range.upperBound))
            }
        }
        try world.restore("a", from: "a-backup")
        a = try await world.open("a")
        let again = try await world.save(a, "again", 1)[0]
        try await a.sync()
        return (a, b, first, lost, again)
    }

    /// After such a restore, the restored device compacts: the container no
    /// longer holds any log of the sequence used twice. The other device
    /// sees from the compaction marker that it applied another save under
    /// it, builds its copy again and keeps the save it held.
    @Test func aCompactionAfterADoubleRestoreDoesNotHideTheOtherVersion() async throws {
        let world = try World()
        let (a, b, first, lost, again) = try await restoredTogether(world)
        _ = try await a.publishBaseline()
        world.clock.advance(byMilliseconds: 1_000)
        #expect(try await a.compact(retention: .seconds(3_600)).removedLogs > 0)
        let moved = try await b.sync()
        #expect(moved.identityChange != nil, "b's copy went apart from the container's history")
        try await Self.expectConverged(world, [a, b], notes: [first, lost, again])
        for s in [a, b] { try await s.close() }
    }

    /// The same, compacted by the other device, whose baseline holds the
    /// version it applied: the restored device sees from the marker that
    /// the compacted history holds another save than its own under that
    /// sequence, and moves to a new ID carrying its save.
    @Test func aCompactionOfTheOtherVersionMovesTheRestoredDeviceAndKeepsItsSave() async throws {
        let world = try World()
        let (a, b, first, lost, again) = try await restoredTogether(world)
        _ = try await b.publishBaseline()
        world.clock.advance(byMilliseconds: 1_000)
        #expect(try await b.compact(retention: .seconds(3_600)).removedLogs > 0)
        let moved = try await a.sync()
        #expect(moved.identityChange != nil, "a's save is not the one the compacted history holds")
        try await Self.expectConverged(world, [a, b], notes: [first, lost, again])
        for s in [a, b] { try await s.close() }
    }

    /// Two live copies of one folder: the copy that uploads second is
    /// refused by the container, moves to a new ID, and carries its saves.
    @Test func aCopiedFolderRunningBesideTheOriginalNeverReusesASequence() async throws {
        let world = try World()
        var a = try await world.open("a")
        var notes = try await world.save(a, "a", 3)
        try await a.sync()
        try await a.close()
        try world.copy("a", to: "twin")
        a = try await world.open("a")
        let twin = try await world.open("twin")
        #expect(a.deviceID == twin.deviceID)
        notes += try await world.save(a, "a-after", 2)
        notes += try await world.save(twin, "twin-after", 3)
        #expect(try await a.sync().identityChange == nil)
        let moved = try #require(try await twin.sync().identityChange)
        #expect(moved.carriedOver.count == 3)
        #expect(twin.deviceID != a.deviceID)
        try await Self.expectConverged(world, [a, twin], notes: notes)
        for s in [a, twin] { try await s.close() }
    }

    /// Two live copies of one folder, where the original first imports the
    /// copy's logs of their shared ID, then saves again while the copy
    /// uploads the same next sequence: the original moves to a new ID and
    /// carries every save it made, around the sequences it only imported.
    @Test func aCopyWhoseLogsTheOriginalImportedStillLosesNothing() async throws {
        let world = try World()
        var a = try await world.open("a")
        var notes = try await world.save(a, "a", 3)
        try await a.sync()
        try await a.close()
        try world.copy("a", to: "twin")
        a = try await world.open("a")
        let twin = try await world.open("twin")
        // The original checks its history before the copy uploads anything.
        try await a.sync()
        notes += try await world.save(twin, "twin", 2)
        try await twin.sync()
        // The original takes the copy's sequences 4 and 5 as its own past.
        try await a.sync()
        notes += try await world.save(a, "a-after", 2)
        notes += try await world.save(twin, "twin-after", 1)
        try await twin.sync()
        let moved = try #require(try await a.sync().identityChange)
        #expect(moved.carriedOver.map(\.old) == [6, 7], "the original's two saves after the import are carried")
        #expect(a.deviceID != twin.deviceID)
        try await Self.expectConverged(world, [a, twin], notes: notes)
        for s in [a, twin] { try await s.close() }
    }

    /// A folder whose copy of its store is gone (the store was deleted on
    /// purpose and the device left it) does not put that store back when
    /// the container lost everything, the marks of the deletion included:
    /// `device.json` still names the store, but only a copy counts.
    @Test func aFolderWithoutACopyOfItsStoreDoesNotPutItBack() async throws {
        let world = try World()
        var a = try await world.open("a")
        _ = try await world.save(a, "a", 2)
        try await a.sync()
        let old = a.storeID
        let path = a.snapshot.path
        try await a.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try StoreManagerTests.empty(container: world.root.appendingPathComponent("container"))
        a = try await world.open("a")
        #expect(a.storeID != old, "the store \(old) came back from device.json alone")
        try await a.close()
    }

    /// A log of the shared ID that a copy of the folder uploaded, which a
    /// third device applied, is then damaged beyond a torn or rotted copy
    /// of the original's own bytes. The original does not replace it with
    /// its own saves (the third device would never see them): it moves to
    /// a new ID, and every device converges.
    @Test func aDamagedLogOfACopyIsNotReplacedWithOtherSaves() async throws {
        let world = try World()
        var a = try await world.open("a")
        var notes = try await world.save(a, "a", 3)
        try await a.sync()
        try await a.close()
        try world.copy("a", to: "twin")
        a = try await world.open("a")
        let twin = try await world.open("twin")
        let c = try await world.open("c")
        try await a.sync()
        notes += try await world.save(twin, "twin", 2)
        try await twin.sync()
        try await c.sync()
        #expect(try await c.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note")! } == 5, "c applied the copy's log")
        // The copy's log 4-5 is damaged in the container: every byte after its header changed.
        let name = ContainerLayout.log(store: a.storeID, device: a.deviceID, first: 4, last: 5)
        let path = world.root.appendingPathComponent("container/blobs").appendingPathComponent(name.rawValue)
        var bytes = try [UInt8](Data(contentsOf: path))
        for i in 16..<bytes.count { bytes[i] ^= 0x5A }
        try Data(bytes).write(to: path)
        notes += try await world.save(a, "a-after", 2)
        let moved = try #require(try await a.sync().identityChange, "the original moves instead of replacing the copy's log")
        #expect(moved.carriedOver.map(\.old) == [4, 5])
        // The copy puts its own log back, and everyone converges.
        _ = try await twin.sync()
        try await Self.expectConverged(world, [a, twin, c], notes: notes)
        for s in [a, twin, c] { try await s.close() }
    }

    /// A snapshot that lost its `-wal` (here: the main file copied while the
    /// store was open, so it holds none of what the WAL held) is behind the
    /// container for its ID.
    @Test func aSnapshotThatLostItsWALMovesToANewID() async throws {
        let world = try World()
        let a = try await world.open("a")
        var notes = try await world.save(a, "a", 4)
        try await a.sync()
        // Copy the folder without the WAL while the store is open: as if the
        // machine lost the -wal file.
        let lost = world.folder("lost")
        try FileManager.default.createDirectory(at: lost, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: world.folder("a").path)
        where !name.hasSuffix("-wal") && !name.hasSuffix("-shm") && name != "chronicle.lock" {
            try FileManager.default.copyItem(at: world.folder("a").appendingPathComponent(name), to: lost.appendingPathComponent(name))
        }
        notes += try await world.save(a, "a-more", 2)
        try await a.close()
        let restored = try await world.open("lost")
        notes += try await world.save(restored, "lost", 2)
        let change = try #require(try await restored.sync().identityChange)
        #expect(change.carriedOver.count == 2)
        let reopened = try await world.open("a")
        try await Self.expectConverged(world, [reopened, restored], notes: notes)
        for s in [reopened, restored] { try await s.close() }
    }

    /// A deleted snapshot (device.json kept) starts afresh under a new ID;
    /// a damaged one is moved to retired/ first.
    @Test func aDeletedOrDamagedSnapshotStartsUnderANewID() async throws {
        let world = try World()
        var a = try await world.open("a")
        let notes = try await world.save(a, "a", 3)
        try await a.sync()
        let storeID = a.storeID
        let first = a.deviceID
        try await a.close()
        let path = world.folder("a").appendingPathComponent("\(storeID).sqlite").path
        try FileManager.default.removeItem(atPath: path)
        a = try await world.open("a")
        #expect(a.deviceID == first)
        let change = try #require(try await a.sync().identityChange, "a fresh snapshot must not reuse the ID's sequences")
        #expect(change.carriedOver.isEmpty)
        _ = try await world.save(a, "again", 1)
        try await a.sync()
        try await a.close()

        // Damage the snapshot's header and cut it short: SQLite reports it
        // is not a database.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 1000)
        try handle.seek(toOffset: 0)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 100))
        try handle.close()
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        a = try await world.open("a")
        #expect(a.deviceID != change.current, "a damaged snapshot is not reused")
        let retired = try FileManager.default.contentsOfDirectory(atPath: world.folder("a").appendingPathComponent("retired").path)
        #expect(retired.contains { $0.contains("damaged") })
        try await Self.expectConverged(world, [a], notes: notes)
        try await a.close()
    }

    /// A torn copy of the device's own log at the name it uploads to (a put
    /// cut short before a crash, a sync service's partial copy) is its own
    /// log damaged, not another device's history: it is replaced, and the
    /// device keeps its ID.
    @Test func aTornCopyOfAnOwnLogIsReplacedNotTakenForAnotherDevice() async throws {
        let world = try World()
        // The device dies right after its put; then the stored copy turns
        // out cut short.
        let crash = try await Store.open(Store.Configuration(
            schema: Self.schema, directory: world.folder("a"), container: world.container, clock: world.clock, seed: 7,
            logger: Logger(label: "test"), durability: .normal)
            .crashing(with: CrashInjector { $0 == .uploadAfterPut }))
        let notes = try await world.save(crash, "a", 1)
        let died = await #expect(throws: ChronicleError.self) { try await crash.sync() }
        #expect(died?.code == .simulatedCrash)
        let id = crash.deviceID
        try await crash.close()
        let name = ContainerLayout.log(store: crash.storeID, device: id, first: 1, last: 1)
        let path = world.root.appendingPathComponent("container/blobs/\(name.rawValue)").path
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 40)
        try handle.close()

        let a = try await world.open("a")
        let b = try await world.open("b")
        let report = try await a.sync()
        #expect(report.identityChange == nil)
        #expect(a.deviceID == id)
        #expect(report.uploadedLogs == 1)
        try await Self.expectConverged(world, [a, b], notes: notes)
        for s in [a, b] { try await s.close() }
    }

    /// A whole, valid log copied over one of a device's logs (another
    /// device's log, or another of its own) is damage at that name, not
    /// another copy of the owner's files saving again: the owner puts its
    /// log back and keeps its ID, and a device that applied the log finds it
    /// damaged, not replaced.
    @Test(arguments: ["another device's log", "another of its own logs"])
    func aValidLogCopiedOverAnOwnLogIsPutBack(copied: String) async throws {
        let world = try World()
        let a = try await world.open("a")
        let b = try await world.open("b")
        var notes = try await world.save(a, "a", 1)
        try await a.sync()
        notes += try await world.save(a, "a2", 1)
        try await a.sync()
        notes += try await world.save(b, "b", 1)
        try await b.sync()
        try await a.sync()
        let id = a.deviceID
        let over = ContainerLayout.log(store: a.storeID, device: id, first: 1, last: 1)
        let source = copied == "another device's log"
            ? ContainerLayout.log(store: b.storeID, device: b.deviceID, first: 1, last: 1)
            : ContainerLayout.log(store: a.storeID, device: id, first: 2, last: 2)
        let bytes = try await world.container.get(source)
        try await world.container.delete(over)
        try await world.container.put(over, bytes)

        let findings = try await b.scrub(recheck: [over.rawValue], bytes: 1 << 30)
        #expect(findings.damaged.contains(over), "\(findings)")
        #expect(!findings.replaced.contains(over))
        let report = try await a.sync()
        #expect(report.identityChange == nil)
        #expect(a.deviceID == id)
        #expect(report.repairedLogs.contains(over))
        try await Self.expectConverged(world, [a, b], notes: notes)
        for s in [a, b] { try await s.close() }
    }

    /// After a move, the device still holds the bodies of the logs its old ID
    /// uploaded, and puts them back if the container loses them: nobody
    /// else can.
    @Test func aMovedDevicePutsBackItsOldIDsLogs() async throws {
        let world = try World()
        var a = try await world.open("a")
        let b = try await world.open("b")
        var notes = try await world.save(a, "a", 2)
        try await a.sync()
        try await a.close()
        try world.copy("a", to: "a-backup")
        a = try await world.open("a")
        notes += try await world.save(a, "later", 2)
        try await a.sync()
        let old = a.deviceID
        try await a.close()
        try world.restore("a", from: "a-backup")
        a = try await world.open("a")
        #expect(try await a.sync().identityChange?.previous == old)
        let oldLogs = try await world.container.listAll(prefix: ContainerLayout.logPrefix(store: a.storeID, device: old))
        let first = try #require(oldLogs.first)
        try await world.container.delete(first.name)
        let repaired = try await a.sync().repairedLogs
        #expect(repaired.contains(first.name), "\(repaired)")
        try await Self.expectConverged(world, [a, b], notes: notes)
        for s in [a, b] { try await s.close() }
    }

    /// The logs the old ID uploaded after the copy was taken are held by the
    /// container alone once the folder is restored (the files forgot them).
    /// The moved device keeps their bodies too: after a wipe of those logs,
    /// it puts them back, and a device that never saw them still gets them.
    @Test func aMovedDevicePutsBackTheLogsItsFilesForgot() async throws {
        let world = try World()
        var a = try await world.open("a")
        var notes = try await world.save(a, "a", 2)
        try await a.sync()
        try await a.close()
        try world.copy("a", to: "a-backup")
        a = try await world.open("a")
        notes += try await world.save(a, "forgotten", 3)
        try await a.sync()
        let old = a.deviceID
        try await a.close()
        try world.restore("a", from: "a-backup")
        a = try await world.open("a")
        #expect(try await a.sync().identityChange?.previous == old)
        // The old ID's logs newer than the copy: the container alone held them.
        let oldLogs = try await world.container.listAll(prefix: ContainerLayout.logPrefix(store: a.storeID, device: old))
        let forgotten = oldLogs.filter { (ContainerLayout.parseLog($0.name)?.first ?? 0) > 2 }
        #expect(!forgotten.isEmpty)
        for blob in forgotten { try await world.container.delete(blob.name) }
        let repaired = try await a.sync().repairedLogs
        #expect(Set(repaired).isSuperset(of: forgotten.map(\.name)), "\(repaired)")
        // A device that never saw those logs gets them from the container.
        let b = try await world.open("b")
        try await Self.expectConverged(world, [a, b], notes: notes)
        for s in [a, b] { try await s.close() }
    }

    /// A folder that lost its device.json keeps its ID (the snapshot names
    /// it); a container that lost its active-store pointer is joined, not
    /// replaced by an empty store.
    @Test func lostDeviceFileAndLostStorePointerLoseNothing() async throws {
        let world = try World()
        var a = try await world.open("a")
        let notes = try await world.save(a, "a", 2)
        try await a.sync()
        let id = a.deviceID
        let store = a.storeID
        try await a.close()
        try FileManager.default.removeItem(at: world.folder("a").appendingPathComponent("device.json"))
        try FileManager.default.removeItem(at: world.root.appendingPathComponent("container/markers/active-store"))
        a = try await world.open("a")
        #expect(a.deviceID == id)
        #expect(a.storeID == store)
        let newcomer = try await world.open("new")
        #expect(newcomer.storeID == store, "a new device joins the store the container holds")
        try await Self.expectConverged(world, [a, newcomer], notes: notes)
        for s in [a, newcomer] { try await s.close() }
    }

    /// A repair that cannot be done (a folder where one of the device's own
    /// logs belongs) is reported, and the sync still imports the others.
    @Test func aFailedRepairDoesNotStopImports() async throws {
        let world = try World()
        let a = try await world.open("a")
        let b = try await world.open("b")
        _ = try await world.save(a, "a", 1)
        try await a.sync()
        let name = ContainerLayout.log(store: a.storeID, device: a.deviceID, first: 1, last: 1)
        let path = world.root.appendingPathComponent("container/blobs/\(name.rawValue)")
        try FileManager.default.removeItem(at: path)
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: false)
        let fromB = try await world.save(b, "b", 1)
        try await b.sync()
        let report = try await a.sync()
        #expect(report.status == .failed)
        #expect(report.imported.failures.contains { $0.error.code == .foreignEntry })
        #expect(report.imported.appliedLogs == 1)
        #expect(try await a.values(of: "Note", id: fromB[0]) != nil)
        for s in [a, b] { try await s.close() }
    }

    /// One process per device folder, and a new folder opened many times at
    /// once still gets one device ID.
    /// The container's own folder is refused as a device folder: the
    /// device's files would sit among what every device syncs.
    @Test func theContainerIsNotADeviceFolder() async throws {
        let world = try World()
        let error = await #expect(throws: ChronicleError.self) {
            _ = try await Store.open(Store.Configuration(
                schema: Self.schema, directory: world.root.appendingPathComponent("container"), container: world.container,
                clock: world.clock, seed: 1, logger: Logger(label: "test"), durability: .normal))
        }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("not a device folder") == true, "\(error?.message ?? "")")
        let root = try FileManager.default.contentsOfDirectory(atPath: world.root.appendingPathComponent("container").path)
        #expect(Set(root) == ["blobs", "markers", "tmp"], "nothing written into the container: \(root)")
        // Nor is any folder inside it, however deep, and nothing is created there.
        for inside in ["container/blobs/device", "container/markers/a/b", "container/elsewhere"] {
            let error = await #expect(throws: ChronicleError.self) {
                _ = try await Store.open(Store.Configuration(
                    schema: Self.schema, directory: world.root.appendingPathComponent(inside), container: world.container,
                    clock: world.clock, seed: 1, logger: Logger(label: "test"), durability: .normal))
            }
            #expect(error?.code == .invalidValue && error?.message.contains("inside the container") == true, "\(inside): \(String(describing: error))")
            #expect(!FileManager.default.fileExists(atPath: world.root.appendingPathComponent(inside).path), "\(inside) was created")
        }
    }

    @Test func aDeviceFolderIsHeldByOneStoreAtATime() async throws {
        let world = try World()
        let a = try await world.open("a")
        let second = await #expect(throws: ChronicleError.self) { _ = try await world.open("a") }
        #expect(second?.code == .deviceInUse)
        try await a.close()
        let again = try await world.open("a")
        try await again.close()

        // Eight concurrent first opens of a new folder, each waiting its turn.
        let ids = try await withThrowingTaskGroup(of: DeviceID.self) { group in
            for i in 0..<8 {
                group.addTask {
                    let store = try await Store.open(Store.Configuration(
                        schema: Self.schema, directory: world.folder("new"), container: world.container, seed: UInt64(100 + i),
                        logger: Logger(label: "test"), durability: .normal, lockWait: .seconds(30)))
                    _ = try await store.write { tx in tx.insert("Note", ["title": "x"]) }
                    let id = store.deviceID
                    try await store.close()
                    return id
                }
            }
            return try await group.reduce(into: Set<DeviceID>()) { $0.insert($1) }
        }
        #expect(ids.count == 1)
    }

    /// A save whose log no device would read is refused, nothing is saved,
    /// and the saves after it upload.
    @Test func aSaveOverTheReadersLimitIsRefused() async throws {
        let world = try World()
        let limits = DecodingLimits(maxBodyBytes: 64 * 1024)
        let a = try await world.open("a", limits: limits)
        let b = try await world.open("b", limits: limits)
        let big = String(repeating: "x", count: 70 * 1024)
        let refused = await #expect(throws: ChronicleError.self) {
            _ = try await a.write { tx in tx.insert("Note", ["title": "big", "body": .string(big)]) }
        }
        #expect(refused?.code == .sizeOverCap)
        #expect(try await a.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Note") } == 0)
        // Many saves just under the limit still upload, in logs readers accept.
        let fits = String(repeating: "y", count: 20 * 1024)
        var notes: [RecordID] = []
        for _ in 0..<8 { notes.append(try await a.write { tx in tx.insert("Note", ["title": "ok", "body": .string(fits)]) }) }
        try await Self.expectConverged(world, [a, b], notes: notes)
        for s in [a, b] { try await s.close() }
    }

    /// The owner puts back its own logs that vanished from, or were damaged
    /// in, the container, as part of an ordinary sync; the devices waiting
    /// on them then catch up.
    @Test func syncPutsBackOwnLogsThatAreMissingOrDamaged() async throws {
        let world = try World()
        let a = try await world.open("a")
        let b = try await world.open("b")
        var notes: [RecordID] = []
        for round in 0..<3 {
            notes += try await world.save(a, "a\(round)", 1)
            try await a.sync()
        }
        let logs = try await world.container.listAll(prefix: ContainerLayout.logPrefix(store: a.storeID, device: a.deviceID))
        #expect(logs.count == 3)
        try await world.container.delete(logs[0].name)
        let second = world.root.appendingPathComponent("container/blobs/\(logs[1].name.rawValue)")
        var bytes = try Data(contentsOf: second)
        bytes[bytes.count - 1] ^= 0x40
        try bytes.write(to: second)

        let waiting = try await b.sync()
        #expect(waiting.status == .waiting, "b waits for a's first log")
        let repair = try await a.sync()
        #expect(Set(repair.repairedLogs) == Set([logs[0].name, logs[1].name]))
        let caught = try await b.sync()
        #expect(caught.status == .upToDate)
        #expect(caught.imported.appliedLogs == 3)
        try await Self.expectConverged(world, [a, b], notes: notes)
        for s in [a, b] { try await s.close() }
    }

    /// Two copies of one folder that cut the same saves into different logs
    /// can leave both cuts in a synced folder (each copy checked only what
    /// had reached it): `1-2` and `1-4`. A device that applied `1-2` takes
    /// the rest of `1-4` instead of waiting at sequence 3 for good.
    @Test func aLogThatOverlapsWhatWasAppliedFillsTheGapAfterIt() async throws {
        let world = try World()
        let a = try await world.open("a")
        let c = try await world.open("c")
        var notes = try await world.save(a, "a", 2)
        try await a.sync()
        try await c.sync()
        notes += try await world.save(a, "a-more", 2)
        try await a.sync()
        notes += try await world.save(a, "a-last", 1)
        try await a.sync()
        let store = a.storeID, device = a.deviceID
        let bodies = try #require(try a.snapshot.outboxTransactions(first: 1, last: 4))
        let straddling = try LogEncoder(storeID: store).encode(bodies: bodies, device: device, schemaHash: a.snapshot.schema.hash)
        try await a.close()
        // The other cut replaces 3-4, written in place as a sync service would.
        try await world.container.delete(ContainerLayout.log(store: store, device: device, first: 3, last: 4))
        let name = ContainerLayout.log(store: store, device: device, first: 1, last: 4)
        try Data(straddling).write(to: world.root.appendingPathComponent("container/blobs/\(name.rawValue)"))

        let report = try await c.sync()
        #expect(report.imported.gaps.isEmpty, "\(report.imported.gaps)")
        #expect(try c.snapshot.vector()[device] == 5)
        let visible = Set(try await c.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note") })
        #expect(visible == Set(notes))
        try await c.close()
    }

    /// The last log of a device is lost for good after other devices
    /// applied it (its owner gone, or its copy put back and lost again): no
    /// later log shows the gap. A device that had not imported it yet
    /// learns of it from the other devices' applied reports, reports the
    /// gap at the end of that device's history, and fills it from a
    /// baseline that covers it.
    @Test func aLostLastLogOthersAppliedIsAGapFilledFromABaseline() async throws {
        let world = try World()
        let x = try await world.open("x")
        let y = try await world.open("y")
        let z = try await world.open("z", baselineWait: .zero)
        let fromY = try await world.save(y, "y", 1)
        try await y.sync()
        try await z.sync()
        let fromX = try await world.save(x, "x", 1)
        try await x.sync()
        // y applies x's log and says so in its applied report.
        try await y.sync()
        let (store, device) = (x.storeID, x.deviceID)
        try await x.close()
        try await world.container.delete(ContainerLayout.log(store: store, device: device, first: 1, last: 1))

        // No baseline covers it yet: the gap shows, at the end of x's
        // history, once z reads the reports again (at the interval at
        // which devices refresh them).
        world.clock.advance(byMilliseconds: 600_001)
        let waiting = try await z.sync()
        let gap = try #require(waiting.imported.gaps.first { $0.device == device })
        #expect(gap.atEnd && gap.expected == 1 && gap.found == 2, "\(gap)")
        // A baseline of y's, which holds x's save, fills it.
        _ = try await y.publishBaseline()
        world.clock.advance(byMilliseconds: 5)
        let filled = try await z.sync()
        #expect(filled.imported.gaps.isEmpty, "\(filled.imported.gaps)")
        #expect(try z.snapshot.vector()[device] == 1)
        let visible = Set(try await z.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note") })
        #expect(visible == Set(fromY + fromX))
        #expect(try await z.stateHash() == y.stateHash())
        try await y.close()
        try await z.close()
    }

    /// A copy of a folder saves twice and publishes a baseline (its saves
    /// 2 and 3 of the shared ID in it; their log is then lost); a new device
    /// starts from that baseline. The original then saves 2, 3 and 4 of the same ID and
    /// uploads them as one log: the new device, at sequence 3 of that ID,
    /// lists nothing after it. A scrub finds the log that overlaps what it
    /// applied and applies it whole: the original's saves merge in.
    @Test func aLogOverlappingWhatABaselineGaveIsFoundByTheScrubAndAppliedWhole() async throws {
        let world = try World()
        var a = try await world.open("a")
        var notes = try await world.save(a, "a", 1)
        try await a.sync()
        try await a.close()
        try world.copy("a", to: "twin")
        a = try await world.open("a")
        let twin = try await world.open("twin")
        notes += try await world.save(twin, "twin", 2)
        _ = try await twin.publishBaseline()
        let joiner = try await world.open("joiner", baselineWait: .zero)
        try await joiner.sync()
        let id = a.deviceID
        #expect(try joiner.snapshot.vector()[id] == 3, "the joiner started from the copy's baseline")
        // The copy's own log of those saves is lost: only the baseline holds them.
        try await world.container.delete(ContainerLayout.log(store: a.storeID, device: id, first: 2, last: 3))
        notes += try await world.save(a, "a-later", 3)
        try await a.sync()
        #expect(try await world.logRanges()[id]?.contains(2...4) == true)
        try await joiner.sync()
        let findings = try await joiner.scrub(recheck: [])
        #expect(findings.straddling.map { ContainerLayout.parseLog($0).map { $0.first...$0.last } } == [2...4])
        #expect(try await joiner.applyStraddling(findings.straddling) == 1)
        let visible = Set(try await joiner.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note") })
        #expect(visible == Set(notes), "every save of both copies")
        for s in [a, twin, joiner] { try await s.close() }
    }

    /// The original's log `1-4` never arrived; a copy of its folder then put
    /// its own cut of the same first saves (`1-2`), and the original its
    /// `5-5`. The original moves to a new ID; it puts back the part of its
    /// lost log that the copy's does not hold (`3-4`), so that a device that
    /// applied `1-2` reaches `5-5`.
    @Test func aMovedDevicePutsBackThePartOfALostLogThatACopysLogDoesNotHold() async throws {
        let world = try World()
        var a = try await world.open("a")
        var notes = try await world.save(a, "a", 2)
        try await a.close()
        try world.copy("a", to: "twin")
        a = try await world.open("a")
        let c = try await world.open("c")
        notes += try await world.save(a, "a-more", 2)
        try await a.sync()
        let store = a.storeID, old = a.deviceID
        try await world.container.delete(ContainerLayout.log(store: store, device: old, first: 1, last: 4))
        let twin = try await world.open("twin")
        try await twin.sync()
        #expect(try await world.logRanges()[old] == [1...2], "the copy put its own cut")
        try await c.sync()
        notes += try await world.save(a, "a-last", 1)
        try await a.sync()
        #expect(a.deviceID != old, "the original moved")
        #expect(Set(try await world.logRanges()[old] ?? []) == [1...2, 3...4, 5...5])
        let report = try await c.sync()
        #expect(report.imported.gaps.isEmpty, "\(report.imported.gaps)")
        #expect(try c.snapshot.vector()[old] == 5)
        try await Self.expectConverged(world, [a, twin, c], notes: notes)
        for s in [a, twin, c] { try await s.close() }
    }

    /// As above, but the copy's `1-2` holds another save 2 than the
    /// original's: the original's `5-5` then reaches no device under the old
    /// ID (they wait at sequence 3). The original carries every save from
    /// the first one the old ID's logs cannot deliver, `5` included, with
    /// its clock and changes as made.
    @Test func aMovedDeviceCarriesItsSavesAfterTheFirstOneOthersCannotReach() async throws {
        let world = try World()
        var a = try await world.open("a")
        var notes = try await world.save(a, "a", 1)
        try await a.close()
        try world.copy("a", to: "twin")
        a = try await world.open("a")
        let c = try await world.open("c")
        notes += try await world.save(a, "a-more", 3)
        try await a.sync()
        let store = a.storeID, old = a.deviceID
        try await world.container.delete(ContainerLayout.log(store: store, device: old, first: 1, last: 4))
        let twin = try await world.open("twin")
        notes += try await world.save(twin, "twin", 1)
        try await twin.sync()
        try await c.sync()
        notes += try await world.save(a, "a-last", 1)
        try await a.sync()
        let moved = try #require(await a.identityChanges.last)
        #expect(moved.previous == old)
        #expect(moved.carriedOver.map(\.old) == [2, 3, 4, 5], "saves carried as they were made, the unreachable 5 included")
        #expect(moved.keptSaves == 0)
        try await Self.expectConverged(world, [a, twin, c], notes: notes)
        for s in [a, twin, c] { try await s.close() }
    }

    /// A device never re-applies its own baseline, and an incomplete newest
    /// baseline is waited for only so long, then passed over.
    @Test func baselinesOwnAndIncomplete() async throws {
        let world = try World()
        let a = try await world.open("a")
        var notes = try await world.save(a, "a", 20)
        try await a.publishBaseline(partBytes: 1024)
        let own = try await a.sync()
        #expect(own.imported.baseline == nil, "its own baseline is not applied to the device that made it")
        #expect(own.status == .upToDate)

        // A second baseline whose last part never arrives.
        notes += try await world.save(a, "b", 5)
        let published = try await a.publishBaseline(partBytes: 1024)
        let parts = try await world.container.listAll(prefix: published.prefix)
        try await world.container.delete(parts[parts.count - 1].name)

        let fresh = try await world.open("fresh", baselineWait: .seconds(30))
        let early = try await fresh.sync()
        #expect(early.status == .waiting)
        #expect(early.imported.waitingForBaseline != nil)
        #expect(early.imported.failures.isEmpty)
        world.clock.advance(byMilliseconds: 31_000)
        let late = try await fresh.sync()
        #expect(late.status == .upToDate, "\(late.imported.failures.map(\.error))")
        #expect(late.imported.passedOverBaselines.count == 1)
        #expect(late.imported.baseline != nil, "the older, complete baseline is used")
        try await Self.expectConverged(world, [a, fresh], notes: notes)
        for s in [a, fresh] { try await s.close() }
    }
}
