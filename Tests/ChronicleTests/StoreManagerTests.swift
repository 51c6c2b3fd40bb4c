import Chronicle
import Foundation
import Logging
import Testing

/// The local and the cloud store, the persisted choice between them, and
/// local data brought into the cloud store when the cloud is turned on.
@Suite struct StoreManagerTests {
    // Notes first: their references to folders are to an entity declared
    // later, which a merge must still resolve.
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes")]),
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
    ])

    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-manager-\(UUID().uuidString)")
    var containerURL: URL { root.appendingPathComponent("container") }

    func storeConfiguration(_ device: String) throws -> Store.Configuration {
        Store.Configuration(schema: Self.schema, directory: root.appendingPathComponent(device),
                            container: try DirectoryContainer(root: containerURL, create: true),
                            seed: UInt64(abs(device.hashValue) % 1_000_000), logger: Logger(label: "test"), durability: .normal)
    }

    func manager(_ device: String, batch: Int = 500, cloudByDefault: Bool = false) async throws -> StoreManager {
        try await StoreManager.open(StoreManager.Configuration(store: storeConfiguration(device), cloudEnabledByDefault: cloudByDefault,
                                                               mergeBatchSize: batch))
    }

    /// A plain device on the cloud store, to see what others see.
    func peer(_ device: String) async throws -> Store {
        try await Store.open(storeConfiguration(device))
    }

    static func titles(_ store: Store) async throws -> [String] {
        try await store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title") }
    }

    static func notesWithFolders(_ store: Store) async throws -> [String] {
        try await store.read { db in
            try String.fetchAll(db, sql: """
                SELECT Note.title || '@' || COALESCE(Folder.name, '-') FROM Note LEFT JOIN Folder ON Folder.id = Note.folder ORDER BY Note.title
                """)
        }
    }

    @discardableResult
    static func saveNotes(_ store: Store, folder: String, titles: [String]) async throws -> RecordID {
        try await store.write { tx in
            let f = tx.insert("Folder", ["name": .string(folder)])
            for t in titles { _ = tx.insert("Note", ["title": .string(t), "folder": .reference(f)]) }
            return f
        }
    }

    @Test func aNewDeviceStartsOnItsLocalStoreAndUploadsNothing() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a")
        #expect(await m.cloudEnabled == false)
        #expect(await m.loadedKind == .local)
        let local = try await m.store
        try await Self.saveNotes(local, folder: "Inbox", titles: ["private"])
        let other = try await peer("b")
        try await other.sync()
        #expect(try await Self.titles(other) == [])
        try await other.close()
        try await m.close()
    }

    @Test func turningTheCloudOnMergesLocalRecordsAndDeduplicatesByUniqueKey() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        // Another device has an "Inbox" in the cloud already.
        let other = try await peer("b")
        let cloudInbox = try await Self.saveNotes(other, folder: "Inbox", titles: ["from b"])
        try await other.sync()

        // Batches of one: every reference to a folder is set after the fact.
        let m = try await manager("a", batch: 1)
        let events = m.events()
        let local = try await m.store
        try await Self.saveNotes(local, folder: "Inbox", titles: ["a1", "a2"])
        try await Self.saveNotes(local, folder: "Work", titles: ["a3"])

        let report = try #require(try await m.setCloudEnabled(true))
        #expect(report.copied == 4, "a1, a2, a3 and Work")
        #expect(report.deduplicated == 1, "the local Inbox is the cloud's")
        #expect(report.alreadyPresent == 0)
        #expect(await m.loadedKind == .cloud)
        #expect(await m.cloudEnabled)
        let cloud = try await m.store
        #expect(try await Self.notesWithFolders(cloud) == ["a1@Inbox", "a2@Inbox", "a3@Work", "from b@Inbox"])
        let inboxes = try await cloud.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Folder WHERE name = 'Inbox'") }
        #expect(inboxes == [cloudInbox])

        try await cloud.sync()
        try await other.sync()
        #expect(try await Self.notesWithFolders(other) == ["a1@Inbox", "a2@Inbox", "a3@Work", "from b@Inbox"])
        try await other.close()
        try await m.close()

        var seen: [String] = []
        for await event in events {
            switch event {
            case .willLoad(let kind): seen.append("will \(kind)")
            case .didLoad(let kind, _): seen.append("did \(kind)")
            case .didUnload(let kind): seen.append("unload \(kind)")
            case .mergedLocalData(let r): seen.append("merged \(r.copied)")
            case .failedLoading(let kind, _): seen.append("failed \(kind)")
            }
        }
        #expect(seen == ["unload local", "will cloud", "merged 4", "did cloud", "unload cloud"])
    }

    /// Several devices turn the cloud on at the same moment, each with its
    /// own local data: they end on one store holding everyone's records,
    /// with one folder per unique name.
    @Test(arguments: [2, 5]) func concurrentFirstEnablesEndOnOneStoreWithEveryonesData(devices: Int) async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var managers: [StoreManager] = []
        for d in 0..<devices {
            let m = try await manager("d\(d)")
            try await Self.saveNotes(try await m.store, folder: "Inbox", titles: ["inbox of d\(d)"])
            try await Self.saveNotes(try await m.store, folder: "Folder of d\(d)", titles: ["own of d\(d)"])
            managers.append(m)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for m in managers { group.addTask { try await m.setCloudEnabled(true) } }
            try await group.waitForAll()
        }
        var stores: [Store] = []
        for m in managers { stores.append(try await m.store) }
        #expect(Set(stores.map(\.storeID)).count == 1, "one store")
        for _ in 0..<2 { for s in stores { try await s.sync() } }
        let expected = (0..<devices).flatMap { ["inbox of d\($0)@Inbox", "own of d\($0)@Folder of d\($0)"] }.sorted()
        for s in stores {
            #expect(try await Self.notesWithFolders(s) == expected)
            #expect(try await s.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Folder WHERE name = 'Inbox'") } == 1)
        }
        let hashes = try await withThrowingTaskGroup(of: String.self) { group in
            for s in stores { group.addTask { try await s.stateHash() } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(hashes.count == 1, "every device shows the same state")
        for m in managers { try await m.close() }
    }

    @Test func theChoiceIsKeptAcrossLaunchesAndTurningTheCloudOffGoesBackToTheLocalStore() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var m = try await manager("a")
        try await Self.saveNotes(try await m.store, folder: "Inbox", titles: ["local"])
        try await m.setCloudEnabled(true)
        try await Self.saveNotes(try await m.store, folder: "Cloud", titles: ["cloud only"])
        try await m.close()

        m = try await manager("a")
        #expect(await m.loadedKind == .cloud)
        #expect(try await Self.titles(try await m.store) == ["cloud only", "local"])

        #expect(try await m.setCloudEnabled(false) == nil, "turning the cloud off merges nothing")
        #expect(await m.loadedKind == .local)
        #expect(try await Self.titles(try await m.store) == ["local"], "the local store as the device left it")
        try await m.close()
        m = try await manager("a")
        #expect(await m.loadedKind == .local)
        #expect(await m.cloudEnabled == false)

        // On again: what the cloud already has is left alone.
        let again = try #require(try await m.setCloudEnabled(true))
        #expect(again.copied == 0 && again.alreadyPresent == 2)
        #expect(try await Self.titles(try await m.store) == ["cloud only", "local"])
        try await m.close()
    }

    @Test func useCloudLeavesLocalRecordsWhereTheyAre() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a")
        try await Self.saveNotes(try await m.store, folder: "Inbox", titles: ["local"])
        #expect(try await m.setCloudEnabled(true, localData: .useCloud) == nil)
        #expect(try await Self.titles(try await m.store) == [])
        try await m.setCloudEnabled(false)
        #expect(try await Self.titles(try await m.store) == ["local"])
        try await m.close()
    }

    @Test func aRecordTheCloudDeletedStaysDeletedAndReferencesToItAreCleared() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a")
        let folder = try await Self.saveNotes(try await m.store, folder: "Old", titles: ["keeps"])
        try await m.setCloudEnabled(true)
        try await m.store.write { tx in tx.delete("Folder", id: folder) }
        try await m.setCloudEnabled(false)
        try await Self.saveNotes(try await m.store, folder: "New", titles: ["added later"])
        let report = try #require(try await m.setCloudEnabled(true))
        #expect(report.copied == 2 && report.alreadyPresent == 2)
        #expect(try await Self.notesWithFolders(try await m.store) == ["added later@New", "keeps@-"])
        try await m.close()
    }

    @Test func aFailedLoadLeavesNothingLoadedAndSaysWhy() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a")
        let events = m.events()
        // A file where the cloud store's folder belongs.
        _ = FileManager.default.createFile(atPath: root.appendingPathComponent("a/cloud").path, contents: Data("x".utf8))
        await #expect(throws: ChronicleError.self) { try await m.setCloudEnabled(true) }
        #expect(await m.loadedKind == nil)
        let error = await #expect(throws: ChronicleError.self) { _ = try await m.store }
        #expect(error?.code == .storeNotLoaded)
        #expect(await m.cloudEnabled, "the choice stands; a reload tries it again")

        try FileManager.default.removeItem(at: root.appendingPathComponent("a/cloud"))
        try await m.reload()
        #expect(await m.loadedKind == .cloud)
        try await m.close()
        let closed = await #expect(throws: ChronicleError.self) { _ = try await m.store }
        #expect(closed?.code == .storeNotLoaded)

        var failures = 0
        for await event in events { if case .failedLoading(.cloud, _) = event { failures += 1 } }
        #expect(failures == 1)
    }

    @Test func aSecondManagerOnTheSameFolderIsRefused() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let m = try await manager("a")
        let error = await #expect(throws: ChronicleError.self) { _ = try await manager("a") }
        #expect(error?.code == .deviceInUse)
        try await m.close()
        try await manager("a").close()
    }

    @Test func aDamagedStateFileIsATypedError() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        try await manager("a").close()
        try Data("{not json".utf8).write(to: root.appendingPathComponent("a/manager.json"))
        let error = await #expect(throws: ChronicleError.self) { _ = try await manager("a") }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("manager.json") == true)
    }
}
