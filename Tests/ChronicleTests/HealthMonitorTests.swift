@testable import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// The health monitor: a log nobody can repair is detected, the store is
/// marked, one healthy device rebuilds it, and every device moves to the
/// new store with nothing lost.
@Suite struct HealthMonitorTests {
    static let schema = StoreManagerTests.schema
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-health-\(UUID().uuidString)")
    var containerURL: URL { root.appendingPathComponent("container") }
    let clock = ManualClock()
    static let health = StoreManager.HealthConfiguration(gracePeriod: .seconds(1), repairWait: .seconds(2), gapTimeout: .seconds(30),
                                                         electionWindow: .seconds(1), leaseDuration: .seconds(10),
                                                         unhealthyRebuildWait: .seconds(10))

    /// A manager on folder `device`. Its randomness (record IDs) is seeded
    /// from the folder's first letter unless `seed` is given: a process that
    /// opens a copy of a folder draws other IDs than the original did.
    func manager(_ device: String, reliable: Bool = true, health: StoreManager.HealthConfiguration = Self.health,
                 seed: UInt64? = nil) async throws -> StoreManager {
        let configuration = Store.Configuration(
            schema: Self.schema, directory: root.appendingPathComponent(device),
            container: try DirectoryContainer(root: containerURL, create: true, reliableExclusiveCreate: reliable),
            clock: clock, seed: seed ?? UInt64(device.unicodeScalars.first!.value), logger: Logger(label: "test"), durability: .normal)
        return try await StoreManager.open(StoreManager.Configuration(store: configuration, cloudEnabledByDefault: true, health: health))
    }

    /// Flips one byte in the middle of every log of `device` in `store`:
    /// checksums fail, and nobody but their owner can put them back.
    func damageLogs(of device: DeviceID, in store: StoreID) throws -> Int {
        let folder = containerURL.appendingPathComponent("blobs").appendingPathComponent(ContainerLayout.logPrefix(store: store, device: device))
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { return 0 }
        var damaged = 0
        for case let url as URL in walker where url.pathExtension == "chlog" {
            var bytes = try [UInt8](Data(contentsOf: url))
            bytes[bytes.count / 2 + 8] ^= 0x5A
            try Data(bytes).write(to: url)
            damaged += 1
        }
        return damaged
    }

    /// Devices a and c on one store; device b saved "b1", a imported it,
    /// then b's log was damaged and b closed for good: nobody can repair it.
    func aLogOfADeviceThatIsGone(reliable: Bool = true) async throws -> (a: StoreManager, c: StoreManager, old: StoreID) {
        let a = try await manager("a", reliable: reliable)
        let c = try await manager("c", reliable: reliable)
        for m in [a, c] { try await m.sync() }
        let b = try await manager("b", reliable: reliable)
        let old = try await a.store.storeID
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B", titles: ["b1"])
        try await b.sync()
        try await a.sync()
        let bID = try await b.store.deviceID
        try await b.close()
        _ = try damageLogs(of: bID, in: old)
        return (a, c, old)
    }

    /// Device b saved "b1", a imported it, and b closed for good: only the
    /// container holds b's log for a device that joins.
    func aAppliedALogOfADeviceThatClosed() async throws -> (a: StoreManager, store: StoreID, b: DeviceID) {
        let a = try await manager("a")
        try await a.sync()
        let b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B", titles: ["b1"])
        try await b.sync()
        try await a.sync()
        let bID = try await b.store.deviceID
        try await b.close()
        return (a, try await a.store.storeID, bID)
    }

    /// a syncs past the grace period; c fails on the damaged log, waits the
    /// repair wait, rebuilds its copy, fails again and marks the store.
    func cMarksTheStore(_ a: StoreManager, _ c: StoreManager) async throws {
        clock.advance(byMilliseconds: 2_000)
        try await a.sync()
        try await c.sync()
        clock.advance(byMilliseconds: 3_000)
        try await c.sync()
        #expect(try await c.health().status == .corrupted)
    }

