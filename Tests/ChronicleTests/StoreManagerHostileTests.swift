import Chronicle
import ChronicleContainer
import Foundation
import Logging
import Testing

/// A user who does everything in the wrong order: toggles while saving,
/// deletes and rebuilds from several devices, restores old copies of a
/// device's folder, damages the manager's files, keeps using a closed
/// manager, ships broken seed data and pulls the container away. What the
/// lifecycle promises must hold: no acknowledged save is lost, devices
/// converge, and every failure is a typed error.
@Suite struct StoreManagerHostileTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes")]),
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
    ])

    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-hostile-\(UUID().uuidString)")
    var containerURL: URL { root.appendingPathComponent("container") }

    func storeConfiguration(_ device: String) throws -> Store.Configuration {
        Store.Configuration(schema: Self.schema, directory: root.appendingPathComponent(device),
                            container: try DirectoryContainer(root: containerURL, create: true),
                            seed: UInt64(abs(device.hashValue) % 1_000_000), logger: Logger(label: "test"), durability: .normal)
    }

    func manager(_ device: String, batch: Int = 500, cloudByDefault: Bool = false,
                 seedData: StoreManager.SeedData? = nil) async throws -> StoreManager {
        try await StoreManager.open(StoreManager.Configuration(store: storeConfiguration(device), cloudEnabledByDefault: cloudByDefault,
                                                               mergeBatchSize: batch, seedData: seedData))
    }

    func peer(_ device: String) async throws -> Store {
        try await Store.open(storeConfiguration(device))
    }

    func container() throws -> DirectoryContainer { try DirectoryContainer(root: containerURL) }

    func activeStore() async throws -> StoreID? {
        try await container().readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store
    }

    static func titles(_ store: Store) async throws -> [String] {
        try await store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title") }
    }

    static func title(_ store: Store, _ id: RecordID) async throws -> String? {
        try await store.read { db in try String.fetchOne(db, sql: "SELECT title FROM Note WHERE id = ?", arguments: [id]) }
    }

    @discardableResult
    static func saveNote(_ store: Store, _ title: String) async throws -> RecordID {
        try await store.write { tx in
            let f = tx.insert("Folder", ["name": .string("folder of \(title)")])
            return tx.insert("Note", ["title": .string(title), "folder": .reference(f)])
        }
    }

    /// A fresh reader on the container's active store, after a full sync.
    func containerTitles(_ reader: String = "reader-\(UUID().uuidString.prefix(6))") async throws -> [String] {
        let store = try await peer(reader)
        try await store.sync()
        try await store.sync()
        let titles = try await Self.titles(store)
        try await store.close()
        return titles
    }

    func copyFolder(_ from: String, to: String) throws {
        let target = root.appendingPathComponent(to)
        try? FileManager.default.removeItem(at: target)
        try FileManager.default.copyItem(at: root.appendingPathComponent(from), to: target)
    }

    func restoreFolder(_ device: String, from copy: String) throws {
        try FileManager.default.removeItem(at: root.appendingPathComponent(device))
        try FileManager.default.copyItem(at: root.appendingPathComponent(copy), to: root.appendingPathComponent(device))
    }

    /// The manager's in-memory choice, what it has loaded and what it
    /// persisted agree.
    func expectConsistent(_ m: StoreManager, _ device: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let enabled = await m.cloudEnabled
        let kind = await m.loadedKind
        if let kind {
            #expect((kind != .local) == enabled, "loaded \(kind) with the cloud \(enabled ? "on" : "off")", sourceLocation: sourceLocation)
        }
        let bytes = try Data(contentsOf: root.appendingPathComponent("\(device)/manager.json"))
        let json = try JSONSerialization.jsonObject(with: bytes) as? [String: Any]
        #expect(json?["cloudEnabled"] as? Bool == enabled, "manager.json says \(json ?? [:])", sourceLocation: sourceLocation)
    }

    // MARK: Toggling

    /// Three devices toggle the cloud on and off in every order, saving into
    /// whichever store is loaded between toggles, some of them at the same
    /// moment. Every save ends in the cloud store and every device agrees.
    /// Regression: the folder a store manager keeps its local store in,
    /// opened on its own with the shared container (as a device folder of
    /// its own), joined the cloud store and uploaded the local-only
    /// records. Such a folder is refused, and nothing reaches the container.
    @Test func aManagersLocalStoreFolderOpenedOnItsOwnIsRefused() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let cloud = try await manager("cloud", cloudByDefault: true)
        try await cloud.store.write { tx in _ = tx.insert("Note", ["title": .string("in the cloud")]) }
        try await cloud.sync()
        let x = try await manager("x")
        try await x.store.write { tx in _ = tx.insert("Note", ["title": .string("local only")]) }
        try await x.close()
        var hijack = try storeConfiguration("x/local/device")
        hijack.directory = root.appendingPathComponent("x").appendingPathComponent("local").appendingPathComponent("device")
        await #expect(throws: ChronicleError.self) { _ = try await Store.open(hijack) }
        let observer = try await peer("observer")
        try await observer.sync()
        #expect(try await observer.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") } == ["in the cloud"])
        try await observer.close()
        let again = try await manager("x")
        #expect(try await again.store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") } == ["local only"])
        try await again.close()
        try await cloud.close()
    }

    @Test func togglingOverAndOverWithSavesInBetweenLosesNothing() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let devices = ["a", "b", "c"]
        var managers: [StoreManager] = []
        for d in devices { managers.append(try await manager(d)) }
        var expected: Set<String> = []
        let patterns: [[Bool]] = [[true, false, true], [false, true, true], [true, true, false], [false, false, true],
                                  [true, true, true], [false, true, false], [true, false, false], [true, true, true]]
        for (round, pattern) in patterns.enumerated() {
            for (i, m) in managers.enumerated() {
                let title = "\(devices[i]) round \(round) before"
                try await Self.saveNote(try await m.store, title)
                expected.insert(title)
            }
            // Every device switches at once.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (i, m) in managers.enumerated() {
                    let on = pattern[i]
                    group.addTask {
                        _ = try await m.setCloudEnabled(on)
                        _ = try await m.sync()
                    }
                }
                try await group.waitForAll()
            }
            for (i, m) in managers.enumerated() {
                try await expectConsistent(m, devices[i])
                let title = "\(devices[i]) round \(round) after"
                try await Self.saveNote(try await m.store, title)
                expected.insert(title)
            }
        }
        for m in managers { try await m.setCloudEnabled(true) }
        for _ in 0..<2 { for m in managers { try await m.sync() } }
        var hashes: Set<String> = []
        for m in managers {
            let store = try await m.store
            let titles = Set(try await Self.titles(store))
            #expect(expected.subtracting(titles).isEmpty, "missing: \(expected.subtracting(titles).sorted())")
            hashes.insert(try await store.stateHash())
        }
        #expect(hashes.count == 1, "every device shows the same state")
        #expect(Set(try await containerTitles()).isSuperset(of: expected))
        for m in managers { try await m.close() }
    }

    /// One manager is told to switch several times at once while a sync
    /// runs: whatever order the calls take, the choice it persisted is the
    /// store it has loaded, the folder is let go on close, and nothing saved
    /// is lost.
    @Test func concurrentSwitchesOnOneManagerLeaveItConsistent() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let other = try await peer("b")
        try await Self.saveNote(other, "from b")
        try await other.sync()
        try await other.close()

        let m = try await manager("a")
        try await Self.saveNote(try await m.store, "local of a")
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask {
                    do { _ = try await m.setCloudEnabled(i % 2 == 0) } catch { #expect(error is ChronicleError, "\(error)") }
                }
                group.addTask {
                    do { _ = try await m.sync() } catch { #expect(error is ChronicleError, "\(error)") }
                }
            }
        }
        try await expectConsistent(m, "a")
        if await m.loadedKind == nil { _ = try? await m.reload() }
        #expect(await m.loadedKind != nil, "a reload brings it back")
        try await m.close()

        // Nothing was left holding the folder or its stores.
        let again = try await manager("a")
        #expect(await again.loadedKind != nil)
        try await again.setCloudEnabled(true)
        try await again.sync()
        let titles = try await Self.titles(try await again.store)
        #expect(titles.contains("local of a") && titles.contains("from b"), "\(titles)")
        try await again.close()
    }

    // MARK: Deleting while others work

    /// b saved into the cloud store and turned the cloud off before those
    /// saves were uploaded; a then deletes the cloud store everywhere. When b's
    /// user turns the cloud on again, the docs promise a new store (or the one
    /// another device started), with b's saves.
    @Test func turningTheCloudBackOnAfterItWasDeletedWhileOffStartsANewStoreWithTheUnsyncedSaves() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        let old = try await a.store.storeID
        try await Self.saveNote(try await b.store, "b unsynced")
        try await b.setCloudEnabled(false)
        try await a.deleteCloudStore(localOnly: false)
        #expect(try await activeStore() == nil)

        try await b.setCloudEnabled(true)
        do {
        #expect(await b.cloudEnabled)
        #expect(await b.loadedKind == .cloud)
        #expect(try await b.store.storeID != old)
    }
        // Whatever happened, b's save is not lost.
        let titles = try await Self.titles(try await b.store)
        #expect(titles.contains("b unsynced"), "\(titles)")
        try await expectConsistent(b, "b")
        if await b.loadedKind != .cloud { try await b.setCloudEnabled(true) }
        try await b.sync()
        #expect(try await Self.titles(try await b.store).contains("b unsynced"))
        #expect(try await b.store.storeID != old)
        try await a.close()
        try await b.close()
    }

    /// Regression: b's log reached the container and the sync service then
    /// dropped it, before a (who never saw it) deleted the cloud store
    /// everywhere. Leaving, b put the log back into the deleted store and
    /// counted its save as deleted with it: a store never held it. The save
    /// is carried to b's local store.
    @Test func aSaveWhoseLogTheContainerDroppedBeforeADeletionGoesToTheLocalStore() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        try await Self.saveNote(try await b.store, "b dropped")
        try await b.sync()
        let store = try await b.store
        let logs = try await container().listAll(prefix: ContainerLayout.logPrefix(store: store.storeID, device: store.deviceID))
        #expect(!logs.isEmpty)
        for log in logs { try await container().delete(log.name) }
        try await a.deleteCloudStore(localOnly: false)
        try await b.checkCloudContent()
        #expect(await b.loadedKind == .local)
        #expect(try await Self.titles(try await b.store).contains("b dropped"))
        try await a.close()
        try await b.close()
    }

    /// Regression: b deleted the cloud store everywhere right after a rebuilt
    /// it, before b had seen the rebuild. Deleting first moved b to the
    /// rebuilt store, which uploaded b's unsynced save there, and then
    /// deleted that store with the save in it. Saves unsynced when the user
    /// chose to delete go to the local store. The same when b opens again to
    /// delete (as each `chronicle` command does): opening moved it to the
    /// rebuilt store and uploaded its carried saves there at once.
    @Test(arguments: [false, true]) func deletingRightAfterAnotherDeviceRebuiltKeepsTheUnsyncedSave(reopening: Bool) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        var b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        try await Self.saveNote(try await b.store, "b unsynced")
        _ = try await a.rebuildCloudStore(from: .cloud)
        if reopening {
            try await b.close()
            b = try await manager("b", cloudByDefault: true)
        }
        try await b.deleteCloudStore(localOnly: false)
        #expect(await b.loadedKind == .local)
        let titles = try await Self.titles(try await b.store)
        #expect(titles.contains("b unsynced"), "\(titles)")
        try await a.close()
        try await b.close()
    }

    /// Regression: two first stores on replicas of one synced folder; m
    /// saved into the one that loses the ranking, and its folder was then
    /// removed. When the replicas merged, the losing store's devices moved
    /// to the winner carrying their own saves, and m's were on no device.
    /// Every device that moves out of a merged store carries the saves of
    /// its other devices too, from its logs.
    @Test func aMergedStoreKeepsTheSavesOfADeviceThatIsGone() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let replicaURL = root.appendingPathComponent("replica")
        let made = try DirectoryContainer(root: containerURL, create: true)
        _ = try await made.createMarker(ContainerLayout.account, AccountToken(token: "one account"))
        try FileManager.default.copyItem(at: containerURL, to: replicaURL)
        func manager(_ device: String, on url: URL) async throws -> StoreManager {
            var configuration = try storeConfiguration(device)
            configuration.container = try DirectoryContainer(root: url)
            return try await StoreManager.open(StoreManager.Configuration(store: configuration, cloudEnabledByDefault: true))
        }
        let a = try await manager("a", on: containerURL)
        try await Self.saveNote(try await a.store, "a1")
        try await a.sync()
        var b = try await manager("b", on: replicaURL)
        let m = try await manager("m", on: replicaURL)
        let winner = try await a.store.storeID
        let loser = try await b.store.storeID
        #expect(loser != winner && loser > winner, "b started a store of its own, after a's")
        try await Self.saveNote(try await m.store, "m1")
        try await m.sync()
        try await b.sync()
        try await m.close()
        try FileManager.default.removeItem(at: root.appendingPathComponent("m"))
        // The sync service brings the replica's files over; the first pointer stays.
        try copyMissingFiles(from: replicaURL, into: containerURL)
        try await b.close()
        b = try await manager("b", on: containerURL)
        for device in [b, a, b, a] { try await device.sync() }
        #expect(try await b.store.storeID == winner)
        for device in [a, b] {
            let titles = try await Self.titles(try await device.store)
            #expect(titles.contains("m1") && titles.contains("a1"), "\(titles)")
        }
        try await a.close()
        try await b.close()
    }

    /// Regression: the sync service lost a deletion's tombstone for a
    /// while. b, which had not seen it, put the pointer back and uploaded its
    /// save made before the deletion into the deleted store; a, which
    /// remembers the deletion, then wrote the tombstone again. Leaving, b
    /// carried only saves not uploaded or made after the deletion, and this
    /// one (uploaded, made before) was on no device. Saves uploaded after
    /// the deletion go to the local store too: the deleted store never held them.
    @Test func aSaveUploadedIntoAStoreWhoseTombstoneWasLostIsCarriedWhenTheTombstoneComesBack() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        let old = try await a.store.storeID
        try await Self.saveNote(try await b.store, "b saved before the deletion")
        try await a.deleteCloudStore(localOnly: false)
        try await container().deleteMarker(ContainerLayout.tombstone(store: old), expected: nil)
        try await b.sync()
        #expect(await b.loadedKind == .cloud, "b never saw the deletion")
        #expect(try await b.syncStatus().pendingUploads == 0, "and uploaded its save into the deleted store")
        try await a.setCloudEnabled(true)
        #expect(try await container().readMarker(ContainerLayout.tombstone(store: old)) != nil, "a wrote the tombstone again")
        try await b.sync()
        #expect(await b.loadedKind == .local)
        let titles = try await Self.titles(try await b.store)
        #expect(titles.contains("b saved before the deletion"), "\(titles)")
        try await a.close()
        try await b.close()
    }

    /// Regression: leaving a store deleted everywhere, a device put back
    /// its log that the container had lost (the store did not hold it when
    /// it was deleted, so its saves go to the local store), then crashed
    /// before carrying. Loading again, it found the log in the container
    /// and the save uploaded before the deletion: it carried nothing.
    @Test func aLogPutBackWhileLeavingADeletedStoreIsCarriedAfterACrash() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        actor Once {
            var fired = false
            func fire() -> Bool { defer { fired = true }; return !fired }
        }
        let once = Once()
        var configuration = StoreManager.Configuration(store: try storeConfiguration("a"), cloudEnabledByDefault: true)
        configuration.beforeCarrying = { _ in
            if await once.fire() { throw ChronicleError(.simulatedCrash, "crashed before carrying") }
        }
        let a = try await StoreManager.open(configuration)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        try await Self.saveNote(try await a.store, "a uploaded, then lost by the container")
        try await a.sync()
        let store = try await a.store.storeID
        let logs = try await container().listAll(prefix: ContainerLayout.logPrefix(store: store, device: try await a.store.deviceID))
        let lost = try #require(logs.last)
        try await container().delete(lost.name)
        try await b.deleteCloudStore(localOnly: false)

        await #expect(throws: ChronicleError.self) { try await a.sync() }
        #expect(try await container().get(lost.name, maxBytes: 1 << 20).isEmpty == false, "a put its log back before it crashed")
        _ = try await a.reload()
        #expect(await a.loadedKind == .local)
        let titles = try await Self.titles(try await a.store)
        #expect(titles.contains("a uploaded, then lost by the container"), "\(titles)")
        try await a.close()
        try await b.close()
    }

    /// Regression: a rebuilt store was deleted everywhere while b's move
    /// into it waited for its baseline (not readable yet). b had already
    /// opened the new store's copy, empty; leaving, it carried from that
    /// copy and dropped its unsynced save, still in the store it was
    /// leaving. The save goes to b's local store.
    @Test func aStoreDeletedWhileAMoveIntoItWaitsKeepsTheMovingDevicesSaves() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        try await Self.saveNote(try await b.store, "b unsynced")
        let rebuilt = try await a.rebuildCloudStore(from: .cloud)
        // The rebuilt store's baseline is not readable yet: b's move waits.
        let aside = root.appendingPathComponent("aside")
        try FileManager.default.createDirectory(at: aside, withIntermediateDirectories: true)
        let baselines = containerURL.appendingPathComponent("blobs").appendingPathComponent(ContainerLayout.baselinesPrefix(store: rebuilt))
        try FileManager.default.moveItem(at: baselines, to: aside.appendingPathComponent("baselines"))
        await #expect(throws: ChronicleError.self) { try await b.sync() }
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("b/\(rebuilt).sqlite").path),
                "b opened its copy of the rebuilt store before it waited")
        try FileManager.default.moveItem(at: aside.appendingPathComponent("baselines"), to: baselines)
        try await a.deleteCloudStore(localOnly: false)

        _ = try await b.reload()
        #expect(await b.loadedKind == .local)
        let titles = try await Self.titles(try await b.store)
        #expect(titles.contains("b unsynced"), "\(titles)")
        try await a.close()
        try await b.close()
    }

    /// Regression: rebuilding the cloud content from the local store (a
    /// rebuild `from: .local`, or turning the cloud on with
    /// `overwriteCloudWithLocal`) uploaded this device's unsynced cloud
    /// saves into the store being replaced first, where no device carried
    /// them: every other device's unsynced saves reached the new store, and
    /// this device's did not.
    @Test(arguments: [false, true]) func replacingTheCloudWithTheLocalStoreKeepsThisDevicesUnsyncedSaves(viaEnable: Bool) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        try await Self.saveNote(try await a.store, "a unsynced")
        try await Self.saveNote(try await b.store, "b unsynced")
        if viaEnable {
            try await a.setCloudEnabled(false)
            try await a.setCloudEnabled(true, localData: .overwriteCloudWithLocal)
        } else {
            _ = try await a.rebuildCloudStore(from: .local)
        }
        try await b.sync()
        try await a.sync()
        try await b.sync()
        for m in [a, b] {
            let titles = try await Self.titles(try await m.store)
            #expect(titles.contains("a unsynced") && titles.contains("b unsynced"), "\(titles)")
        }
        try await a.close()
        try await b.close()
    }

    /// Regression: an active-store pointer a sync service truncated (or
    /// filled with garbage) stopped every device, even from turning the
    /// cloud off, until someone deleted it by hand. It is repaired: the
    /// devices go on, on one store, with every save.
    @Test(arguments: ["garbage", "\0\0\0\0\0\0\0\u{1}garbage"]) func anUnreadablePointerIsRepaired(content: String) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a")
        try await Self.saveNote(try await b.store, "b")
        for m in [a, b] { try await m.sync() }
        let store = try await a.store.storeID
        try await a.close()
        try await b.close()
        try Data(content.utf8).write(to: containerURL.appendingPathComponent("markers").appendingPathComponent("active-store"))
        let a2 = try await manager("a", cloudByDefault: true)
        let b2 = try await manager("b", cloudByDefault: true)
        for m in [a2, b2, a2, b2] { try await m.sync() }
        #expect(try await activeStore() == store)
        for m in [a2, b2] {
            #expect(await m.loadedKind == .cloud)
            #expect(try await Self.titles(try await m.store) == ["a", "b"])
        }
        try await a2.close()
        try await b2.close()
    }

    /// Regression: a page of the device's snapshot overwritten (a disk
    /// fault) left the device failing every command for good, with its
    /// unsynced save stuck in the file. The damaged file is kept aside, the
    /// store loaded again from the container under a new device ID, and the
    /// saves not uploaded yet that could be read back are saved again.
    @Test(arguments: [2, 3]) func aDamagedPageOfTheSnapshotIsRecoveredFromWithTheUnsyncedSave(page: Int) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var a = try await manager("a", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await Self.saveNote(try await a.store, "a unsynced")
        let store = try await a.store.storeID
        try await a.close()
        let path = root.appendingPathComponent("a").appendingPathComponent("\(store).sqlite").path
        let file = try #require(FileHandle(forUpdatingAtPath: path))
        try file.seek(toOffset: UInt64(page * 4096))
        try file.write(contentsOf: Data(repeating: 0xFF, count: 4096))
        try file.close()
        a = try await manager("a", cloudByDefault: true)
        try await a.sync()
        try await a.sync()
        #expect(try await Self.titles(try await a.store) == ["a synced", "a unsynced"])
        #expect(try await containerTitles() == ["a synced", "a unsynced"])
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("a").appendingPathComponent("retired").path),
                "the damaged file is kept aside")
        try await a.close()
    }

    /// a deletes the store everywhere while b switches at the same moment,
    /// with unsynced saves in both of b's stores. b ends in a consistent
    /// state with every save it made.
    @Test(arguments: [true, false]) func deletingEverywhereWhileAnotherDeviceSwitches(bTurnsOn: Bool) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        try await a.sync()
        try await b.sync()
        try await Self.saveNote(try await b.store, "b cloud unsynced")
        if bTurnsOn {
            try await b.setCloudEnabled(false)
            try await Self.saveNote(try await b.store, "b local")
        }
        async let deletion: Void = a.deleteCloudStore(localOnly: false)
        async let toggle = b.setCloudEnabled(bTurnsOn)
        try await deletion
        do { _ = try await toggle } catch { #expect(error is ChronicleError, "\(error)") }
        if await b.loadedKind == nil { try await b.reload() }
        _ = try? await b.sync()
        try await expectConsistent(b, "b")
        // Wherever b ended, its saves are not lost: b's user finds them in
        // one of its stores once the cloud is turned on again (which carries
        // a deleted store's unsynced saves to the local store) and off.
        var seen = Set(try await Self.titles(try await b.store))
        for enabled in [true, false] {
            _ = try await b.setCloudEnabled(enabled)
            _ = try await b.sync()
            seen.formUnion(try await Self.titles(try await b.store))
        }
        #expect(seen.contains("b cloud unsynced"), "\(seen.sorted())")
        if bTurnsOn { #expect(seen.contains("b local"), "\(seen.sorted())") }
        try await a.close()
        try await b.close()
    }

    /// A waiter for b's first sync, when another device deletes the store
    /// and b falls back to its local store: the docs say the waiter is told
    /// `storeNotLoaded`.
    @Test func aFirstSyncWaiterWhoseStoreIsDeletedIsToldSo() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        try await Self.saveNote(try await b.store, "b pending")
        let waiter = Task { try await b.waitForFirstSync() }
        try await Task.sleep(for: .milliseconds(50))
        try await a.deleteCloudStore(localOnly: false)
        try await b.sync()
        #expect(await b.loadedKind == .local)
        let outcome: Result<Void, any Error> = await waiter.result
        do {
        if case .failure(let error) = outcome {
            #expect((error as? ChronicleError)?.code == .storeNotLoaded)
        } else {
            Issue.record("waitForFirstSync returned normally though the cloud store it waited for was deleted")
        }
    }
        try await a.close()
        try await b.close()
    }

    // MARK: Rebuilding

    /// a rebuilds; b, which has not synced since, rebuilds too (an app's
    /// maintenance button, the health monitor on a stale device). b's
    /// rebuild must fail with `markerConflict` and leave a's move in place:
    /// every device, b and an away device c included, ends on a's store
    /// with its saves.
    @Test func aStaleDeviceRebuildingAfterAnotherKeepsEveryDeviceMoving() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        var c = try await manager("c", cloudByDefault: true)
        let old = try await a.store.storeID
        try await Self.saveNote(try await a.store, "a synced")
        for m in [a, b, c] { try await m.sync() }
        try await Self.saveNote(try await b.store, "b pending")
        try await Self.saveNote(try await c.store, "c pending")
        try await c.close()

        let first = try await a.rebuildCloudStore()
        let error = await #expect(throws: ChronicleError.self) { try await b.rebuildCloudStore() }
        #expect(error?.code == .markerConflict)
        #expect(try await activeStore() == first)
        do {
        let supersession = try await container().readMarker(ContainerLayout.supersession(store: old), as: StoreSupersession.self)
        #expect(supersession?.payload.store == first, "the old store still names its successor")
    }
        try await b.sync()
        c = try await manager("c")
        for _ in 0..<2 { for m in [a, b, c] { try await m.sync() } }
        let cTitles = try await Self.titles(try await c.store)
        do {
        #expect(try await b.store.storeID == first)
        #expect(cTitles.contains("c pending"), "c's own acknowledged save is still on c: \(cTitles)")
        let titles = try await Self.titles(try await a.store)
        #expect(titles == ["a synced", "b pending", "c pending"], "\(titles)")
        #expect(try await containerTitles() == ["a synced", "b pending", "c pending"])
    }
        for m in [a, b, c] { try await m.close() }
    }

    /// The container's account marker is damaged (cut short, or not JSON):
    /// the devices go on, on the same store with their saves; the first to
    /// sync writes the marker again with the token it knew, so no device
    /// takes it for another account.
    @Test(arguments: ["xx\n", "{\"tok"])
    func aDamagedAccountMarkerIsWrittenAgainNotTakenForAnotherAccount(garbage: String) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        let store = try await a.store.storeID
        try await Self.saveNote(try await a.store, "a1")
        for m in [a, b] { try await m.sync() }
        let token = try #require(try await container().readMarker(ContainerLayout.account, as: AccountToken.self)?.payload.token)
        let file = containerURL.appendingPathComponent("markers/account")
        if garbage.hasPrefix("{") {
            // A marker whose version header is whole and whose JSON is cut short.
            var bytes = try Data(contentsOf: file)
            bytes = bytes.prefix(8) + Data(garbage.utf8)
            try bytes.write(to: file)
        } else {
            try Data(garbage.utf8).write(to: file)
        }
        try await Self.saveNote(try await b.store, "b1")
        for _ in 0..<2 { for m in [a, b] { try await m.sync() } }
        #expect(try await container().readMarker(ContainerLayout.account, as: AccountToken.self)?.payload.token == token)
        for m in [a, b] {
            #expect(try await m.store.storeID == store)
            #expect(try await Self.titles(try await m.store) == ["a1", "b1"])
        }
        for m in [a, b] { try await m.close() }
    }

    /// Two stores are active (one made while the pointer was missing) and
    /// the container loses the pointer again. A device that turns the cloud
    /// on cannot tell which to join; the devices on them put the pointer
    /// back, the two are ranked as usual, and everyone ends on one store
    /// with every save.
    @Test func devicesOnTwoStoresPutALostPointerBack() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let first = try await a.store.storeID
        try await Self.saveNote(try await a.store, "a1")
        try await a.sync()
        // b makes a second store while the pointer and a's store are out of sight.
        let aside = root.appendingPathComponent("aside")
        try await container().deleteMarker(ContainerLayout.activeStore, expected: nil)
        try FileManager.default.moveItem(at: containerURL.appendingPathComponent("blobs/\(first)"), to: aside)
        let b = try await manager("b", cloudByDefault: true)
        let second = try await b.store.storeID
        #expect(second != first)
        try await Self.saveNote(try await b.store, "b1")
        try await b.sync()
        try FileManager.default.moveItem(at: aside, to: containerURL.appendingPathComponent("blobs/\(first)"))
        try await container().deleteMarker(ContainerLayout.activeStore, expected: nil)

        var c = try await manager("c", cloudByDefault: true)
        #expect(await c.loadedKind != .cloud, "with two stores and no pointer, c cannot tell which to join")
        try await c.close()
        for _ in 0..<2 { for m in [a, b] { try await m.sync() } }
        #expect(try await activeStore() == first, "the store made first wins")
        c = try await manager("c", cloudByDefault: true)
        try await c.sync()
        for m in [a, b, c] {
            #expect(try await m.store.storeID == first)
            #expect(try await Self.titles(try await m.store) == ["a1", "b1"])
        }
        for m in [a, b, c] { try await m.close() }
    }

    /// Two devices rebuild at the same moment: one wins, the other is told
    /// `markerConflict`, and every device converges on the winner with
    /// every save.
    @Test func twoDevicesRebuildingAtOnceConverge() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        var c = try await manager("c", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "a synced")
        for m in [a, b, c, a] { try await m.sync() }
        try await Self.saveNote(try await a.store, "a pending")
        try await Self.saveNote(try await b.store, "b pending")
        try await Self.saveNote(try await c.store, "c pending")
        try await c.close()

        let ra = Task { try await a.rebuildCloudStore() }
        let rb = Task { try await b.rebuildCloudStore() }
        let results: [Result<StoreID, any Error>] = [await ra.result, await rb.result]
        let winners = results.compactMap { try? $0.get() }
        #expect(winners.count <= 1, "devices only ever move to one store")
        for case .failure(let error) in results {
            #expect((error as? ChronicleError)?.code == .markerConflict, "\(error)")
        }
        c = try await manager("c")
        for _ in 0..<3 { for m in [a, b, c] { _ = try? await m.sync() } }
        let active = try await activeStore()
        let expected = ["a pending", "a synced", "b pending", "c pending"]
        do {
        for (name, m) in [("a", a), ("b", b), ("c", c)] {
            let on = try await m.store.storeID
            let titles = try await Self.titles(try await m.store)
            #expect(on == active, "\(name) is on \(on); the rebuilds ended \(results)")
            #expect(titles == expected, "\(name)")
        }
        #expect(try await containerTitles() == expected)
    }
        for m in [a, b, c] { try await m.close() }
    }

    /// a rebuilds twice in a row while c is away with a pending save and an
    /// update of a's note: c follows both moves when it loads.
    @Test func rebuildingTwiceInARowMovesAnAwayDeviceAcrossBoth() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        var c = try await manager("c", cloudByDefault: true)
        let note = try await Self.saveNote(try await a.store, "a synced")
        for m in [a, c] { try await m.sync() }
        try await Self.saveNote(try await c.store, "c pending")
        try await c.store.write { tx in tx.update("Note", id: note, ["title": .string("a synced, renamed by c")]) }
        try await c.close()

        let first = try await a.rebuildCloudStore()
        try await Self.saveNote(try await a.store, "a in first")
        try await a.sync()
        let second = try await a.rebuildCloudStore()
        #expect(first != second)
        #expect(try await activeStore() == second)

        c = try await manager("c")
        for _ in 0..<2 { for m in [a, c] { try await m.sync() } }
        let expected = ["a in first", "a synced, renamed by c", "c pending"]
        #expect(try await c.store.storeID == second)
        #expect(try await Self.titles(try await c.store) == expected)
        #expect(try await Self.titles(try await a.store) == expected)
        #expect(try await containerTitles() == expected)
        for m in [a, c] { try await m.close() }
    }

    /// c is away with a pending save while a rebuilds the store and then
    /// deletes the new one everywhere. When c loads, the store it would move
    /// to is deleted: the docs promise it falls back to its local store with
    /// its pending save, and turns the cloud off; the deleted store never
    /// comes back, and neither does the superseded one.
    @Test func aDeviceAwayAcrossARebuildAndADeletionFallsBackWithItsSaves() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        var c = try await manager("c", cloudByDefault: true)
        let old = try await a.store.storeID
        try await Self.saveNote(try await a.store, "a synced")
        for m in [a, c] { try await m.sync() }
        try await Self.saveNote(try await c.store, "c pending")
        try await c.close()

        let rebuilt = try await a.rebuildCloudStore()
        try await a.deleteCloudStore(localOnly: false)
        #expect(try await activeStore() == nil)

        c = try await manager("c")
        _ = try? await c.sync()
        let kind = await c.loadedKind
        let storeID = try? await c.store.storeID
        let titles = (try? await Self.titles(try await c.store)) ?? []
        #expect(titles.contains("c pending"), "c's save is kept, wherever it is: \(titles)")
        do {
        #expect(kind == .local)
        #expect(await c.cloudEnabled == false)
        #expect(storeID != rebuilt && storeID != old)
        #expect(try await activeStore() == nil, "no deleted or superseded store is made active again")
    }
        try await a.close()
        try await c.close()
    }

    // MARK: Restoring old copies

    /// The device's folder is copied (a backup), the device goes on saving
    /// (and uploads), then the old copy is restored. What was uploaded stays
    /// in the container, and the restored device's new saves reach everyone.
    @Test func restoringAnOldCopyOfTheFolderLosesNothingUploaded() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var a = try await manager("a", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "before the copy")
        try await a.sync()
        try await a.close()
        try copyFolder("a", to: "a-copy")

        a = try await manager("a")
        try await Self.saveNote(try await a.store, "after the copy, uploaded")
        try await a.sync()
        try await a.setCloudEnabled(false)
        try await Self.saveNote(try await a.store, "after the copy, local")
        try await a.setCloudEnabled(true)
        try await a.sync()
        try await a.close()

        try restoreFolder("a", from: "a-copy")
        a = try await manager("a")
        #expect(await a.loadedKind == .cloud)
        try await a.sync()
        try await Self.saveNote(try await a.store, "after the restore")
        try await a.sync()
        try await a.sync()
        let expected = ["after the copy, local", "after the copy, uploaded", "after the restore", "before the copy"]
        #expect(try await Self.titles(try await a.store) == expected)
        #expect(try await containerTitles() == expected)
        try await a.close()
    }

    /// A copy of the folder holds a save that was pending when it was made.
    /// The save is uploaded, the store rebuilt, and another device renames
    /// the note in the new store. Restoring the copy must not put the old
    /// title back over the newer, acknowledged one.
    @Test func restoringAnOldCopyAcrossARebuildDoesNotRevertLaterSaves() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var a = try await manager("a", cloudByDefault: true)
        let b = try await manager("b", cloudByDefault: true)
        let note = try await Self.saveNote(try await a.store, "a original")
        try await a.close()
        try copyFolder("a", to: "a-copy")    // the save is still pending in the copy

        a = try await manager("a")
        try await a.sync()
        try await b.sync()
        let new = try await b.rebuildCloudStore()
        try await b.store.write { tx in tx.update("Note", id: note, ["title": .string("renamed by b later")]) }
        try await b.sync()
        try await a.sync()
        #expect(try await Self.title(try await a.store, note) == "renamed by b later")
        try await a.close()

        try restoreFolder("a", from: "a-copy")
        a = try await manager("a")
        for _ in 0..<2 { for m in [a, b] { try await m.sync() } }
        #expect(try await a.store.storeID == new)
        do {
        #expect(try await Self.title(try await b.store, note) == "renamed by b later")
        #expect(try await Self.title(try await a.store, note) == "renamed by b later")
    }
        #expect(try await b.store.stateHash() == a.store.stateHash(), "they converge either way")
        try await a.close()
        try await b.close()
    }

    // MARK: The manager's files

    @Test(arguments: ["empty", "directory", "symlink", "dangling symlink", "fifo", "wrong shape", "huge"])
    func aDamagedStateFileIsATypedErrorNeverACrashOrHang(damage: String) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a")
        try await Self.saveNote(try await m.store, "local")
        try await m.close()
        let file = root.appendingPathComponent("a/manager.json")
        try FileManager.default.removeItem(at: file)
        switch damage {
        case "empty": try Data().write(to: file)
        case "directory": try FileManager.default.createDirectory(at: file, withIntermediateDirectories: false)
        case "symlink":
            let target = root.appendingPathComponent("elsewhere.json")
            try Data(#"{"cloudEnabled": true, "mergePending": true}"#.utf8).write(to: target)
            try FileManager.default.createSymbolicLink(at: file, withDestinationURL: target)
        case "dangling symlink": try FileManager.default.createSymbolicLink(atPath: file.path, withDestinationPath: "/nonexistent/manager.json")
        case "fifo": #expect(mkfifo(file.path, 0o600) == 0)
        case "wrong shape": try Data(#"{"cloudEnabled": "yes", "leaving": 42}"#.utf8).write(to: file)
        default: try Data(repeating: 0x20, count: 50_000_000).write(to: file)
        }
        let opened = Task { try await manager("a") }
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            // Unblock a reader stuck on the fifo, then fail.
            let fd = open(file.path, O_WRONLY | O_NONBLOCK)
            if fd >= 0 { close(fd) }
            Issue.record("opening a manager on a damaged manager.json (\(damage)) hung")
        }
        let result = await opened.result
        watchdog.cancel()
        switch result {
        case .success(let again):
            Issue.record("a damaged manager.json (\(damage)) opened without an error")
            try await again.close()
        case .failure(let error):
            #expect(error is ChronicleError, "\(error)")
            #expect((error as? ChronicleError)?.message.contains("manager.json") == true, "\(error)")
        }
        // The folder is let go: moving the file aside starts afresh, with the local data.
        try FileManager.default.removeItem(at: file)
        let fresh = try await manager("a")
        #expect(try await Self.titles(try await fresh.store) == ["local"])
        try await fresh.close()
    }

    /// manager.json names a store to leave that never existed, and pending
    /// work that cannot be done: the manager opens and loads something
    /// sensible, or says why, and a reload settles it.
    @Test func aStateFileNamingAStoreThatNeverExisted() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "synced")
        try await a.sync()
        try await a.close()
        let bogus = StoreID(RecordID(high: 0x0190_0000_0000_7000, low: 0x8000_0000_0000_0042))
        let state = #"{"cloudEnabled": true, "mergePending": true, "overwritePending": false, "leaving": "\#(bogus)"}"#
        try Data(state.utf8).write(to: root.appendingPathComponent("a/manager.json"))
        let m: StoreManager
        do {
            m = try await manager("a")
        } catch {
            #expect(error is ChronicleError, "\(error)")
            return
        }
        if await m.loadedKind == nil { _ = try? await m.reload() }
        try await expectConsistent(m, "a")
        if await m.loadedKind == .cloud {
            try await m.sync()
            #expect(try await Self.titles(try await m.store) == ["synced"])
        }
        try await m.close()
    }

    // MARK: Two owners of one folder

    /// A plain `Store` holds the folder first: the manager opens with
    /// nothing loaded and a typed reason, and a reload works once the store
    /// is closed. A plain `Store` on the local store's folder is refused.
    @Test func aPlainStoreAndAManagerOnOneFolder() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let plain = try await peer("a")
        try await Self.saveNote(plain, "plain")
        let m = try await manager("a")
        #expect(await m.cloudEnabled, "the folder holds a cloud store's files")
        #expect(await m.loadedKind == nil)
        let error = await #expect(throws: ChronicleError.self) { _ = try await m.store }
        #expect(error?.code == .storeNotLoaded)
        let syncError = await #expect(throws: ChronicleError.self) { try await m.sync() }
        #expect(syncError?.code == .storeNotLoaded)
        try await plain.close()
        try await m.reload()
        #expect(try await Self.titles(try await m.store) == ["plain"])

        try await m.setCloudEnabled(false)
        var localConfiguration = try storeConfiguration("a/local/device")
        localConfiguration.container = try DirectoryContainer(root: root.appendingPathComponent("a/local/container"))
        let intruder = await #expect(throws: ChronicleError.self) { _ = try await Store.open(localConfiguration) }
        #expect(intruder?.code == .invalidValue, "the manager's own folder, in use or not")
        // And a plain store on the manager's folder, while the local store is loaded, must not end up beside it.
        let sneaky = try? await peer("a")
        let switched = await outcome { try await m.setCloudEnabled(true) }
        if case .failure(let e) = switched { #expect(e is ChronicleError, "\(e)") }
        try await sneaky?.close()
        if await m.loadedKind == nil { try await m.reload() }
        #expect(try await Self.titles(try await m.store) == ["plain"])
        try await m.close()
    }

    // MARK: Nothing loaded, or closed

    /// With nothing loaded (a failed load), every operation that needs a
    /// store throws `storeNotLoaded`; none waits or crashes.
    @Test func everyOperationWithNothingLoadedIsATypedError() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a")
        try await Self.saveNote(try await m.store, "local")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("a/device.json"), withIntermediateDirectories: true)
        await #expect(throws: ChronicleError.self) { try await m.setCloudEnabled(true) }
        #expect(await m.loadedKind == nil)

        func expectNotLoaded(_ what: String, _ body: () async throws -> Void) async {
            do {
                try await body()
                Issue.record("\(what) succeeded with nothing loaded")
            } catch {
                #expect((error as? ChronicleError)?.code == .storeNotLoaded, "\(what): \(error)")
            }
        }
        await expectNotLoaded("store") { _ = try await m.store }
        await expectNotLoaded("sync") { _ = try await m.sync() }
        await expectNotLoaded("rebuild") { _ = try await m.rebuildCloudStore() }
        await expectNotLoaded("rebuild from local") { _ = try await m.rebuildCloudStore(from: .local) }
        await expectNotLoaded("delete locally") { try await m.deleteCloudStore(localOnly: true) }
        await expectNotLoaded("delete everywhere") { try await m.deleteCloudStore(localOnly: false) }
        await expectNotLoaded("migrate") { _ = try await m.migrateCloudToLocal() }
        await expectNotLoaded("waitForFirstSync") { try await m.waitForFirstSync() }
        #expect(try await m.checkCloudContent() == false)
        #expect(try await m.syncStatus().kind == nil)

        try FileManager.default.removeItem(at: root.appendingPathComponent("a/device.json"))
        try await m.setCloudEnabled(false)
        #expect(try await Self.titles(try await m.store) == ["local"])
        try await m.close()
    }

    /// A closed manager "cannot be used afterwards". An app that kept a
    /// reference and calls it after another manager took the folder must get
    /// an error, and must not touch the other manager's stores or choice.
    @Test func aClosedManagerTouchesNothing() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let stale = try await manager("a")
        try await Self.saveNote(try await stale.store, "before close")
        try await stale.close()
        let current = try await manager("a")
        try await Self.saveNote(try await current.store, "saved by the current manager")

        let attempts: [(String, () async throws -> Void)] = [
            ("setCloudEnabled", { _ = try await stale.setCloudEnabled(true) }),
            ("reload", { _ = try await stale.reload() }),
            ("deleteLocalStore", { try await stale.deleteLocalStore() }),
            ("sync", { _ = try await stale.sync() }),
            ("rebuildCloudStore", { _ = try await stale.rebuildCloudStore() }),
            ("deleteCloudStore", { try await stale.deleteCloudStore(localOnly: false) }),
            ("migrateCloudToLocal", { _ = try await stale.migrateCloudToLocal() }),
            ("waitForFirstSync", { try await stale.waitForFirstSync() }),
            ("close again", { try await stale.close() }),
        ]
        var used: [String] = []
        for (name, attempt) in attempts {
            do {
                try await attempt()
                if name != "close again" { used.append(name) }
            } catch {
                #expect(error is ChronicleError, "\(name): \(error)")
            }
        }
        do {
        #expect(used.isEmpty, "a closed manager still ran: \(used)")
    }
        try? await stale.close()
        // The current manager's save is still there, and its choice stands.
        #expect(await current.cloudEnabled == false)
        try await current.reload()
        let titles = try await Self.titles(try await current.store)
        do {
        #expect(titles == ["before close", "saved by the current manager"], "\(titles)")
        try await expectConsistent(current, "a")
    }
        try await current.close()
    }

    // MARK: Seed data

    func seededOpen(_ seed: StoreManager.SeedData) async throws -> (StoreManager, Result<StoreManager.MergeReport?, any Error>) {
        let m = try await manager("a", seedData: seed)
        try await Self.saveNote(try await m.store, "local")
        let result = await outcome { try await m.setCloudEnabled(true) }
        return (m, result)
    }

    @Test func seedDataNamingAnUnknownEntityOrFieldIsATypedErrorAndMakesNothingActive() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        for (seed, code) in [(StoreManager.SeedRecord(entity: "Ghost", values: [:]), ChronicleError.Code.unknownEntity),
                             (StoreManager.SeedRecord(entity: "Folder", values: ["colour": .string("red")]), .unknownAttribute)] {
            let (m, result) = try await seededOpen(.records([seed]))
            if case .failure(let error) = result {
                #expect((error as? ChronicleError)?.code == code, "\(error)")
            } else {
                Issue.record("seed data \(seed) was accepted")
            }
            #expect(try await activeStore() == nil)
            try await m.setCloudEnabled(false)
            #expect(try await Self.titles(try await m.store) == ["local"])
            try await m.close()
            try FileManager.default.removeItem(at: root)
        }
    }

    @Test func seedDataWithAValueOfTheWrongTypeIsATypedError() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (m, result) = try await seededOpen(.records([StoreManager.SeedRecord(entity: "Note", values: ["title": .int(42)])]))
        if case .failure(let error) = result {
            #expect(error is ChronicleError, "\(error)")
            #expect(try await activeStore() == nil)
        } else {
            let titles = try await Self.titles(try await m.store)
            Issue.record("a seed note whose title is an integer was accepted: \(titles)")
        }
        try await m.close()
    }

    /// A seed note refers to a folder the seed does not have, and another to
    /// a note where a folder belongs. A typed error, or the notes with their
    /// reference cleared: never a crash, a hang, or a silently dropped note.
    @Test func seedDataReferringToMissingOrWrongRecords() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let missing = RecordID(high: 0x0190_0000_0000_7000, low: 0x8000_0000_0000_0099)
        let note = RecordID(high: 0x0190_0000_0000_7000, low: 0x8000_0000_0000_0001)
        let (m, result) = try await seededOpen(.records([
            StoreManager.SeedRecord(entity: "Note", id: note, values: ["title": .string("orphan"), "folder": .reference(missing)]),
            StoreManager.SeedRecord(entity: "Note", values: ["title": .string("wrong target"), "folder": .reference(note)]),
        ]))
        if case .failure(let error) = result {
            #expect(error is ChronicleError, "\(error)")
            #expect(try await activeStore() == nil)
        } else {
            let store = try await m.store
            #expect(try await Self.titles(store) == ["local", "orphan", "wrong target"])
            let dangling = try await store.read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Note WHERE folder IS NOT NULL AND folder NOT IN (SELECT id FROM Folder)")
            }
            #expect(dangling == 1, "only local's note has a folder")
            #expect(try await containerTitles() == ["local", "orphan", "wrong target"])
        }
        try await m.close()
    }

    /// Two seed records share an ID (a copy-paste in the app's seed list).
    /// The rules: bad input gets a typed error, never a silent skip.
    @Test func seedDataWithDuplicateIDsIsATypedError() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let id = RecordID(high: 0x0190_0000_0000_7000, low: 0x8000_0000_0000_0007)
        let (m, result) = try await seededOpen(.records([
            StoreManager.SeedRecord(entity: "Folder", id: id, values: ["name": .string("Inbox")]),
            StoreManager.SeedRecord(entity: "Note", id: id, values: ["title": .string("Welcome")]),
        ]))
        do {
        if case .failure(let error) = result {
            #expect(error is ChronicleError, "\(error)")
        } else {
            Issue.record("seed data with two records of one ID was accepted")
        }
    }
        if case .success = result {
            let store = try await m.store
            let folders = try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Folder") }
            let titles = try await Self.titles(store)
            #expect(titles.contains("local"), "\(titles)")
            #expect(folders! >= 1)
        }
        try await m.close()
    }

    /// Seed records with one unique key twice, and the same key as a local
    /// record: one folder in the end.
    @Test func seedDataWithADuplicateUniqueKeyEndsAsOneRecord() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a", seedData: .records([
            StoreManager.SeedRecord(entity: "Folder", values: ["name": .string("folder of local")]),
            StoreManager.SeedRecord(entity: "Folder", values: ["name": .string("folder of local")]),
        ]))
        try await Self.saveNote(try await m.store, "local")
        let result = await outcome { try await m.setCloudEnabled(true) }
        if case .failure(let error) = result {
            #expect(error is ChronicleError, "\(error)")
        } else {
            try await m.sync()
            let store = try await m.store
            #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Folder") } == 1)
            #expect(try await Self.titles(store) == ["local"])
            let linked = try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Note WHERE folder IN (SELECT id FROM Folder)") }
            #expect(linked == 1, "the local note points at the one folder")
        }
        try await m.close()
    }

    // MARK: The container goes away

    /// The container folder is deleted (not moved: gone) while a device
    /// works on the cloud store. Each operation says why it cannot go on,
    /// with a typed error, and nothing acknowledged is lost.
    @Test func theContainerRemovedUnderEachOperation() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let a = try await manager("a", cloudByDefault: true)
        try await Self.saveNote(try await a.store, "synced")
        try await a.sync()
        try await Self.saveNote(try await a.store, "pending")
        let saved = root.appendingPathComponent("saved-container")
        try FileManager.default.copyItem(at: containerURL, to: saved)
        try FileManager.default.removeItem(at: containerURL)

        let local = await outcome { try await a.deleteCloudStore(localOnly: true) }
        if case .failure(let error) = local { #expect(error is ChronicleError, "\(error)") }
        #expect(await a.loadedKind == .cloud)
        #expect(Set(try await Self.titles(try await a.store)) == ["synced", "pending"], "nothing deleted")

        for (name, op) in [("rebuild", { _ = try await a.rebuildCloudStore() }), ("sync", { _ = try await a.sync() }),
                           ("migrate", { _ = try await a.migrateCloudToLocal(deleteCloudStore: true) })] as [(String, () async throws -> Void)] {
            try? FileManager.default.removeItem(at: containerURL)
            do { try await op() } catch { #expect(error is ChronicleError, "\(name): \(error)") }
            try await expectConsistent(a, "a")
            if await a.loadedKind == nil { _ = try? await a.reload() }
        }
        // Wherever a is now, every save is still with it.
        var seen = Set(try await Self.titles(try await a.store))
        if await a.loadedKind == .cloud {
            try await a.setCloudEnabled(false)
            seen.formUnion(try await Self.titles(try await a.store))
        }
        #expect(seen.isSuperset(of: ["synced", "pending"]), "\(seen.sorted())")
        try await a.close()
    }

    /// The share goes away while a merge of many records streams into the
    /// cloud store, and comes back: every local record reaches the container.
    @Test func theContainerUnmountedDuringAMergeAndBack() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let other = try await peer("b")
        try await Self.saveNote(other, "from b")
        try await other.sync()
        try await other.close()
        let m = try await manager("a", batch: 3)
        let titles = (0..<120).map { "local \($0)" }
        try await m.store.write { tx in
            for t in titles {
                let f = tx.insert("Folder", ["name": .string("folder of \(t)")])
                _ = tx.insert("Note", ["title": .string(t), "folder": .reference(f)])
            }
        }
        let away = root.appendingPathComponent("unmounted")
        let unmount = Task {
            try await Task.sleep(for: .milliseconds(30))
            try FileManager.default.moveItem(at: containerURL, to: away)
        }
        let result = await outcome { try await m.setCloudEnabled(true) }
        try await unmount.value
        if case .failure(let error) = result { #expect(error is ChronicleError, "\(error)") }
        try await expectConsistent(m, "a")
        try FileManager.default.moveItem(at: away, to: containerURL)
        if await m.loadedKind == nil { try await m.reload() }
        for _ in 0..<2 { try await m.sync() }
        let expected = (titles + ["from b"]).sorted()
        #expect(try await Self.titles(try await m.store).sorted() == expected)
        #expect(try await containerTitles().sorted() == expected)
        try await m.close()
    }
}

/// What an operation ended with, to judge it after the fact.
private func outcome<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
