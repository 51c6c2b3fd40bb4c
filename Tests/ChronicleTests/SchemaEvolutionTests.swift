import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// An app's schema changes between versions: a device's snapshot migrates
/// in place, logs of an earlier version apply on a later one through the
/// declared renames, a later version's logs wait on an earlier device, and
/// neither version loses a field.
@Suite struct SchemaEvolutionTests {
    static let v1 = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)], unique: [["name"]]),
        Entity("Note", attributes: [Attribute("title", .string), Attribute("body", .string), Attribute("pinned", .bool)],
               relationships: [.toOne("folder", to: "Folder")]),
    ])
    /// Renames Note.body to text and Folder to Notebook, adds an optional
    /// attribute, an attribute with a default, an entity, and an index.
    static let v2 = try! Schema(version: 2, entities: [
        Entity("Notebook", attributes: [Attribute("name", .string)], unique: [["name"]], renamedFrom: ["Folder"]),
        Entity("Note", attributes: [Attribute("title", .string), Attribute("text", .string, renamedFrom: ["body"]),
                                    Attribute("pinned", .bool), Attribute("color", .string, optional: true),
                                    Attribute("rating", .int64, default: .int(3))],
               relationships: [.toOne("folder", to: "Notebook")], indexes: [["title"]]),
        Entity("Tag", attributes: [Attribute("label", .string)]),
    ])

    /// A temporary root with a shared folder container.
    struct Place {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-evolution-\(UUID().uuidString)")
        let container: DirectoryContainer
        init() throws { container = try DirectoryContainer(root: root.appendingPathComponent("shared"), create: true) }

        func open(_ name: String, _ schema: Schema, earlier: [Schema] = [], conversions: [SchemaConversion] = [],
                  crash: CrashInjector? = nil) async throws -> Store {
            var configuration = Store.Configuration(schema: schema, directory: root.appendingPathComponent(name), container: container)
            configuration.earlierSchemas = earlier
            configuration.schemaConversions = conversions
            configuration.crashInjector = crash
            return try await Store.open(configuration)
        }

        /// A store manager on the device folder `name`, with the cloud on.
        func manager(_ name: String, _ schema: Schema) async throws -> StoreManager {
            try await StoreManager.open(StoreManager.Configuration(
                store: Store.Configuration(schema: schema, directory: root.appendingPathComponent(name), container: container),
                cloudEnabledByDefault: true))
        }

        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    @Test func aSnapshotMigratesInPlaceAndKeepsItsData() async throws {
        let place = try Place()
        defer { place.remove() }
        var store = try await place.open("device", Self.v1)
        let (work, uploaded) = try await store.write { tx in
            let folder = tx.insert("Folder", ["name": "Work"])
            let note = tx.insert("Note", ["title": "uploaded", "body": "first", "pinned": true, "folder": folder])
            return (folder, note)
        }
        try await store.sync()
        try await store.write { tx in _ = tx.insert("Note", ["title": "pending", "body": "not uploaded yet", "pinned": false]) }
        try await store.close()

        store = try await place.open("device", Self.v2)
        let rows = try await store.read { db in
            try String.fetchAll(db, sql: "SELECT title || '|' || text || '|' || coalesce(color, '-') || '|' || rating FROM Note ORDER BY title")
        }
        #expect(rows == ["pending|not uploaded yet|-|3", "uploaded|first|-|3"])
        #expect(try await store.read { db in try RecordID?.fetchAll(db, sql: "SELECT folder FROM Note ORDER BY title") } == [nil, work])
        #expect(try await store.read { db in try String.fetchAll(db, sql: "SELECT name FROM Notebook") } == ["Work"])
        #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Tag") } == 0)
        let indexes = try await store.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'Note_index_0'")
        }
        #expect(indexes == ["Note_index_0"])
        // No copy is left once the migration committed.
        let files = try FileManager.default.contentsOfDirectory(atPath: place.root.appendingPathComponent("device").path)
        #expect(!files.contains { $0.contains(".backup") }, "\(files)")

        // The pending save uploads as a later-version log, and a new device
        // on the later version (knowing the earlier one) reads both.
        try await store.write { tx in tx.update("Note", id: uploaded, ["color": "red"]) }
        try await store.sync()
        let fresh = try await place.open("fresh", Self.v2, earlier: [Self.v1])
        let report = try await fresh.sync()
        #expect(report.status == .upToDate, "\(report.imported.failures)")
        #expect(try await fresh.stateHash() == store.stateHash())
        let colors = try await fresh.read { db in try String?.fetchAll(db, sql: "SELECT color FROM Note ORDER BY title") }
        #expect(colors == [nil, "red"])
        try await fresh.close()
        try await store.close()
    }

    @Test func anOlderDeviceKeepsSyncingAndNeitherLosesAField() async throws {
        let place = try Place()
        defer { place.remove() }
        var older = try await place.open("older", Self.v1)
        let newer = try await place.open("newer", Self.v2, earlier: [Self.v1])
        let note = try await older.write { tx in
            tx.insert("Note", ["title": "shared", "body": "from v1", "pinned": false])
        }
        try await older.sync()
        let first = try await newer.sync()
        #expect(first.status == .upToDate && first.imported.appliedLogs == 1, "\(first.imported.failures)")
        // The later version writes its new field and a renamed one; the
        // earlier version writes a field both have.
        try await newer.write { tx in tx.update("Note", id: note, ["color": "green", "text": "edited on v2"]) }
        try await newer.sync()
        try await older.write { tx in tx.update("Note", id: note, ["pinned": true]) }
        let held = try await older.sync()
        #expect(held.imported.held.count == 1 && held.status == .waiting, "the later version's log waits on the earlier device")
        #expect(held.imported.permanentFailures.isEmpty)
        try await newer.sync()
        let onNewer = try await newer.read { db in
            try String.fetchOne(db, sql: "SELECT color || '|' || text || '|' || pinned FROM Note")
        }
        #expect(onNewer == "green|edited on v2|1", "the earlier device's update keeps the later version's fields")

        // The earlier device upgrades: its snapshot migrates, the held log applies.
        try await older.close()
        older = try await place.open("older", Self.v2)
        let after = try await older.sync()
        #expect(after.status == .upToDate, "\(after.imported.failures)")
        #expect(try await older.stateHash() == newer.stateHash())
        let onOlder = try await older.read { db in
            try String.fetchOne(db, sql: "SELECT color || '|' || text || '|' || pinned FROM Note")
        }
        #expect(onOlder == "green|edited on v2|1")
        try await older.close()
        try await newer.close()
    }

    @Test func aChangeNeedingAppCodeIsRefusedAndTouchesNothing() async throws {
        let place = try Place()
        defer { place.remove() }
        var store = try await place.open("device", Self.v1)
        try await store.write { tx in _ = tx.insert("Note", ["title": "kept", "body": "b", "pinned": false]) }
        try await store.close()
        let dropped = try Schema(version: 2, entities: [
            Entity("Folder", attributes: [Attribute("name", .string)], unique: [["name"]]),
            Entity("Note", attributes: [Attribute("title", .string), Attribute("pinned", .int64)],
                   relationships: [.toOne("folder", to: "Folder")]),
        ])
        let error = await #expect(throws: ChronicleError.self) { try await place.open("device", dropped) }
        #expect(error?.code == .unsupportedMigration)
        #expect(error?.message.contains("remove Note.body") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("change Note.pinned from bool attribute to int64 attribute") == true)
        // The same schema version with other content is refused too.
        let sameVersion = try Schema(version: 1, entities: Self.v2.entities)
        let same = await #expect(throws: ChronicleError.self) { try await place.open("device", sameVersion) }
        #expect(same?.code == .schemaMismatch && same?.message.contains("higher version number") == true)
        store = try await place.open("device", Self.v1)
        #expect(try await store.read { db in try String.fetchAll(db, sql: "SELECT body FROM Note") } == ["b"])
        try await store.close()
        // An earlier app version does not open a later version's snapshot.
        store = try await place.open("device", Self.v2)
        try await store.close()
        let back = await #expect(throws: ChronicleError.self) { try await place.open("device", Self.v1) }
        #expect(back?.code == .schemaMismatch && back?.message.contains("open it with the newer app") == true)
    }

    @Test func aUniqueConstraintAddedMergesRecordsSharingAKey() async throws {
        let place = try Place()
        defer { place.remove() }
        let plain = try Schema(version: 1, entities: [Entity("Tag", attributes: [Attribute("label", .string)])])
        let keyed = try Schema(version: 2, entities: [Entity("Tag", attributes: [Attribute("label", .string)], unique: [["label"]])])
        var store = try await place.open("device", plain)
        try await store.write { tx in
            _ = tx.insert("Tag", ["label": "home"])
            _ = tx.insert("Tag", ["label": "home"])
            _ = tx.insert("Tag", ["label": "work"])
        }
        try await store.sync()
        try await store.close()
        store = try await place.open("device", keyed)
        #expect(try await store.read { db in try String.fetchAll(db, sql: "SELECT label FROM Tag ORDER BY label") } == ["home", "work"])
        // A device that replays the same logs under the later version agrees.
        let fresh = try await place.open("fresh", keyed, earlier: [plain])
        try await fresh.sync()
        #expect(try await fresh.stateHash() == store.stateHash())
        try await fresh.close()
        try await store.close()
    }

    @Test func appCodeConvertsAChangedTypeAndDropsARemovedField() async throws {
        let place = try Place()
        defer { place.remove() }
        let v1 = try Schema(version: 1, entities: [
            Entity("Task", attributes: [Attribute("title", .string), Attribute("priority", .string), Attribute("legacy", .string)]),
        ])
        let v2 = try Schema(version: 2, entities: [
            Entity("Task", attributes: [Attribute("title", .string), Attribute("priority", .int64)]),
        ])
        let conversions: [SchemaConversion] = [
            .convert("Task", "priority", in: 2) { old in
                guard case .string(let text) = old else { return .int(0) }
                return .int(Int64(text) ?? 0)
            },
            .drop("Task", field: "legacy", in: 2),
        ]
        var older = try await place.open("older", v1)
        let task = try await older.write { tx in tx.insert("Task", ["title": "a", "priority": "7", "legacy": "x"]) }
        try await older.sync()
        // Without the app's code, the earlier version's logs wait: held,
        // never a corruption.
        let without = try await place.open("without", v2, earlier: [v1])
        let waiting = try await without.sync()
        #expect(waiting.imported.held.count == 1 && waiting.imported.permanentFailures.isEmpty)
        try await without.close()
        let newer = try await place.open("newer", v2, earlier: [v1], conversions: conversions)
        #expect(try await newer.sync().status == .upToDate)
        #expect(try await newer.read { db in try Int.fetchOne(db, sql: "SELECT priority FROM Task") } == 7)
        // A later earlier-version update converts too.
        try await older.write { tx in tx.update("Task", id: task, ["priority": "9", "legacy": "y"]) }
        try await older.sync()
        try await newer.sync()
        #expect(try await newer.read { db in try Int.fetchOne(db, sql: "SELECT priority FROM Task") } == 9)
        try await older.close()
        let error = await #expect(throws: ChronicleError.self) { try await place.open("older", v2) }
        #expect(error?.code == .unsupportedMigration && error?.message.contains("SchemaConversion") == true, "\(error?.message ?? "")")
        older = try await place.open("older", v2, conversions: conversions)
        #expect(try await older.read { db in try Int.fetchOne(db, sql: "SELECT priority FROM Task") } == 9)
        #expect(try await older.stateHash() == newer.stateHash())
        try await older.close()
        try await newer.close()
    }

    @Test func aCrashBeforeTheMigrationCommitsLeavesTheEarlierSnapshot() async throws {
        let place = try Place()
        defer { place.remove() }
        var store = try await place.open("device", Self.v1)
        try await store.write { tx in _ = tx.insert("Note", ["title": "kept", "body": "b", "pinned": false]) }
        try await store.close()
        let crash = CrashInjector { $0 == .schemaMigrationBeforeCommit }
        let error = await #expect(throws: ChronicleError.self) { try await place.open("device", Self.v2, crash: crash) }
        #expect(error?.code == .simulatedCrash)
        // The copy made before the migration is still there, and the
        // snapshot is the earlier version's, whole.
        let files = try FileManager.default.contentsOfDirectory(atPath: place.root.appendingPathComponent("device").path)
        #expect(files.contains { $0.hasSuffix(".schema-v1.backup") }, "\(files)")
        store = try await place.open("device", Self.v1)
        #expect(try await store.read { db in try String.fetchAll(db, sql: "SELECT body FROM Note") } == ["b"])
        try await store.close()
        store = try await place.open("device", Self.v2)
        #expect(try await store.read { db in try String.fetchAll(db, sql: "SELECT text FROM Note") } == ["b"])
        try await store.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: place.root.appendingPathComponent("device").path)
            .allSatisfy { !$0.contains(".schema-v") }, "the copy goes once the migration committed")
        // A copy left by a process that died after the commit goes at the next open.
        let leftover = place.root.appendingPathComponent("device").appendingPathComponent("\(store.storeID).sqlite.schema-v1.backup")
        try Data("left".utf8).write(to: leftover)
        store = try await place.open("device", Self.v2)
        try await store.close()
        #expect(!FileManager.default.fileExists(atPath: leftover.path))
    }

    @Test func aLaterDeviceStartsFromAnEarlierBaselineAndAnEarlierDevicePassesOverALaterOne() async throws {
        let place = try Place()
        defer { place.remove() }
        let older = try await place.open("older", Self.v1)
        let note = try await older.write { tx in tx.insert("Note", ["title": "t", "body": "from the baseline", "pinned": false]) }
        try await older.sync()
        _ = try await older.publishBaseline()
        let newer = try await place.open("newer", Self.v2, earlier: [Self.v1])
        let first = try await newer.sync()
        #expect(first.status == .upToDate, "\(first.imported.failures)")
        #expect(first.imported.baseline != nil, "it started from the earlier version's baseline")
        #expect(try await newer.read { db in try String.fetchAll(db, sql: "SELECT text FROM Note") } == ["from the baseline"])
        // The later device's baseline is newest now; a new earlier-version
        // device passes over it (held) and reads the earlier one.
        try await newer.write { tx in tx.update("Note", id: note, ["color": "blue"]) }
        try await newer.sync()
        _ = try await newer.publishBaseline()
        let late = try await place.open("late", Self.v1)
        let report = try await late.sync()
        #expect(report.imported.held.count >= 1 && report.imported.permanentFailures.isEmpty, "\(report.imported.failures)")
        #expect(try await late.read { db in try String.fetchAll(db, sql: "SELECT body FROM Note") } == ["from the baseline"])
        for store in [older, newer, late] { try await store.close() }
    }

    /// Regression: a device that upgraded its app and saved nothing since
    /// its last baseline has the same clock and vector, and its new
    /// baseline (in the new schema) took the old one's name: the put was
    /// refused (`blobConflict`) until the next save. Each schema's baseline
    /// has a name of its own, and a new device of the later version starts
    /// from the newer one.
    @Test func aBaselinePublishedAfterAnUpgradeWithNoSaveHasANameOfItsOwn() async throws {
        let place = try Place()
        defer { place.remove() }
        var device = try await place.open("device", Self.v1)
        _ = try await device.write { tx in tx.insert("Note", ["title": "t", "body": "kept", "pinned": false]) }
        try await device.sync()
        let before = try await device.publishBaseline()
        try await device.close()
        device = try await place.open("device", Self.v2, earlier: [Self.v1])
        let after = try await device.publishBaseline()
        #expect(after.prefix != before.prefix)
        #expect(after.records == before.records)
        let joiner = try await place.open("joiner", Self.v2, earlier: [Self.v1])
        let report = try await joiner.sync()
        #expect(report.imported.baseline != nil && report.imported.failures.isEmpty, "\(report.imported.failures)")
        #expect(try await joiner.read { db in try String.fetchAll(db, sql: "SELECT text FROM Note") } == ["kept"])
        for store in [device, joiner] { try await store.close() }
    }

    @Test func aStoreManagerSaysWhenLogsWaitForAnAppUpgrade() async throws {
        let place = try Place()
        defer { place.remove() }
        var older = try await place.manager("older", Self.v1)
        let events = older.events()
        let newer = try await place.open("newer", Self.v2, earlier: [Self.v1])
        try await newer.write { tx in _ = tx.insert("Note", ["title": "v2", "text": "t", "pinned": false]) }
        try await newer.sync()
        let report = try await older.sync()
        #expect(report?.imported.held.count == 1)
        #expect(try await older.health().held.count == 1)
        try await older.close()
        var saw: [[String]] = []
        for await event in events {
            if case .waitingForAppUpgrade(_, let logs) = event { saw.append(logs) }
        }
        #expect(saw.count == 1 && saw.first?.count == 1, "\(saw)")
        // Upgraded, the log applies and nothing waits any more.
        older = try await place.manager("older", Self.v2)
        let after = older.events()
        #expect(try await older.sync()?.status == .upToDate)
        #expect(try await older.store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") } == ["v2"])
        try await older.close()
        var cleared = false
        for await event in after {
            if case .waitingForAppUpgrade(_, let logs) = event, logs.isEmpty { cleared = true }
        }
        #expect(cleared)
        try await newer.close()
    }

    @Test func aLaterDeviceLearnsAnEarlierVersionFromTheStoresRecord() async throws {
        let place = try Place()
        defer { place.remove() }
        let older = try await place.open("older", Self.v1)
        try await older.write { tx in _ = tx.insert("Note", ["title": "t", "body": "from v1", "pinned": false]) }
        try await older.sync()
        let record = ContainerLayout.schema(store: older.storeID, hash: Self.v1.hash)
        #expect(try await place.container.readMarker(record) != nil, "the store records the schema its logs use")
        // A device on the later version that was given no earlier schema
        // reads the record, and the log through the migration.
        var newer = try await place.open("newer", Self.v2)
        let report = try await newer.sync()
        #expect(report.status == .upToDate, "\(report.imported.failures)")
        #expect(try await newer.read { db in try String.fetchAll(db, sql: "SELECT text FROM Note") } == ["from v1"])
        try await newer.close()
        // It keeps what it learned.
        try await older.write { tx in _ = tx.insert("Note", ["title": "u", "body": "again", "pinned": true]) }
        try await older.sync()
        // (The record is then replaced by another schema's JSON.)
        let forged = String(decoding: try JSONEncoder().encode(Self.v2.jsonValue), as: UTF8.self)
        _ = try await place.container.replaceMarker(record, Array(forged.utf8), expected: try #require(try await place.container.readMarker(record)).version)
        if CrashSafetyTests.binary != nil {
            // `chronicle verify` names it.
            let verify = try CLIErrorTests.run(["verify", "--container", place.root.appendingPathComponent("shared").path])
            #expect(verify.status == 1 && String(decoding: verify.stdout, as: UTF8.self).contains("the schema record holds schema \(Self.v2.hashString)"),
                    "\(String(decoding: verify.stdout, as: UTF8.self))")
        }
        newer = try await place.open("newer", Self.v2)
        #expect(try await newer.sync().status == .upToDate)
        #expect(try await newer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") } == 2)
        try await newer.close()
        // A record that does not hash to its name teaches nothing: a new
        // device holds the earlier version's logs.
        let fooled = try await place.open("fooled", Self.v2)
        let held = try await fooled.sync()
        #expect(held.imported.held.count == 1 && held.imported.permanentFailures.isEmpty, "\(held.imported.failures)")
        try await fooled.close()
        try await older.close()
    }

    /// A later app version rebuilds the store: a device still on the
    /// earlier version cannot start the new store from its baseline, so it
    /// stays on its store (its data, its saves) and moves once it upgrades.
    @Test func aDeviceStaysOnItsStoreUntilItCanReadTheRebuiltOne() async throws {
        let place = try Place()
        defer { place.remove() }
        var older = try await place.manager("older", Self.v1)
        let newer = try await place.manager("newer", Self.v2)
        try await older.store.write { tx in _ = tx.insert("Note", ["title": "shared", "body": "b", "pinned": false]) }
        _ = try await older.sync()
        _ = try await newer.sync()
        let old = try await newer.store.storeID
        let rebuilt = try await newer.rebuildCloudStore()
        #expect(rebuilt != old)
        // The earlier device's sync: it stays, says why, and keeps working.
        let report = try #require(try await older.sync())
        #expect(report.status == .waiting && report.imported.held.count == 1 && report.imported.permanentFailures.isEmpty,
                "\(report.imported.failures)")
        #expect(try await older.store.storeID == old)
        try await older.store.write { tx in _ = tx.insert("Note", ["title": "after the rebuild", "body": "c", "pinned": true]) }
        _ = try await older.sync()
        #expect(try await older.store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") } == 2)
        try await older.close()
        // Upgraded, it moves, carrying the save the rebuilt store lacks.
        older = try await place.manager("older", Self.v2)
        _ = try await older.sync()
        #expect(try await older.store.storeID == rebuilt)
        _ = try await older.sync()
        _ = try await newer.sync()
        #expect(try await newer.store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title") } == ["after the rebuild", "shared"])
        #expect(try await older.store.stateHash() == newer.store.stateHash())
        try await older.close()
        try await newer.close()
    }

    /// A device that holds logs of a later version cannot rebuild the store
    /// from its copy: the new store would lack their saves, lost for good
    /// if their writer never comes back.
    @Test func aDeviceHoldingLogsDoesNotRebuildTheStore() async throws {
        let place = try Place()
        defer { place.remove() }
        let older = try await place.manager("older", Self.v1)
        let newer = try await place.manager("newer", Self.v2)
        try await older.store.write { tx in _ = tx.insert("Note", ["title": "t", "body": "b", "pinned": false]) }
        _ = try await older.sync()
        _ = try await newer.sync()
        try await newer.store.write { tx in _ = tx.insert("Note", ["title": "only on v2", "text": "x", "pinned": false]) }
        _ = try await newer.sync()
        #expect(try await older.sync()?.imported.held.count == 1)
        let refused = await #expect(throws: ChronicleError.self) { try await older.rebuildCloudStore() }
        #expect(refused?.code == .schemaMismatch && refused?.message.contains("would lose their saves") == true, "\(refused?.message ?? "")")
        // The device on the later version may.
        let rebuilt = try await newer.rebuildCloudStore()
        #expect(try await newer.store.storeID == rebuilt)
        try await older.close()
        try await newer.close()
    }

    /// Each version names its previous one's fields (plain renamedFrom):
    /// a device that skips a version goes through it, learned from the
    /// store's records or given by the app, as one that upgraded step by
    /// step does.
    @Test func aDeviceThatSkipsAVersionMigratesThroughIt() async throws {
        let place = try Place()
        defer { place.remove() }
        let v1 = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("body", .string)])])
        let v2 = try Schema(version: 2, entities: [Entity("Note", attributes: [Attribute("text", .string, renamedFrom: ["body"])])])
        let v3 = try Schema(version: 3, entities: [Entity("Note", attributes: [Attribute("content", .string, renamedFrom: ["text"])])])
        #expect(throws: ChronicleError.self) { try SchemaMigration(from: v1, to: v3).requireComplete() }
        #expect(try SchemaMigration.through([v2], from: v1, to: v3).isComplete)
        var a = try await place.open("a", v1)
        try await a.write { tx in _ = tx.insert("Note", ["body": "from v1"]) }
        try await a.sync()
        let b = try await place.open("b", v2)
        try await b.write { tx in _ = tx.insert("Note", ["text": "from v2"]) }
        try await b.sync()
        // A new device on v3, given no earlier version, reads both.
        let c = try await place.open("c", v3)
        let report = try await c.sync()
        #expect(report.status == .upToDate, "\(report.imported.failures)")
        #expect(try await c.read { db in try String.fetchAll(db, sql: "SELECT content FROM Note ORDER BY content") } == ["from v1", "from v2"])
        // The v1 device upgrades straight to v3.
        try await a.close()
        a = try await place.open("a", v3)
        try await a.sync()
        #expect(try await a.stateHash() == c.stateHash())
        for store in [a, b, c] { try await store.close() }
    }
}