    /// Flips a byte near the end of every baseline part of `store` (its
    /// body no longer matches its checksum). Returns how many parts.
    func damageBaselines(of store: StoreID) async throws -> Int {
        let container = try DirectoryContainer(root: containerURL)
        let parts = try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store))
        for part in parts {
            var bytes = try await container.get(part.name)
            bytes[bytes.count - 3] ^= 0xFF
            try await container.delete(part.name)
            try await container.put(part.name, bytes)
        }
        return parts.count
    }

    static func titles(_ m: StoreManager) async throws -> [String] {
        try await StoreManagerTests.titles(try await m.store)
    }

    @Test(arguments: [true, false]) func aLogNobodyCanRepairIsRebuiltOnceAndEveryDeviceMovesWithNothingLost(reliable: Bool) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", reliable: reliable)
        let c = try await manager("c", reliable: reliable)
        for m in [a, c] { try await m.sync() }
        let b = try await manager("b", reliable: reliable)
        let old = try await a.store.storeID
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B", titles: ["b1", "b2"])
        try await b.sync()
        try await a.sync()
        #expect(try await Self.titles(a) == ["a1", "b1", "b2"], "a has b's saves")
        // b's logs are damaged and b is gone: nobody can put them back.
        let bID = try await b.store.deviceID
        try await b.close()
        #expect(try damageLogs(of: bID, in: old) > 0)

        clock.advance(byMilliseconds: 2_000)
        try await a.sync()
        #expect(try await a.health().status == .healthy)
        // c saves, then fails to import b's log.
        try await StoreManagerTests.saveNotes(try await c.store, folder: "C", titles: ["c1"])
        let report = try await c.sync()
        #expect(report?.status == .failed)
        #expect(try await c.health().status == .unhealthy)
        #expect(try await c.health().problems.first?.kind == .damagedBlob)
        // While the owner could still repair it, nothing more happens.
        clock.advance(byMilliseconds: 1_000)
        try await c.sync()
        #expect(try await c.health().marks.isEmpty)
        let cEvents = c.events()
        // Past the repair wait: c builds its copy again, fails again, marks the store and unloads it.
        clock.advance(byMilliseconds: 2_000)
        try await c.sync()
        let marked = try await c.health()
        #expect(marked.status == .corrupted)
        #expect(marked.marks.count == 1)
        #expect(marked.marks.first?.blob.contains(bID.description) == true)
        #expect(await c.loadedKind == nil)
        await #expect(throws: ChronicleError.self) { try await c.store }
        await #expect(throws: ChronicleError.self) { try await c.sync() }

        // a is healthy, sees the mark, wins the election and rebuilds at
        // once: it takes the lease, or (without reliable create) it stood
        // since it was healthy, more than a window before the mark.
        let aEvents = a.events()
        if !reliable {
            let election = try await a.health().election
            #expect(election?.candidacies.map(\.device) == [try await a.store.deviceID])
            #expect(election?.leader == (try await a.store.deviceID))
        }
        try await a.sync()
        let new = try await a.store.storeID
        #expect(new != old, "a rebuilt the store")
        let history = try await a.health().history
        #expect(history.count == 1)
        #expect(history.first?.from == old && history.first?.to == new)
        #expect(history.first?.reason?.contains("reported") == true)
        #expect(try await Self.titles(a) == ["a1", "b1", "b2", "c1"])

        // c moves at its next sync, carrying its save, and is healthy again.
        try await c.sync()
        #expect(try await c.store.storeID == new)
        for m in [a, c, a, c] { try await m.sync() }
        clock.advance(byMilliseconds: 2_000)
        for m in [a, c] { try await m.sync() }
        for m in [a, c] {
            #expect(try await Self.titles(m) == ["a1", "b1", "b2", "c1"])
            #expect(try await m.health().status == .healthy)
            #expect(try await m.health().marks.isEmpty)
        }
        #expect(try await a.store.stateHash() == c.store.stateHash())
        // A device that was away joins the new store.
        let b2 = try await manager("b", reliable: reliable)
        try await b2.sync()
        #expect(try await b2.store.storeID == new)
        #expect(try await Self.titles(b2) == ["a1", "b1", "b2", "c1"])
        for m in [a, b2, c] { try await m.close() }

        var cSaw: [String] = []
        for await event in cEvents {
            switch event {
            case .rebuildingLocalCopy: cSaw.append("reload")
            case .cloudContentCorrupted(_, let healthy): cSaw.append("corrupted(\(healthy))")
            case .movedToStore: cSaw.append("moved")
            case .healthChanged(let status, _): cSaw.append(status.rawValue)
            default: break
            }
        }
        #expect(cSaw.drop { $0 != "unhealthy" }.elementsEqual(["unhealthy", "reload", "corrupted", "corrupted(false)", "moved", "checking", "healthy"]), "\(cSaw)")
        var aSaw: [String] = []
        for await event in aEvents {
            switch event {
            case .cloudContentCorrupted(_, let healthy): aSaw.append("corrupted(\(healthy))")
            case .electedToRebuild: aSaw.append("elected")
            case .rebuiltCloudStore: aSaw.append("rebuilt")
            default: break
            }
        }
        #expect(aSaw == ["corrupted(true)", "elected", "rebuilt"])
    }

    /// Regression: a device that had applied a log the scrub then found
    /// damaged said `healthy` with no problem for the whole repair wait.
    /// The damage is reported at once (``StoreManager/Health/storeDamage``),
    /// the device stays healthy, and once the wait is over it marks the store.
    /// Without reliable exclusive create, two healthy devices that see the
    /// mark in the same moment: the one the rule chose beforehand rebuilds
    /// at once, the other does not rebuild, and moves at its next sync.
    @Test func withoutReliableCreateTheDeviceChosenBeforehandRebuildsAloneAndAtOnce() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", reliable: false)
        let c = try await manager("c", reliable: false)
        let d = try await manager("d", reliable: false)
        for m in [a, c, d] { try await m.sync() }
        let old = try await a.store.storeID
        let b = try await manager("b", reliable: false)
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B", titles: ["b1"])
        try await b.sync()
        for m in [a, d] { try await m.sync() }
        let bID = try await b.store.deviceID
        try await b.close()
        _ = try damageLogs(of: bID, in: old)
        try await cMarksTheStore(a, c)
        try await d.sync()
        let healthy = [try await a.store.deviceID, try await d.store.deviceID]
        // Both stood when they became healthy, before the mark.
        let election = try #require(try await a.health().election)
        #expect(Set(election.candidacies.map(\.device)) == Set(healthy))
        let chosen = try #require(election.leader)
        #expect(try await d.health().election?.leader == chosen, "both devices pick the same one")
        // The other one syncs first: it waits for the chosen one.
        let (other, first) = chosen == healthy[0] ? (d, a) : (a, d)
        try await other.sync()
        #expect(try await other.store.storeID == old)
        try await first.sync()
        #expect(try await first.store.storeID != old, "the chosen device rebuilt in its first sync after the mark")
        #expect(try await first.health().history.first?.device == chosen)
        for m in [a, c, d] { try await m.sync() }
        let new = try await a.store.storeID
        for m in [a, c, d] {
            #expect(try await m.store.storeID == new)
            #expect(try await Self.titles(m) == ["b1"])
        }
        #expect(try await a.health().history.count == 1)
        for m in [a, c, d] { try await m.close() }
    }

    @Test func damageTheScrubFindsIsReportedBeforeTheMark() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (a, c, old) = try await aLogOfADeviceThatIsGone()
        clock.advance(byMilliseconds: 1_500)
        try await a.sync()
        let early = try await a.health()
        #expect(early.status == .healthy)
        let damage = try #require(early.storeDamage.first, "the scrub's finding is reported: \(early)")
        #expect(damage.kind == .damagedBlob && damage.blob.contains(ContainerLayout.logsPrefix(store: old)), "\(damage)")
        #expect(damage.reason.contains("marks the store for a rebuild"), "\(damage.reason)")
        #expect(early.marks.isEmpty)
        clock.advance(byMilliseconds: 2_500)
        try await a.sync()
        let late = try await a.health()
        #expect(!late.marks.isEmpty || late.history.contains { $0.from == old }, "past the repair wait the store is marked (or already rebuilt): \(late)")
        try await a.close()
        try await c.close()
    }

    /// Regression: a log a device had applied vanished from the container
    /// (its owner deleted it to put it back, and the upload was lost), and
    /// it was its device's only log. The scrub looked only for gaps between
    /// logs, so nothing showed: devices that had not imported it stayed
    /// apart from those that had, every one of them healthy. The applied
    /// log's absence is reported as a missing log and, past the repair
    /// wait, the store is marked for a rebuild.
    @Test func aVanishedLogWithNoLaterLogIsFoundByTheScrub() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (a, c, old) = try await aLogOfADeviceThatIsGone()
        let logs = containerURL.appendingPathComponent("blobs").appendingPathComponent(ContainerLayout.logsPrefix(store: old))
        let kept = [try await a.store.deviceID.description, try await c.store.deviceID.description]
        for device in try FileManager.default.contentsOfDirectory(atPath: logs.path) where !kept.contains(device) {
            try FileManager.default.removeItem(at: logs.appendingPathComponent(device))
        }
        clock.advance(byMilliseconds: 1_500)
        try await a.sync()
        let early = try await a.health()
        let missing = try #require(early.storeDamage.first, "the scrub reports the vanished log: \(early)")
        #expect(missing.kind == .missingLog && missing.blob.contains(" sequence 1"), "\(missing)")
        #expect(early.marks.isEmpty)
        clock.advance(byMilliseconds: 2_500)
        try await a.sync()
        let late = try await a.health()
        #expect(!late.marks.isEmpty || late.history.contains { $0.from == old }, "past the repair wait the store is marked (or already rebuilt): \(late)")
        try await a.close()
        try await c.close()
    }

    /// Regression: a log the scrub found missing that came back (a sync
    /// service that dropped the file for a while) stayed in
    /// ``StoreManager/Health/storeDamage`` until it expired, and when it
    /// went missing again the device counted the repair wait from the first
    /// time, marking the store at once. A log that is back ends the finding;
    /// missing again, its owner gets the whole wait again.
    @Test func aMissingLogThatComesBackIsNoLongerReportedAndAnotherAbsenceWaitsAgain() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (a, store, bID) = try await aAppliedALogOfADeviceThatClosed()
        let logs = containerURL.appendingPathComponent("blobs").appendingPathComponent(ContainerLayout.logPrefix(store: store, device: bID))
        let aside = root.appendingPathComponent("aside")
        func hide() throws { try FileManager.default.moveItem(at: logs, to: aside) }
        func bringBack() throws { try FileManager.default.moveItem(at: aside, to: logs) }

        try hide()
        clock.advance(byMilliseconds: 1_500)
        try await a.sync()
        let missing = try #require(try await a.health().storeDamage.first, "the scrub reports the vanished log")
        #expect(missing.kind == .missingLog)

        try bringBack()
        clock.advance(byMilliseconds: 500)
        try await a.sync()
        let back = try await a.health()
        #expect(back.storeDamage.isEmpty, "the log is back: \(back.storeDamage)")

        // Gone again, 3.5 s after it was first found (the repair wait is 2 s).
        try hide()
        clock.advance(byMilliseconds: 1_500)
        try await a.sync()
        let again = try await a.health()
        let second = try #require(again.storeDamage.first, "the new absence is reported")
        #expect(clock.nowMilliseconds() - second.since < 2_000, "the wait counts from the new absence")
        #expect(again.marks.isEmpty, "its owner has the whole repair wait again: \(again.marks)")
        #expect(try await a.store.storeID == store)
        // Still missing past the wait: the store is marked.
        clock.advance(byMilliseconds: 2_500)
        try await a.sync()
        let late = try await a.health()
        #expect(!late.marks.isEmpty || late.history.contains { $0.from == store }, "past the repair wait the store is marked: \(late)")
        try await a.close()
    }

    /// Regression: a log that went from damaged to missing and back (a sync
    /// service that keeps losing a broken file) was a new finding at each
    /// change, its repair wait restarting, so the store was never marked
    /// though the log never came back whole. It is one finding: marked once
    /// the wait from the first is over.
    @Test func aLogDamagedThenMissingThenDamagedKeepsItsFirstWait() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (a, store, bID) = try await aAppliedALogOfADeviceThatClosed()
        #expect(try damageLogs(of: bID, in: store) == 1)
        let logs = containerURL.appendingPathComponent("blobs").appendingPathComponent(ContainerLayout.logPrefix(store: store, device: bID))
        let aside = root.appendingPathComponent("aside")

        clock.advance(byMilliseconds: 1_500)
        try await a.sync()
        let first = try #require(try await a.health().storeDamage.first, "the damage is found")
        #expect(first.kind == .damagedBlob)
        try FileManager.default.moveItem(at: logs, to: aside)
        clock.advance(byMilliseconds: 700)
        try await a.sync()
        let gone = try #require(try await a.health().storeDamage.first, "then its absence")
        #expect(gone.kind == .missingLog && gone.since == first.since, "\(gone) after \(first)")
        try FileManager.default.moveItem(at: aside, to: logs)
        clock.advance(byMilliseconds: 700)
        try await a.sync()
        let back = try #require(try await a.health().storeDamage.first, "back, still damaged: found at once")
        #expect(back.kind == .damagedBlob && back.since == first.since, "\(back) after \(first)")
        #expect(try await a.health().marks.isEmpty)
        // 2.4 s after the first finding, past the 2 s repair wait.
        clock.advance(byMilliseconds: 1_000)
        try await a.sync()
        let late = try await a.health()
        #expect(!late.marks.isEmpty || late.history.contains { $0.from == store }, "marked: \(late)")
        try await a.close()
    }

    /// A copy of b's folder ran as b too. b's log, which a had applied
    /// (and a had published a baseline holding it), was lost, and the copy
    /// put its own saves under the same name. a's copy held saves no other
    /// device would import, and lacked the container's: a's scrub finds the
    /// log replaced, and a builds its copy again from the container,
    /// passing over the baseline that holds the lost version, saves again
    /// the lost save it held, and publishes a new baseline for devices that
    /// join.
    @Test func aLogReplacedUnderItsNameByAnotherCopyOfItsDeviceIsFoundAndTheCopyBuiltAgain() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        try await a.sync()
        let old = try await a.store.storeID
        var b = try await manager("b")
        try await b.sync()
        try await b.close()
        try FileManager.default.copyItem(at: root.appendingPathComponent("b"), to: root.appendingPathComponent("b-copy"))
        b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B", titles: ["b1"])
        try await b.sync()
        try await a.sync()
        #expect(try await Self.titles(a).contains("b1"))
        _ = try await a.store.publishBaseline()
        let bID = try await b.store.deviceID
        try await b.close()
        try FileManager.default.removeItem(at: containerURL.appendingPathComponent("blobs")
            .appendingPathComponent(ContainerLayout.logPrefix(store: old, device: bID)))
        let copy = try await manager("b-copy", seed: 0xC0B1)
        #expect(try await copy.store.deviceID == bID, "the copy runs as b")
        try await StoreManagerTests.saveNotes(try await copy.store, folder: "C", titles: ["saved by b's copy"])
        try await copy.sync()
        try await copy.close()

        clock.advance(byMilliseconds: 500)
        try await a.sync()
        let titles = try await Self.titles(a)
        #expect(titles.contains("saved by b's copy"), "a's copy was built again from the container: \(titles)")
        #expect(titles.contains("b1"), "b1, in no log the container holds, was saved again by a: \(titles)")
        let joining = try await manager("d")
        try await joining.sync()
        #expect(try await Self.titles(joining) == titles, "a device that joins starts from a's new baseline")
        try await joining.close()
        try await a.close()
    }

    /// As above, but the copy's log covers other sequences than the lost
    /// one did (the lost log held two saves, the copy's holds one): no log
    /// has the lost one's name, and the scrub finds it replaced by the logs
    /// over its sequences. Nothing is lost: a keeps both lost saves, and
    /// the copy gets them from a.
    @Test func aLogReplacedByOtherLogsOverItsSequencesIsFoundAndNothingIsLost() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        try await a.sync()
        let old = try await a.store.storeID
        var b = try await manager("b")
        try await b.sync()
        try await b.close()
        try FileManager.default.copyItem(at: root.appendingPathComponent("b"), to: root.appendingPathComponent("b-copy"))
        b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B1", titles: ["b1"])
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B2", titles: ["b2"])
        try await b.sync()
        try await a.sync()
        let bID = try await b.store.deviceID
        try await b.close()
        try FileManager.default.removeItem(at: containerURL.appendingPathComponent("blobs")
            .appendingPathComponent(ContainerLayout.logPrefix(store: old, device: bID)))
        let copy = try await manager("b-copy", seed: 0xC0B1)
        try await StoreManagerTests.saveNotes(try await copy.store, folder: "C", titles: ["saved by b's copy"])
        try await copy.sync()

        clock.advance(byMilliseconds: 500)
        try await a.sync()
        let titles = try await Self.titles(a)
        #expect(titles == ["b1", "b2", "saved by b's copy"], "\(titles)")
        clock.advance(byMilliseconds: 500)
        try await copy.sync()
        #expect(try await Self.titles(copy) == titles)
        try await copy.close()
        try await a.close()
    }

    /// A device folder and the container put back from one older backup:
    /// the device saves again under the sequence of a save the other device
    /// applied, and one of them rebuilds the store from its copy. From the
    /// other device's copy, the vector covers that sequence with the older
    /// save; from the restored device's, the older save is missing. The
    /// device that moves into the rebuilt store saves again the writes its
    /// copy holds and the store lacks: nothing is lost either way.
    @Test(arguments: [false, true]) func aMoveIntoAStoreRebuiltFromAnotherVersionOfThisDevicesSavesKeepsThem(restoredDeviceRebuilds: Bool) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var a = try await manager("a")
        var b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A1", titles: ["a1"])
        try await a.sync()
        try await b.sync()
        try await a.close()
        try await b.close()
        let backup = root.appendingPathComponent("backup")
        try FileManager.default.createDirectory(at: backup, withIntermediateDirectories: true)
        for name in ["a", "container"] {
            try FileManager.default.copyItem(at: root.appendingPathComponent(name), to: backup.appendingPathComponent(name))
        }
        a = try await manager("a", seed: 0xA1)
        b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A2", titles: ["before the restore"])
        try await a.sync()
        try await b.sync()
        try await a.close()
        try await b.close()
        for name in ["a", "container"] {
            try FileManager.default.removeItem(at: root.appendingPathComponent(name))
            try FileManager.default.copyItem(at: backup.appendingPathComponent(name), to: root.appendingPathComponent(name))
        }
        a = try await manager("a", seed: 0xA2)
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A3", titles: ["after the restore"])
        try await a.sync()
        b = try await manager("b")
        // From b's copy (it holds the older save under a's sequence), or
        // from a's (it lacks that save, which only b holds).
        let rebuilt = try await (restoredDeviceRebuilds ? a : b).rebuildCloudStore()
        try await (restoredDeviceRebuilds ? b : a).sync()
        try await b.sync()
        try await a.sync()
        #expect(try await a.store.storeID == rebuilt)
        #expect(try await b.store.storeID == rebuilt)
        for m in [a, b] {
            #expect(try await Self.titles(m) == ["a1", "after the restore", "before the restore"])
        }
        try await a.close()
        try await b.close()
    }

    @Test func anAppThatHandlesTheCorruptionKeepsTheDeviceFromRebuilding() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        final class Handler: StoreManagerDelegate, @unchecked Sendable {
            var calls: [Bool] = []
            func storeManager(_ manager: StoreManager, handleCloudContentCorruption mark: CorruptionMark, healthy: Bool) async -> Bool {
                calls.append(healthy)
                return true
            }
        }
        let (a, c, old) = try await aLogOfADeviceThatIsGone()
        let handler = Handler()
        await a.setDelegate(handler)
        try await cMarksTheStore(a, c)
        try await a.sync()
        clock.advance(byMilliseconds: 20_000)
        try await a.sync()
        #expect(handler.calls == [true], "asked once, as a healthy device")
        #expect(try await a.store.storeID == old, "the app took over: no rebuild by itself")
        #expect(try await a.health().election?.lease == nil)
        // The app rebuilds when it chooses; c follows.
        let new = try await a.rebuildCloudStore()
        try await c.sync()
        #expect(try await c.store.storeID == new)
        for m in [a, c] { try await m.close() }
    }

    @Test func aLogOfAnUnknownSchemaIsHeldNotCorruption() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        try await a.sync()
        let store = try await a.store.storeID
        // A newer app version's device writes a log for a schema this one does not know.
        let newer = try Schema(version: 2, entities: Self.schema.entities + [Entity("Tag", attributes: [Attribute("name", .string)])])
        let peer = try await Store.open(Store.Configuration(schema: newer, directory: root.appendingPathComponent("newer"),
                                                            container: try DirectoryContainer(root: containerURL), clock: clock, seed: 9,
                                                            logger: Logger(label: "test"), durability: .normal))
        #expect(peer.storeID == store)
        try await peer.write { tx in _ = tx.insert("Tag", ["name": .string("new")]) }
        try await peer.sync()
        try await peer.close()
        for _ in 0..<4 {
            clock.advance(byMilliseconds: 5_000)
            try await a.sync()
        }
        let health = try await a.health()
        #expect(health.status == .healthy, "a held log is not a failure")
        #expect(health.held.count == 1)
        #expect(health.marks.isEmpty)
        #expect(try await a.store.storeID == store)
        try await a.close()
    }

    /// A log whose compression dictionary the container lost waits; the
    /// health monitor never counts it, however long it waits.
    @Test func aLogWaitingForItsDictionaryIsNoCorruption() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        try await a.sync()
        let store = try await a.store.storeID
        // Another device trains the store's dictionary and uploads against it.
        let peer = try await Store.open(Store.Configuration(schema: Self.schema, directory: root.appendingPathComponent("peer"),
                                                            container: try DirectoryContainer(root: containerURL), clock: clock, seed: 9,
                                                            logger: Logger(label: "test"), durability: .normal))
        for i in 0..<(Replayer.defaultDictionaryTrainingSaves + 2) {
            try await peer.write { tx in _ = tx.insert("Note", ["title": .string("note \(i) from the peer")]) }
        }
        try await peer.sync()
        try await peer.close()
        let container = try DirectoryContainer(root: containerURL)
        let dictionaries = try await container.listMarkers(prefix: ContainerLayout.dictionariesPrefix(store: store))
        #expect(dictionaries.count == 1)
        for name in dictionaries { try await container.deleteMarker(name, expected: nil) }
        for _ in 0..<4 {
            clock.advance(byMilliseconds: 20_000)
            try await a.sync()
        }
        let health = try await a.health()
        #expect(health.status == .healthy, "\(health.problems)")
        #expect(health.problems.isEmpty && health.marks.isEmpty)
        #expect(try await a.store.storeID == store)
        #expect(try await Self.titles(a).isEmpty, "the logs wait")
        try await a.close()
    }

    @Test func anInterruptedRebuildIsFinishedByAnotherDeviceAfterTheLease() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        let c = try await manager("c")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        for m in [a, c, a, c] { try await m.sync() }
        let old = try await a.store.storeID
        // A rebuild that stopped after its supersession marker: the pointer
        // still names the old store.
        let container = try DirectoryContainer(root: containerURL)
        let new = try await a.rebuildCloudStore()
        let pointer = try await container.readMarker(ContainerLayout.activeStore)!
        _ = try await container.replaceMarker(ContainerLayout.activeStore, ActiveStorePointer(store: old), expected: pointer.version)
        try await c.sync()
        #expect(try await c.store.storeID == old, "within the lease, nobody finishes it")
        clock.advance(byMilliseconds: 11_000)
        try await c.sync()
        #expect(try await c.store.storeID == new, "after it, c moves the pointer and follows")
        #expect(try await Self.titles(c) == ["a1"])
        for m in [a, c] { try await m.close() }
    }

    /// Every device fails on the damaged log: none is healthy. After the
    /// lease time one of the marked devices rebuilds from its own copy, and
    /// every device ends on the new store with everything it saved (the
    /// damaged log's saves are on no device: its owner is gone).
    @Test(arguments: [true, false]) func withNoHealthyDeviceLeftAMarkedDeviceRebuildsAfterTheLease(reliable: Bool) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", reliable: reliable)
        let c = try await manager("c", reliable: reliable)
        for m in [a, c] { try await m.sync() }
        let old = try await a.store.storeID
        let b = try await manager("b", reliable: reliable)
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B", titles: ["b1"])
        try await b.sync()
        let bID = try await b.store.deviceID
        try await b.close()
        _ = try damageLogs(of: bID, in: old)
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await StoreManagerTests.saveNotes(try await c.store, folder: "C", titles: ["c1"])
        for _ in 0..<3 {
            for m in [a, c] { _ = try? await m.sync() }
            clock.advance(byMilliseconds: 1_500)
        }
        #expect(try await a.health().status == .corrupted)
        #expect(try await c.health().status == .corrupted)
        // Past the lease: one of them stands, wins, rebuilds; the other follows.
        clock.advance(byMilliseconds: 11_000)
        for _ in 0..<4 {
            for m in [a, c] { _ = try? await m.sync() }
            clock.advance(byMilliseconds: 1_500)
        }
        let new = try await a.store.storeID
        #expect(new != old)
        #expect(try await c.store.storeID == new)
        for m in [a, c] {
            #expect(try await Self.titles(m) == ["a1", "c1"])
            let health = try await m.health()
            #expect(health.status == .healthy, "\(health)")
        }
        #expect(try await a.health().history.count == 1)
        for m in [a, c] { try await m.close() }
    }

    /// A device that builds its copy again while one of its own uploaded
    /// logs is damaged in the container keeps that log's saves: they are
    /// carried under its new ID, not left to an import that fails.
    @Test func rebuildingTheLocalCopyKeepsSavesWhoseOwnLogIsDamaged() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1", "a2"])
        try await a.sync()
        let store = try await a.store
        #expect(try damageLogs(of: store.deviceID, in: store.storeID) == 1)
        _ = try await store.rebuildLocalCopy(reason: "a test")
        #expect(try await StoreManagerTests.titles(store) == ["a1", "a2"])
        try await store.sync()
        #expect(try await StoreManagerTests.titles(store) == ["a1", "a2"])
        // A device that joins gets them too (the carried saves are logs of the new ID).
        let b = try await manager("b")
        try await b.sync()
        #expect(try await Self.titles(b) == ["a1", "a2"])
        for m in [a, b] { try await m.close() }
    }

    /// A rebuilt store's only baseline is damaged after its rebuilder left
    /// for good. A device that has not moved yet holds everything that
    /// baseline held in its copy of the store it replaced: once the damage
    /// outlasts the repair wait, that copy is published in its place, the
    /// device moves with its unsynced save, and a device that joins later
    /// gets every record.
    @Test func aRebuiltStoreWhoseOnlyBaselineIsDamagedIsJoinedFromTheStoreItReplaced() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        let b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await a.sync()
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B", titles: ["b1"])
        try await b.sync()
        try await a.sync()
        try await StoreManagerTests.saveNotes(try await b.store, folder: "B2", titles: ["b pending"])
        let new = try await a.rebuildCloudStore()
        try await a.close()
        #expect(try await damageBaselines(of: new) > 0)
        for _ in 0..<4 {
            _ = try? await b.sync()
            clock.advance(byMilliseconds: 1_500)
        }
        #expect(try await b.store.storeID == new)
        #expect(try await Self.titles(b) == ["a1", "b pending", "b1"])
        let d = try await manager("d")
        for _ in 0..<2 { for m in [b, d] { _ = try? await m.sync() } }
        #expect(try await d.store.storeID == new)
        #expect(try await Self.titles(d) == ["a1", "b pending", "b1"])
        for m in [b, d] { try await m.close() }
    }

    /// A rebuilt store's only baseline is damaged after its rebuilder left,
    /// its first part among the damage. A device that started from that
    /// baseline holds everything it held: its periodic check of the
    /// baselines publishes one in its place, and a device that joins later
    /// gets every record.
    @Test func aDeviceThatStartedFromADamagedBaselinePublishesOneInItsPlace() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        let b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await a.sync()
        try await b.sync()
        let new = try await a.rebuildCloudStore()
        try await b.sync()
        #expect(try await b.store.storeID == new)
        try await a.close()
        #expect(try await damageBaselines(of: new) > 0)
        // The baselines are checked every ten minutes of the device's clock.
        clock.advance(byMilliseconds: 11 * 60_000)
        try await b.sync()
        let d = try await manager("d")
        for _ in 0..<2 { for m in [b, d] { _ = try? await m.sync() } }
        #expect(try await d.store.storeID == new)
        #expect(try await Self.titles(d) == ["a1"])
        for m in [b, d] { try await m.close() }
    }

    /// While a device's move to a rebuilt store waits for that store's
    /// baseline, a reader of its folder (`chronicle query`) finds the copy
    /// of the store it is leaving, which holds its records, not the new,
    /// still empty one.
    @Test func aReaderOfAFolderWaitingToMoveFindsTheStoreItLeaves() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        let b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await a.sync()
        try await b.sync()
        let old = try await b.store.storeID
        let new = try await a.rebuildCloudStore()
        #expect(try await damageBaselines(of: new) > 0)
        let waiting = await #expect(throws: ChronicleError.self) { try await b.sync() }
        #expect(waiting?.code == .unavailable || waiting?.code == .storeNotLoaded, "\(String(describing: waiting))")
        let path = try StoreManager.snapshotPath(in: root.appendingPathComponent("b"))
        #expect(path.contains(old.description))
        let reader = try DatabaseQueue(path: path, configuration: { var c = GRDB.Configuration(); c.readonly = true; return c }())
        #expect(try await reader.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") } == ["a1"])
        try reader.close()
        for m in [a, b] { try await m.close() }
    }

    /// A device whose copy of a store that started from a baseline (a
    /// rebuilt one) was built again from the container still holds that
    /// baseline's content, and may rebuild the store from its copy: the
    /// copy built again applied the baseline too, and says so.
    @Test func aCopyBuiltAgainFromABaselineMayRebuildTheStore() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await a.sync()
        let first = try await a.rebuildCloudStore()
        let c = try await manager("c")
        try await c.sync()
        #expect(try await c.store.storeID == first)
        #expect(try await Self.titles(c) == ["a1"])
        _ = try await c.store.rebuildLocalCopy(reason: "a test")
        #expect(try await Self.titles(c) == ["a1"])
        let second = try await c.rebuildCloudStore()
        #expect(second != first)
        let d = try await manager("d")
        try await d.sync()
        #expect(try await d.store.storeID == second)
        #expect(try await Self.titles(d) == ["a1"], "the first baseline's content reaches the store built from c's copy")
        for m in [a, c, d] { try await m.close() }
    }

    /// A device that leaves a cloud store deleted on purpose carries into its
    /// local store the saves whose log the container holds damaged even
    /// after it put it back: the deleted store never held them.
    @Test func leavingADeletedStoreCarriesSavesWhoseLogStaysDamaged() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let swallowed = HiddenPrefix()
        let base = try DirectoryContainer(root: containerURL, create: true)
        let configuration = StoreManager.Configuration(store: Store.Configuration(
            schema: Self.schema, directory: root.appendingPathComponent("a2"), container: HidingContainer(base: base, swallowing: { swallowed.hides($0) }, hides: { _ in false }),
            clock: clock, seed: 7, logger: Logger(label: "test"), durability: .normal), cloudEnabledByDefault: true, health: Self.health)
        let a = try await StoreManager.open(configuration)
        let b = try await manager("b")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await a.sync()
        let store = try await a.store
        #expect(try damageLogs(of: store.deviceID, in: store.storeID) == 1)
        swallowed.set(ContainerLayout.logPrefix(store: store.storeID, device: store.deviceID))
        clock.advance(byMilliseconds: 5_000)
        try await b.sync()
        try await b.deleteCloudStore(localOnly: false)
        try await a.sync()
        #expect(await a.loadedKind == .local)
        #expect(try await Self.titles(a) == ["a1"], "carried into the local store")
        for m in [a, b] { try await m.close() }
    }

    /// The container lost the active-store pointer (a wipe of the markers)
    /// while a device waited for a rebuild: the elected device's rebuilt
    /// store takes the pointer, and the waiting device follows.
    @Test func aRebuildTakesAPointerTheContainerLost() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (a, c, old) = try await aLogOfADeviceThatIsGone()
        try await cMarksTheStore(a, c)
        try await DirectoryContainer(root: containerURL).deleteMarker(ContainerLayout.activeStore, expected: nil)
        try await a.sync()
        let new = try await a.store.storeID
        #expect(new != old, "a rebuilt the store")
        try await c.sync()
        #expect(try await c.store.storeID == new)
        #expect(try await Self.titles(c) == ["b1"])
        for m in [a, c] { try await m.close() }
    }

    /// Markers written by hand do not lock an episode or fail syncs: a lease
    /// that claims longer than a lease lasts, or is not a lease, is taken
    /// over; a mark that cannot be read is passed over.
    @Test(arguments: ["forever", "garbage", "empty", "cut short", "oversized"])
    func aHandWrittenLeaseIsTakenOverAndAnUnreadableMarkIgnored(lease: String) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (a, c, old) = try await aLogOfADeviceThatIsGone()
        let container = try DirectoryContainer(root: containerURL)
        // An oversized mark of a device that does not exist.
        let bogus = ContainerLayout.corruptionMark(store: old, device: DeviceID(index: 0xEE))
        _ = try await container.createMarker(bogus, Array("{}".utf8))
        try Data(count: 2_000_000).write(to: containerURL.appendingPathComponent("markers/\(old)/corruption/\(DeviceID(index: 0xEE))"))
        let bytes: [UInt8] = lease == "garbage" ? Array("not json{{".utf8)
            : try ElectionLease(device: DeviceID(index: 0xAB), newStore: old, expires: UInt64.max / 2).markerBytes()
        _ = try await container.createMarker(ContainerLayout.election(store: old), bytes)
        // A file no marker reads: cut short inside its version, or too big.
        let file = containerURL.appendingPathComponent("markers/\(old)/election")
        switch lease {
        case "empty": try Data().write(to: file)
        case "cut short": try Data([1, 0, 0]).write(to: file)
        case "oversized": try Data(count: 3_000_000).write(to: file)
        default: break
        }
        try await cMarksTheStore(a, c)
        try await a.sync()
        let new = try await a.store.storeID
        #expect(new != old, "a took the lease over and rebuilt")
        try await c.sync()
        #expect(try await c.store.storeID == new)
        for m in [a, c] { try await m.close() }
    }

    /// A container that does not answer listings for longer than the gap
    /// timeout says nothing about the store's content: no mark.
    @Test func aLongOutageIsNoCorruption() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let down = HiddenPrefix()
        let base = try DirectoryContainer(root: containerURL, create: true)
        let a = try await manager("a")
        try await StoreManagerTests.saveNotes(try await a.store, folder: "A", titles: ["a1"])
        try await a.sync()
        let c = try await StoreManager.open(StoreManager.Configuration(store: Store.Configuration(
            schema: Self.schema, directory: root.appendingPathComponent("c"), container: HidingContainer(base: base, listingsDown: { down.hides(try! ContainerName("x")) }, hides: { _ in false }),
            clock: clock, seed: 3, logger: Logger(label: "test"), durability: .normal), cloudEnabledByDefault: true, health: Self.health))
        try await c.sync()
        down.set("")
        for _ in 0..<8 {
            clock.advance(byMilliseconds: 10_000)
            _ = try? await c.sync()
        }
        let health = try await c.health()
        #expect(health.status != .corrupted && health.status != .unhealthy, "\(health)")
        #expect(health.marks.isEmpty)
        down.set(nil)
        try await c.sync()
        #expect(try await Self.titles(c) == ["a1"])
        for m in [a, c] { try await m.close() }
    }
}


