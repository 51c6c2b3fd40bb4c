import Chronicle
import ChronicleCore
import Foundation
import Logging
import Testing

/// A log written for a schema this device does not know (a newer app
/// version's) is held, not a corruption: the sync waits for an app upgrade,
/// and every other device's logs keep applying.
@Suite struct HeldLogTests {
    static let v1 = try! Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .string)])])
    static let v2 = try! Schema(version: 2, entities: [
        Entity("Note", attributes: [Attribute("title", .string), Attribute("color", .string, optional: true)]),
    ])

    @Test func aNewerAppsLogIsHeldWhileOthersApply() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-held-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let container = try DirectoryContainer(root: root.appendingPathComponent("shared"), create: true)
        func open(_ name: String, _ schema: Schema) async throws -> Store {
            try await Store.open(Store.Configuration(schema: schema, directory: root.appendingPathComponent(name), container: container))
        }
        let newer = try await open("newer", Self.v2)
        let older = try await open("older", Self.v1)
        let reader = try await open("reader", Self.v1)
        try await newer.write { tx in _ = tx.insert("Note", ["title": "from the newer app", "color": "red"]) }
        try await older.write { tx in _ = tx.insert("Note", ["title": "from the older app"]) }
        try await newer.sync()
        try await older.sync()

        let report = try await reader.sync()
        #expect(report.imported.held.count == 1, "\(report.imported.failures)")
        #expect(report.imported.permanentFailures.isEmpty, "a held log is not a corruption")
        #expect(report.status == .waiting)
        #expect(try await reader.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") } == ["from the older app"])
        // Its device's later logs wait behind it; it stays held at the next sync.
        try await newer.write { tx in _ = tx.insert("Note", ["title": "newer again"]) }
        try await newer.sync()
        let again = try await reader.sync()
        #expect(again.status == .waiting && again.imported.permanentFailures.isEmpty)
        #expect(try await reader.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") } == ["from the older app"])
        for store in [newer, older, reader] { try await store.close() }
    }
}
