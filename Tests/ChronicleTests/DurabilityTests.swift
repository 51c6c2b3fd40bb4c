import CSyncCountingVFS
import Chronicle
import ChronicleContainer
import ChronicleCore
@testable import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// A save that returned is on disk at `.full` durability: the writing
/// connection runs at `synchronous = FULL` and every save syncs; `.normal`
/// does not sync each save. A clean close leaves every save in the main file.
///
/// The sync counts come from a VFS that wraps SQLite's default one
/// (`CSyncCountingVFS`) and counts per file, so each test counts only the
/// files in its own folder while other tests run beside it.
@Suite struct DurabilityTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string), Attribute("pages", .int64)]),
    ])

    /// A fresh folder, with symbolic links resolved as SQLite names its files.
    static func folder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-durability-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.resolvingSymlinksInPath()
    }

    static func open(_ dir: URL, _ durability: Durability) async throws -> Store {
        try await Store.open(Store.Configuration(
            schema: schema, deviceID: DeviceID(index: 1), directory: dir.appendingPathComponent("device"),
            container: try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true), clock: ManualClock(), seed: 1,
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, durability: durability))
    }

    /// `PRAGMA synchronous` on the connection saves commit on.
    static func writerSynchronous(_ snapshot: Snapshot) throws -> Int? {
        try snapshot.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
    }

    /// Syncs of files under `dir` so far.
    static func syncs(under dir: URL) -> Int {
        Int(chronicle_sync_counting_vfs_syncs(dir.path + "/"))
    }

    @Test(arguments: Durability.allCases)
    func theWriterRunsAtTheChosenSynchronousLevel(_ durability: Durability) async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.open(dir, durability)
        #expect(try Self.writerSynchronous(store.snapshot) == durability.sqliteSynchronous)
        _ = try await store.write { tx in tx.insert("Note", ["title": .string("Dune"), "pages": .int(412)]) }
        #expect(try Self.writerSynchronous(store.snapshot) == durability.sqliteSynchronous)
        try await store.close()
        // Reopened with the other setting: the setting is the new one's.
        let other: Durability = durability == .full ? .normal : .full
        let reopened = try await Self.open(dir, other)
        #expect(try Self.writerSynchronous(reopened.snapshot) == other.sqliteSynchronous)
        try await reopened.close()
    }

    @Test func levelsAreSQLitesValues() {
        #expect(Durability.full.sqliteSynchronous == 2)
        #expect(Durability.normal.sqliteSynchronous == 1)
    }

    /// The syncs of `saves` saves through `Store.write`, counted from after the open.
    static func syncsOfSaves(_ saves: Int, _ durability: Durability) async throws -> Int {
        #expect(chronicle_sync_counting_vfs_install() == 0)
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await open(dir, durability)
        let before = syncs(under: dir)
        for i in 0..<saves {
            _ = try await store.write { tx in tx.insert("Note", ["title": .string("note \(i)"), "pages": .int(Int64(i))]) }
        }
        let count = syncs(under: dir) - before
        try await store.close()
        #expect(try await countNotes(dir) == saves)
        return count
    }

    static func countNotes(_ dir: URL) async throws -> Int {
        let store = try await open(dir, .normal)
        defer { try? store.snapshot.close() }
        return try await store.snapshot.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM Note") ?? -1 }
    }

    @Test func everyFullSaveSyncsBeforeItReturns() async throws {
        let saves = 40
        let syncs = try await Self.syncsOfSaves(saves, .full)
        #expect(syncs >= saves, "\(saves) saves at full durability made \(syncs) syncs")
    }

    @Test func normalSavesDoNotEachSync() async throws {
        let saves = 40
        let syncs = try await Self.syncsOfSaves(saves, .normal)
        #expect(syncs < saves, "\(saves) saves at normal durability made \(syncs) syncs")
    }

    @Test(arguments: Durability.allCases)
    func aCleanCloseLeavesEverySaveInTheMainFile(_ durability: Durability) async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.open(dir, durability)
        let path = store.snapshot.path
        // A reader connection open at close, as after any query.
        _ = try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") }
        for i in 0..<25 {
            _ = try await store.write { tx in tx.insert("Note", ["title": .string("note \(i)"), "pages": .int(Int64(i))]) }
        }
        try await store.close()
        try store.snapshot.close()  // a second close does nothing
        let walSize = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        #expect(walSize == 0)
        // The main file alone, without its -wal and -shm, holds the saves.
        let copy = dir.appendingPathComponent("alone.sqlite").path
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        var config = Configuration()
        config.readonly = true
        let queue = try DatabaseQueue(path: copy, configuration: config)
        #expect(try await queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM Note") } == 25)
        #expect(try await queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM _chronicle_outbox") } == 25)
        try queue.close()
    }
}