/// The deterministic election rule, where the container's exclusive create
/// is not reliable: a function of the markers' contents, so that every
/// device that reads the same markers picks the same winner.
@Suite struct ElectionRuleTests {
    let window: UInt64 = 1_000
    let lease: UInt64 = 10_000
    let store = StoreID(string: "018bcfe5-6800-7000-8000-000000000001")!

    func candidate(_ n: UInt64, applied: UInt64 = 5, since: UInt64, refreshed: UInt64? = nil, healthy: Bool = true) -> RebuildCandidacy {
        RebuildCandidacy(device: DeviceID(index: n), applied: applied, since: since, milliseconds: refreshed ?? since, healthy: healthy)
    }

    func mark(_ n: UInt64, at milliseconds: UInt64, healthy: Bool? = nil) -> CorruptionMark {
        CorruptionMark(device: DeviceID(index: n), store: store, blob: "a log", reason: "damaged", milliseconds: milliseconds, healthy: healthy)
    }

    func leader(_ candidacies: [RebuildCandidacy], _ marks: [CorruptionMark], now: UInt64) -> DeviceID? {
        StoreManager.leader(of: candidacies, marks: marks, now: now, window: window, lease: lease)
    }

    @Test func aCandidateThatStoodAWindowBeforeTheMarkIsChosenAtOnceWhateverTheDevicesClock() {
        let candidacies = [candidate(1, applied: 5, since: 1_000),
                           candidate(2, applied: 9, since: 9_500),               // stood within the window before the mark
                           candidate(3, applied: 7, since: 2_000, refreshed: 9_000)]
        let marks = [mark(4, at: 10_000)]
        #expect(StoreManager.chosenBeforehand(candidacies, marks: marks, window: window, lease: lease) == DeviceID(index: 3))
        // Every device, whenever it looks within a lease of the mark (its
        // clock behind or ahead), picks that one.
        for now: UInt64 in [9_000, 10_000, 10_001, 15_000, 19_999] {
            #expect(leader(candidacies, marks, now: now) == DeviceID(index: 3), "at \(now)")
        }
        // Refreshed again after the mark, or read before the refresh: the same.
        var refreshed = candidacies
        refreshed[2].milliseconds = 12_000
        #expect(leader(refreshed, marks, now: 12_000) == DeviceID(index: 3))
    }

