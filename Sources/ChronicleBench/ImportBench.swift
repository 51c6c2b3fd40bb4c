import CSQLite
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import Synchronization

/// (h) A bulk import with a UI reading beside it.
extension MacroBench {
    /// A quake as the UI shows it.
    struct Quake: ChronicleRecord {
        static let entityName = "Quake"
        var id: RecordID
        var code: String
        var mag: Double?
        var place: String?
        var time: Date
    }

    /// Imports a made-up USGS feed (100,000 features at scale 1) in batches
    /// of 5,000 on a background context, while the main context observes
    /// a count and a reader fetches the 50 latest quakes every 10 ms.
    /// Measures the reader's latency during the import against the same
    /// reader with no import, the observation's delay, and the import's
    /// records/s against a raw SQLite upsert of the same rows.
    func importFeed() async throws -> [Target] {
        let count = max(1_000, Int(100_000 * scale))
        let batch = min(5_000, count)
        let schema = GeoJSONFeed.sampleSchema
        let entity = schema.entity(named: "Quake")!
        // Made once, before either side's timing: both read the same items.
        let items = Array(try GeoJSONFeed(data: GeoJSONFeed.sample(features: count, seed: 42)).items(for: entity, requiring: "code"))
        log("(h) import: \(count) features in batches of \(batch)")

        // Baseline: the same rows upserted by SQLite's C API, one
        // transaction per batch, same indexes and durability.
        let raw = try RawUpsert(path: fresh("import-raw").appendingPathComponent("raw.sqlite").path, entity: entity)
        let clock = ContinuousClock()
        let rawStart = clock.now
        for start in stride(from: 0, to: items.count, by: batch) {
            try raw.upsert(items[start..<min(start + batch, items.count)], key: "code")
        }
        let rawSeconds = (clock.now - rawStart) / .seconds(1)

        let dir = fresh("import-chronicle")
        let container = try DirectoryContainer(root: dir.appendingPathComponent("shared"), create: true)
        let store = try await Store.open(Store.Configuration(schema: schema, directory: dir.appendingPathComponent("device"), container: container))
        let main = store.mainContext

        // The observed query: when each value arrives, and what it says.
        let delivered = Mutex<[(ContinuousClock.Instant, Int)]>([])
        let observation = main.observe { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Quake") ?? 0 }
        let observer = Task {
            for try await value in observation {
                delivered.withLock { $0.append((clock.now, value)) }
                if value == count { return }
            }
        }
        // The reader: the 50 latest quakes, every 10 ms, on the main context.
        func reading(until done: @escaping @Sendable () -> Bool, atLeast samples: Int) -> Task<[Double], any Error> {
            Task {
                var latencies: [Double] = []
                var next = clock.now
                while !done() || latencies.count < samples {
                    let start = clock.now
                    _ = try await main.fetchAll(Quake.self, orderedBy: [.descending("time")], limit: 50)
                    latencies.append((clock.now - start) / .milliseconds(1))
                    next = next.advanced(by: .milliseconds(10))
                    if next > clock.now { try await Task.sleep(until: next, clock: clock) } else { next = clock.now }
                }
                return latencies
            }
        }
        let importing = Mutex(true)
        let during = reading(until: { !importing.withLock { $0 } }, atLeast: 1)
        // When each batch commits, and how many records are stored then.
        let saved = Mutex<[(ContinuousClock.Instant, Int)]>([])
        let token = store.listen { events in
            let now = clock.now
            saved.withLock { $0.append((now, ($0.last?.1 ?? 0) + events.count { $0.kind == .inserted })) }
        }
        let start = clock.now
        let summary = try await store.newBackgroundContext().importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: batch))
        store.stopListening(token)
        let importSeconds = (clock.now - start) / .seconds(1)
        // The feed is the benchmark's: freeing it is not the import's work
        // (the raw side's copy is freed after its timing too).
        withExtendedLifetime(items) {}
        importing.withLock { $0 = false }
        let busy = try await during.value
        // The same reader on the same data with no import, as many reads.
        let idle = try await reading(until: { true }, atLeast: busy.count).value
        try await observer.value
        try await store.close()
        guard summary.isComplete, summary.progress.inserted == count else {
            throw ChronicleError(.database, "the import saved \(summary.progress.inserted) of \(count) features")
        }

