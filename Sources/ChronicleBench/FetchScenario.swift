import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging

/// Reading Codable records back: `Store.fetchAll` against a plain GRDB
/// `FetchableRecord` fetch of the same rows.
package struct FetchScenario: Sendable {
    /// Records to save and read back.
    package var records: Int
    /// The two fetches take turns this many times; each reports its best round.
    package var rounds: Int

    package init(records: Int, rounds: Int) {
        self.records = records
        self.rounds = rounds
    }

    /// The notes of `chronicle bench codec`, as an app declares them: read
    /// by Chronicle as a `ChronicleRecord`, and by GRDB's own decoder as a
    /// `FetchableRecord`.
    struct Note: ChronicleRecord, FetchableRecord {
        static let entityName = "Note"
        var id: RecordID
        var title: String
        var body: String
        var views: Int64
        var score: Double
        var created: Date
        var pinned: Bool
    }

    /// Saves the records, then reads them back both ways, best of the rounds:
    /// the results as JSON and as a line of text.
    package func run() async throws -> (json: JSONValue, text: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-bench-fetch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Store.open(Store.Configuration(
            schema: CodecScenario.schema, deviceID: DeviceID(index: 1), directory: dir.appendingPathComponent("device"),
            container: try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true), seed: 1,
            logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }, durability: .normal))
        let transaction = CodecScenario.transaction(changes: records)
        for start in stride(from: 0, to: records, by: 5_000) {
            try await store.write { tx in
                for change in transaction.changes[start..<min(records, start + 5_000)] {
                    tx.insert("Note", Dictionary(uniqueKeysWithValues: change.values.map { ($0.name, $0.value) }), id: change.recordID)
                }
            }
        }
        let clock = ContinuousClock()
        var chronicle = Double.infinity, grdb = Double.infinity
        var datesAgree = true
        for _ in 0..<max(1, rounds) {
            var start = clock.now
            let notes = try await store.fetchAll(Note.self)
            chronicle = min(chronicle, (clock.now - start) / .seconds(1))
            start = clock.now
            let rows = try await store.read { db in try Note.fetchAll(db, sql: "SELECT * FROM Note ORDER BY id") }
            grdb = min(grdb, (clock.now - start) / .seconds(1))
            guard notes.count == records, notes.map(\.id) == rows.map(\.id) else {
                throw ChronicleError(.misuse, "the two fetches disagree: \(notes.count) and \(rows.count) records")
            }
            // Whether GRDB's default decoding reads the dates Chronicle saved.
            datesAgree = notes.map(\.created) == rows.map(\.created)
        }
        try await store.close()
        let text = String(format: "%d records: Store.fetchAll %.3f s, GRDB FetchableRecord %.3f s (%.2fx), best of %d rounds; dates read alike: %@",
                          records, chronicle, grdb, chronicle / grdb, max(1, rounds), datesAgree ? "yes" : "NO")
        return (.object(["records": .int(Int64(records)), "fetchAllSeconds": .double(chronicle),
                              "grdbSeconds": .double(grdb), "ratio": .double(chronicle / grdb),
                              "datesAgree": .bool(datesAgree)]), text)
    }
}