    @Test func devicesThatCannotRebuildAreNotChosenBeforehand() {
        let marks = [mark(4, at: 20_000), mark(5, at: 20_200)]
        let stale = candidate(1, applied: 50, since: 1_000)                             // not refreshed within a lease before the mark: gone
        let unhealthy = candidate(2, applied: 40, since: 1_000, refreshed: 19_800, healthy: false)
        let unloaded = candidate(4, applied: 30, since: 1_000, refreshed: 19_800)      // it marked the store and unloaded it
        let stays = candidate(5, applied: 20, since: 1_000, refreshed: 19_800)         // its mark says it stays healthy
        let plain = candidate(6, applied: 10, since: 1_000, refreshed: 19_800)
        let all = [stale, unhealthy, unloaded, stays, plain]
        #expect(StoreManager.chosenBeforehand(all, marks: marks, window: window, lease: lease) == DeviceID(index: 6))
        var marksStaying = marks
        marksStaying[1].healthy = true
        #expect(StoreManager.chosenBeforehand(all, marks: marksStaying, window: window, lease: lease) == DeviceID(index: 5))
        #expect(StoreManager.chosenBeforehand(all, marks: [], window: window, lease: lease) == nil)
    }

    @Test func aCandidacyDatedFarAheadDoesNotStandForEver() {
        let marks = [mark(9, at: 10_000)]
        let forged = candidate(1, applied: 999_999, since: 1_000, refreshed: 32_503_680_000_000)
        let honest = candidate(2, applied: 5, since: 2_000, refreshed: 9_500)
        #expect(StoreManager.chosenBeforehand([forged, honest], marks: marks, window: window, lease: lease) == DeviceID(index: 2))
        #expect(leader([forged, honest], marks, now: 25_000) == nil, "the honest one is not refreshed any more either")
        #expect(leader([forged, candidate(2, applied: 5, since: 2_000, refreshed: 24_000)], marks, now: 25_000) == DeviceID(index: 2))
    }

    @Test func withNobodyChosenBeforehandThoseThatStoodWithinAWindowOfTheMarkDecide() {
        let marks = [mark(9, at: 10_000)]
        let early = [candidate(1, applied: 3, since: 10_000), candidate(2, applied: 4, since: 10_500)]
        let late = candidate(3, applied: 9, since: 11_000)                              // became healthy a window after the mark
        #expect(StoreManager.chosenBeforehand(early + [late], marks: marks, window: window, lease: lease) == nil)
        #expect(leader(early + [late], marks, now: 11_000) == DeviceID(index: 2))
        // Once none of the early ones is there (their candidacies not
        // refreshed for a lease), the others decide among themselves.
        let refreshedLate = candidate(3, applied: 9, since: 11_000, refreshed: 24_000)
        #expect(leader(early + [refreshedLate], marks, now: 25_000) == DeviceID(index: 3))
    }
}