        // Delay from a batch's commit to the first value that shows it.
        let values = delivered.withLock { $0 }
        let delays: [Double] = saved.withLock { $0 }.compactMap { (at, total) in
            values.first { $0.1 >= total }.map { max(0, ($0.0 - at) / .milliseconds(1)) }
        }
        let rate = Double(count) / importSeconds
        let rawRate = Double(count) / rawSeconds
        let (busy50, busy99) = (Self.percentile(busy, 0.5), Self.percentile(busy, 0.99))
        let (idle50, idle99) = (Self.percentile(idle, 0.5), Self.percentile(idle, 0.99))
        let readerDetail = String(format: "reader p50 %.2f ms and p99 %.2f ms during the import (%d reads), p50 %.2f ms and p99 %.2f ms without (%d reads)",
                                  busy50, busy99, busy.count, idle50, idle99, idle.count)
        let rateDetail = String(format: "%.0f features/s (%.2f s) against a raw SQLite upsert's %.0f/s (%.2f s)", rate, importSeconds, rawRate, rawSeconds)
        let delayDetail = delays.isEmpty ? "no value delivered" : String(
            format: "observation delay from each batch's commit to the value showing it: median %.2f ms, max %.2f ms (%d values for %d batches)",
            Self.percentile(delays, 0.5), delays.max()!, values.count, delays.count)
        log("(h) import: \(rateDetail); \(readerDetail); \(delayDetail)")
        return [
            Target(name: "import: reader p99 during / without import", measured: busy99 / idle99, limit: 3, lowerIsBetter: true, detail: readerDetail),
            Target(name: "import: records/s vs raw SQLite upsert", measured: rate / rawRate, limit: 0.5, lowerIsBetter: false, detail: rateDetail),
            Target(name: "import: observation delay, median ms", measured: delays.isEmpty ? .nan : Self.percentile(delays, 0.5), limit: .infinity,
                   lowerIsBetter: true, detail: delayDetail),
        ]
    }

    /// The baseline: a table like Chronicle's for the entity, with its
    /// unique and other indexes, filled by `INSERT … ON CONFLICT DO UPDATE`.
    final class RawUpsert {
        var db: OpaquePointer?
        let columns: [String]
        var ids = RecordIDGenerator(seed: 42)

        init(path: String, entity: Entity) throws {
            guard sqlite3_open(path, &db) == SQLITE_OK else { throw ChronicleError(.database, "cannot open \(path)") }
            columns = entity.fields.map(\.name)
            try exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;" + MacroBench.rawCachePragma)
            try exec("CREATE TABLE Quake (id BLOB PRIMARY KEY NOT NULL, " + columns.map { "\"\($0)\"" }.joined(separator: ", ") + ")")
            for (i, unique) in entity.uniqueConstraints.enumerated() {
                try exec("CREATE UNIQUE INDEX u\(i) ON Quake (" + unique.map { "\"\($0)\"" }.joined(separator: ", ") + ")")
            }
            for (i, index) in entity.indexes.enumerated() {
                try exec("CREATE INDEX i\(i) ON Quake (" + index.map { "\"\($0)\"" }.joined(separator: ", ") + ")")
            }
        }

        deinit { sqlite3_close(db) }

        func exec(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw ChronicleError(.database, String(cString: sqlite3_errmsg(db)))
            }
        }

        func upsert(_ items: ArraySlice<BulkImport.Item>, key: String) throws {
            var stmt: OpaquePointer?
            let names: [String] = ["id"] + columns
            let quoted: String = names.map { "\"\($0)\"" }.joined(separator: ", ")
            let marks: String = names.map { _ in "?" }.joined(separator: ", ")
            let updates: String = columns.filter { $0 != key }.map { "\"\($0)\" = excluded.\"\($0)\"" }.joined(separator: ", ")
            let sql = "INSERT INTO Quake (\(quoted)) VALUES (\(marks)) ON CONFLICT(\"\(key)\") DO UPDATE SET \(updates)"
            guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else { throw ChronicleError(.database, String(cString: sqlite3_errmsg(db))) }
            defer { sqlite3_finalize(stmt) }
            try exec("BEGIN")
            for item in items {
                let id = ids.next(milliseconds: 1_767_225_600_000)
                id.bytes.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, 1, $0.baseAddress, 16, chronicle_sqlite_transient()) }
                for (i, name) in columns.enumerated() {
                    let slot = Int32(i + 2)
                    switch item.values[name] ?? .null {
                    case .string(let s): sqlite3_bind_text(stmt, slot, s, -1, chronicle_sqlite_transient())
                    case .int(let v): sqlite3_bind_int64(stmt, slot, v)
                    case .double(let v): sqlite3_bind_double(stmt, slot, v)
                    case .date(let t): sqlite3_bind_double(stmt, slot, Double(t.microsecondsSinceEpoch) / 1_000_000)
                    default: sqlite3_bind_null(stmt, slot)
                    }
                }
                guard sqlite3_step(stmt) == SQLITE_DONE else { throw ChronicleError(.database, String(cString: sqlite3_errmsg(db))) }
                sqlite3_reset(stmt)
            }
            try exec("COMMIT")
        }
    }
}
