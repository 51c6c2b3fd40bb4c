// The getting-started example of README.md and Chronicle.docc, compiled and
// run by DocumentationExampleTests. The code between the markers is the code
// block of both documents, character for character.

// BEGIN EXAMPLE
import Chronicle
import Foundation
import GRDB // for SQL in `store.read`
import Logging

/// A Codable type stored as records of the `Book` entity.
struct Book: ChronicleRecord, Equatable {
    static let entityName = "Book"
    var id: RecordID
    var title: String
    var pages: Int64
}

/// Two devices share a folder: one saves, both sync, the other reads.
func gettingStarted() async throws -> (books: [Book], titles: [String]) {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("chronicle-example-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: root) }

    // The data model: the same on every device.
    let schema = try Schema(json: Data("""
        {"version": 1, "entities": [
          {"name": "Book",
           "attributes": [{"name": "title", "type": "string"},
                          {"name": "pages", "type": "int64"}]}
        ]}
        """.utf8))
    // The shared container: a synced or network folder in a real app (for a
    // folder a sync service copies between machines, also pass
    // `reliableExclusiveCreate: false`: see docs/health.md).
    let container = try DirectoryContainer(root: root.appendingPathComponent("shared"), create: true)

    // Each device has its own folder: its ID, snapshot and lock live there.
    func open(_ device: String) async throws -> Store {
        try await Store.open(Store.Configuration(
            schema: schema,
            directory: root.appendingPathComponent(device),
            container: container,
            logger: Logger(label: "example.\(device)")))
    }
    let laptop = try await open("laptop")
    let phone = try await open("phone")

    // Save two records on the laptop, in one transaction.
    try await laptop.write { tx in
        let first = tx.newRecordID()
        try tx.insert(Book(id: first, title: "The Dispossessed", pages: 387))
        let second = tx.newRecordID()
        try tx.insert(Book(id: second, title: "Kindred", pages: 264))
    }

    // The laptop uploads its save as a log; the phone imports it.
    try await laptop.sync()
    let report = try await phone.sync()
    print(report.status) // upToDate

    // Query on the phone: Codable records, or SQL through GRDB.
    let books = try await phone.fetchAll(Book.self)
    let titles = try await phone.read { db in
        try String.fetchAll(db, sql: "SELECT title FROM Book ORDER BY pages")
    }

    try await laptop.close()
    try await phone.close()
    return (books, titles)
}
// END EXAMPLE
