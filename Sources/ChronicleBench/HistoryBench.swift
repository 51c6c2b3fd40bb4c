import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import Logging

/// (j) Costs that must not grow with a store's history: inserting records
/// with a unique key into a table that already holds many, and a save and
/// its upload on a device that has made many saves before.
extension MacroBench {
    static let historySchema = try! Schema(version: 1, entities: [
        Entity("Tag", attributes: [Attribute("name", .string), Attribute("uses", .int64)], unique: [["name"]]),
    ])

    func historyStore(_ dir: URL, container: any Container) async throws -> Store {
        try await Store.open(Store.Configuration(
            schema: Self.historySchema, deviceID: DeviceID(index: 1), directory: dir.appendingPathComponent("device"),
            container: container, seed: 1, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }, durability: .normal))
    }

    /// Plain SQLite's side of the unique-key inserts: the same names into
    /// an empty table with a unique index, then into one holding `held`,
    /// a transaction per 100 rows, `synchronous = NORMAL`.
    static func rawTagInserts(path: String, held: Int, inserts: Int) throws -> (empty: Double, full: Double) {
        let clock = ContinuousClock()
        var times: [Double] = []
        for (suffix, preload) in [("empty", 0), ("full", held)] {
            do {
                let raw = try RawSQLite(path: path + "-" + suffix, synchronous: "NORMAL")
                try raw.exec("CREATE TABLE Tag (id INTEGER PRIMARY KEY, name TEXT NOT NULL, uses INTEGER NOT NULL); CREATE UNIQUE INDEX tag_name ON Tag (name)")
                try raw.exec("BEGIN")
                for i in 0..<preload { try raw.exec("INSERT INTO Tag (name, uses) VALUES ('tag \(1_000_000 + i)', \(i))") }
                try raw.exec("COMMIT")
            }
            // Reopened, as the store is: the preload's WAL checkpointed on close.
            let raw = try RawSQLite(path: path + "-" + suffix, synchronous: "NORMAL", creating: false)
            let begin = clock.now
            for s in stride(from: 0, to: inserts, by: 100) {
                try raw.exec("BEGIN")
                for i in s..<min(s + 100, inserts) { try raw.exec("INSERT INTO Tag (name, uses) VALUES ('tag \(i)', \(i))") }
                try raw.exec("COMMIT")
            }
            times.append((clock.now - begin) / .seconds(1))
        }
        return (times[0], times[1])
    }

    func history() async throws -> [Target] {
        let clock = ContinuousClock()
        // Unique-key inserts: 5,000 into an empty table, then into one of 35,000.
        let inserts = max(500, Int(5_000 * scale))
        let held = max(3_500, Int(35_000 * scale))
        func insertTags(_ store: Store, from start: Int, count: Int, perSave: Int) async throws -> Double {
            let begin = clock.now
            for s in stride(from: start, to: start + count, by: perSave) {
                try await store.write { tx in
                    for i in s..<min(s + perSave, start + count) { _ = tx.insert("Tag", ["name": Value.string("tag \(i)"), "uses": Value.int(Int64(i))]) }
                }
            }
            return (clock.now - begin) / .seconds(1)
        }
        var empty = Double.infinity, full = Double.infinity
        var rawEmpty = Double.infinity, rawFull = Double.infinity
        for round in 1...3 {
            let raw = try Self.rawTagInserts(path: fresh("history-raw-\(round)").appendingPathComponent("raw.sqlite").path,
                                             held: held, inserts: inserts)
            rawEmpty = min(rawEmpty, raw.empty)
            rawFull = min(rawFull, raw.full)
            let dir = fresh("history-keys-\(round)")
            let container = try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true)
            let a = try await historyStore(dir.appendingPathComponent("a"), container: container)
            empty = min(empty, try await insertTags(a, from: 0, count: inserts, perSave: 100))
            try await a.close()
            let loading = try await historyStore(dir.appendingPathComponent("b"), container: container)
            _ = try await insertTags(loading, from: 1_000_000, count: held, perSave: 1_000)
            // Reopened: what the preload left in the WAL is checkpointed on
            // close, not charged to the inserts measured.
            try await loading.close()
            let b = try await historyStore(dir.appendingPathComponent("b"), container: container)
            full = min(full, try await insertTags(b, from: 0, count: inserts, perSave: 100))
            try await b.close()
        }
        let keyDetail = String(format: "%d inserts of records with a unique key, in saves of 100: %.3f s into an empty table, %.3f s into one of %d records; plain SQLite (a table with a unique index, a transaction per 100 rows) %.3f s and %.3f s (%.2fx); best of 3 rounds each",
                                inserts, empty, full, held, rawEmpty, rawFull, rawFull / rawEmpty)
        log("(j) unique keys: \(keyDetail)")

        // Save+upload pairs with no history, then after 100,000 earlier saves.
        let pairs = max(200, Int(1_000 * scale))
        let earlier = max(10_000, Int(100_000 * scale))
        func pairsPerSecond(_ store: Store, _ label: String) async throws -> Double {
            let begin = clock.now
            for i in 0..<pairs {
                try await store.write { tx in _ = tx.insert("Tag", ["name": Value.string("pair \(label) \(i)"), "uses": Value.int(1)]) }
                _ = try await store.upload()
            }
            return Double(pairs) / ((clock.now - begin) / .seconds(1))
        }
        var fresh0 = 0.0, later = 0.0
        for round in 1...2 {
            let dir = fresh("history-outbox-\(round)")
            let container = try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true)
            let a = try await historyStore(dir.appendingPathComponent("a"), container: container)
            fresh0 = max(fresh0, try await pairsPerSecond(a, "a"))
            try await a.close()
            let b = try await historyStore(dir.appendingPathComponent("b"), container: container)
            let bar = self.progress("bench: earlier saves", "saves", earlier)
            for i in 0..<earlier {
                try await b.write { tx in _ = tx.insert("Tag", ["name": Value.string("earlier \(i)"), "uses": Value.int(Int64(i))]) }
                if i % 1_000 == 999 { _ = try await b.upload() }
                bar.advance(to: i + 1)
            }
            _ = try await b.upload()
            bar.finish()
            later = max(later, try await pairsPerSecond(b, "b"))
            try await b.close()
        }
        let outboxDetail = String(format: "%d save+upload pairs (one record each): %.0f/s on a new device, %.0f/s after %d earlier saves (uploaded); best of 2 rounds each",
                                   pairs, fresh0, later, earlier)
        log("(j) outbox: \(outboxDetail)")
        return [
            Target(name: "unique-key inserts into 35,000 rows vs into an empty table (time)", measured: full / empty, limit: 1.3, lowerIsBetter: true, detail: keyDetail),
            Target(name: "save+upload throughput with 100,000 earlier saves vs none", measured: later / fresh0, limit: 0.9, lowerIsBetter: false, detail: outboxDetail),
        ]
    }
}
