import CSQLite
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging

/// The macro scenarios of `chronicle bench`: each against its baseline, in
/// the same process, reported as ratios against the targets.
package struct MacroBench {
    /// Every scenario's size, as a multiple of the sizes the targets name.
    package var scale: Double
    /// Where the scenarios make their stores, containers and raw databases.
    package var directory: URL
    /// Receives one line per step, for a reader watching the run.
    package var log: (String) -> Void
    /// Makes the progress report of a long step.
    package var progress: BenchProgressFactory

    package init(scale: Double, directory: URL, progress: @escaping BenchProgressFactory = silentProgress, log: @escaping (String) -> Void) {
        self.scale = scale
        self.directory = directory
        self.progress = progress
        self.log = log
    }

    /// The scenario names, in the order a full run takes them.
    package static let scenarios = ["save", "replay", "realistic", "bytes", "scaling", "history", "convergence", "import", "compaction", "large"]

    /// Runs the scenario named `name` (one of `scenarios`).
    package func run(_ name: String) async throws -> [Target] {
        switch name {
        case "save": return try await save()
        case "replay": return try await replay()
        case "realistic": return try await realisticReplay()
        case "history": return try await history()
        case "bytes": return try bytes()
        case "scaling": return try await scaling()
        case "convergence": return try await convergence()
        case "import": return try await importFeed()
        case "compaction": return try await compactionBytes()
        case "large": return try await largeStores()
        default: throw ChronicleError(.invalidValue, "unknown scenario \(name) (the scenarios are \(Self.scenarios.joined(separator: ", ")))")
        }
    }

    static let schema = try! Schema(version: 1, entities: [
        Entity("Item", attributes: [
            Attribute("name", .string), Attribute("qty", .int64), Attribute("price", .double),
            Attribute("updated", .date), Attribute("note", .string, optional: true),
        ]),
    ])

    struct Row {
        var id: RecordID
        var name: String
        var qty: Int64
        var price: Double
        var updated: Int64
        var note: String?

        var values: [String: Value] {
            ["name": .string(name), "qty": .int(qty), "price": .double(price),
             "updated": .date(Timestamp(microsecondsSinceEpoch: updated)), "note": note.map(Value.string) ?? .null]
        }
    }

    /// One transaction inserting `rows` as `Item`s, every field in schema order.
    static func transaction(_ rows: [Row], device: DeviceID, sequence: UInt64, milliseconds: UInt64) -> Transaction {
        let fields = schema.entities[0].fields
        return Transaction(deviceID: device, sequence: sequence, clock: HybridTimestamp(milliseconds: milliseconds, counter: 0),
                           schemaHash: schema.hash,
                           changes: rows.map { r in Change(.insert, entity: "Item", recordID: r.id, values: fields.map { FieldValue($0.name, r.values[$0.name]!) }) })
    }

    /// Deterministic rows with time-ordered IDs.
    static func rows(_ count: Int, seed: UInt64, start: Int = 0) -> [Row] {
        var rng = SeededRandom(seed: seed)
        var ids = RecordIDGenerator(seed: seed)
        return (0..<count).map { i in
            Row(id: ids.next(milliseconds: 1_700_000_000_000 + UInt64(start + i) / 8), name: "item \(start + i)",
                qty: Int64(rng.next() % 1000), price: Double(rng.next() % 100_000) / 100,
                updated: 1_700_000_000_000_000 + Int64(start + i) * 1_000,
                note: rng.next() % 3 == 0 ? "restock from the north warehouse" : nil)
        }
    }

    /// One row of the target table: a ratio against its limit.
    package struct Target: Sendable {
        /// What is measured.
        package var name: String
        /// The ratio; NaN when the scenario cannot measure it (the detail says why).
        package var measured: Double
        /// The target; infinite for a row that only informs.
        package var limit: Double
        /// Whether the measure must stay at or under the limit (rather than reach it).
        package var lowerIsBetter: Bool
        /// The figures behind the ratio, in words.
        package var detail: String
        /// Whether the target is met.
        package var met: Bool { lowerIsBetter ? measured <= limit : measured >= limit }
        /// "met", "MISSED", "info" (no limit) or "not measured".
        package var verdict: String { measured.isNaN ? "not measured" : limit.isInfinite ? "info" : met ? "met" : "MISSED" }
    }

    // MARK: Plain SQLite baseline

    /// The page cache every raw SQLite side runs with: the size of the
    /// snapshot's writing connection, so that a ratio compares the work
    /// done, not the cache (SQLite's default 2 MiB makes large inserts
    /// into indexed tables re-read pages).
    static let rawCachePragma = " PRAGMA cache_size = -\(Snapshot.writerCacheKiB);"

    final class RawSQLite {
        var db: OpaquePointer?
        init(path: String, synchronous: String, creating: Bool = true) throws {
            guard sqlite3_open(path, &db) == SQLITE_OK else { throw ChronicleError(.database, "cannot open \(path)") }
            try exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = \(synchronous);" + MacroBench.rawCachePragma)
            if creating { try exec("CREATE TABLE Item (id BLOB PRIMARY KEY NOT NULL, name TEXT, qty INTEGER, price REAL, updated INTEGER, note TEXT)") }
        }
        deinit { sqlite3_close(db) }
        func exec(_ sql: String) throws {
            guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
                throw ChronicleError(.database, String(cString: sqlite3_errmsg(db)))
            }
        }
        func insert(_ rows: ArraySlice<Row>, upsert: Bool) throws {
            var stmt: OpaquePointer?
            let verb = upsert ? "INSERT OR REPLACE" : "INSERT"
            sqlite3_prepare_v2(db, "\(verb) INTO Item (id, name, qty, price, updated, note) VALUES (?, ?, ?, ?, ?, ?)", -1, &stmt, nil)
            defer { sqlite3_finalize(stmt) }
            for r in rows {
                let idBytes = r.id.bytes
                idBytes.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, 1, $0.baseAddress, 16, chronicle_sqlite_transient()) }
                sqlite3_bind_text(stmt, 2, r.name, -1, chronicle_sqlite_transient())
                sqlite3_bind_int64(stmt, 3, r.qty)
                sqlite3_bind_double(stmt, 4, r.price)
                sqlite3_bind_int64(stmt, 5, r.updated)
                if let note = r.note { sqlite3_bind_text(stmt, 6, note, -1, chronicle_sqlite_transient()) } else { sqlite3_bind_null(stmt, 6) }
                guard sqlite3_step(stmt) == SQLITE_DONE else { throw ChronicleError(.database, String(cString: sqlite3_errmsg(db))) }
                sqlite3_reset(stmt)
            }
        }
    }

    func fresh(_ name: String) -> URL {
        let url = directory.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    func store(_ dir: URL, container: any Container, device: UInt64, durability: Durability = .full) async throws -> Store {
        try await Store.open(Store.Configuration(
            schema: Self.schema, deviceID: DeviceID(index: device), directory: dir.appendingPathComponent("device-\(device)"),
            container: container, seed: device, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }, durability: durability))
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
    }

    // MARK: (a) Save latency

    /// Scenario (a) twice, like against like: Chronicle at `.full` against
    /// plain SQLite at `synchronous = FULL` (the target: a save that returned
    /// survives power loss on both sides), then Chronicle at `.normal`
    /// against plain SQLite at NORMAL (informational: no sync per commit on
    /// either side, so it shows Chronicle's own work per save). WAL mode on
    /// every side.
    func save() async throws -> [Target] {
        let full = try await save(durability: .full)
        let normal = try await save(durability: .normal)
        return [
            Target(name: "save latency median vs plain SQLite, both synchronous = FULL", measured: full.ratio, limit: 1.15,
                   lowerIsBetter: true, detail: full.detail),
            Target(name: "save latency p99 vs plain SQLite, both synchronous = FULL", measured: full.p99, limit: 1.5,
                   lowerIsBetter: true, detail: full.detail),
            Target(name: "save latency median vs plain SQLite, both synchronous = NORMAL, informational", measured: normal.ratio,
                   limit: .infinity, lowerIsBetter: true, detail: normal.detail),
        ]
    }

    /// Interleaved saves of the same rows through `Store.write` at
    /// `durability` and through the C API at the same `synchronous` level.
    func save(durability: Durability) async throws -> (ratio: Double, p99: Double, detail: String) {
        let transactions = max(50, Int(5_000 * scale))
        let rows = Self.rows(transactions * 10, seed: 1)
        let synchronous = durability == .full ? "FULL" : "NORMAL"
        let dir = fresh("save-\(durability.rawValue)")
        let raw = try RawSQLite(path: dir.appendingPathComponent("raw.sqlite").path, synchronous: synchronous)
        let container = try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true)
        let store = try await store(dir, container: container, device: 1, durability: durability)
        var rawTimes: [Double] = []
        var chronicleTimes: [Double] = []
        let clock = ContinuousClock()
        let bar = self.progress("bench save, \(durability.rawValue)", "transactions", transactions)
        defer { bar.finish() }
        // Interleave the two so both see the same machine noise.
        for t in 0..<transactions {
            bar.advance(to: t)
            let slice = rows[(t * 10)..<(t * 10 + 10)]
            let update = t >= 10 && t % 2 == 1
            let target = update ? rows[((t - 9) * 10)..<((t - 9) * 10 + 10)] : slice
            var start = clock.now
            try raw.exec("BEGIN")
            try raw.insert(update ? ArraySlice(target.map { var r = $0; r.qty += 1; return r }) : slice, upsert: update)
            try raw.exec("COMMIT")
            rawTimes.append((clock.now - start) / .milliseconds(1))
            start = clock.now
            try await store.write { tx in
                for r in target {
                    if update { tx.update("Item", id: r.id, ["qty": .int(r.qty + 1)]) } else { tx.insert("Item", r.values, id: r.id) }
                }
            }
            chronicleTimes.append((clock.now - start) / .milliseconds(1))
        }
        try await store.close()
        let ratio = Self.percentile(chronicleTimes, 0.5) / Self.percentile(rawTimes, 0.5)
        let p99 = Self.percentile(chronicleTimes, 0.99) / Self.percentile(rawTimes, 0.99)
        let detail = String(format: "%d transactions of 10 records, synchronous = \(synchronous) on both sides; median %.3f ms vs %.3f ms plain SQLite; p99 %.3f vs %.3f ms (%.2fx); %.0f vs %.0f transactions/s",
                            transactions, Self.percentile(chronicleTimes, 0.5), Self.percentile(rawTimes, 0.5),
                            Self.percentile(chronicleTimes, 0.99), Self.percentile(rawTimes, 0.99), p99,
                            1000 / (chronicleTimes.reduce(0, +) / Double(transactions)), 1000 / (rawTimes.reduce(0, +) / Double(transactions)))
        log("(a) save, \(durability.rawValue): \(detail)")
        return (ratio, p99, detail)
    }

    // MARK: (b) Replay, (g) memory

    /// The rows of log `l` that ``fill(_:store:logs:perLog:devices:firstSequence:seed:)`` puts.
    static func logRows(_ l: Int, perLog: Int, seed: UInt64) -> [Row] {
        rows(perLog, seed: seed &+ UInt64(l), start: l * perLog)
    }

    /// Puts `logs` logs of `perLog` inserts each, from `devices` devices, into `container`.
    func fill(_ container: any Container, store: StoreID, logs: Int, perLog: Int, devices: Int, firstSequence: UInt64 = 1, seed: UInt64) async throws -> [Row] {
        _ = try? await container.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: store))
        let encoder = LogEncoder(storeID: store)
        var all: [Row] = []
        let bar = self.progress("bench: writing logs", "logs", logs)
        defer { bar.finish() }
        for l in 0..<logs {
            bar.advance(to: l)
            let device = DeviceID(index: UInt64(100 + l % devices))
            let sequence = firstSequence + UInt64(l / devices)
            let rows = Self.logRows(l, perLog: perLog, seed: seed)
            let t = Self.transaction(rows, device: device, sequence: sequence, milliseconds: 1_700_000_000_000 + UInt64(l))
            try await container.put(ContainerLayout.log(store: store, device: device, first: sequence, last: sequence), try encoder.encode([t]))
            if l < devices { _ = try? await container.createMarker(ContainerLayout.deviceRegistration(store: store, device: device),
                                                               DeviceRegistration(device: device, incarnation: nil)) }
            all += rows
        }
        return all
    }

    /// Rounds of (baseline, replay) in scenario (b).
    static let replayRounds = 2

    func replay() async throws -> [Target] {
        let logs = max(100, Int(10_000 * scale))
        let dir = fresh("replay")
        let container = try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true)
        let storeID = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))
        let (perLog, seed): (Int, UInt64) = (100, 7)
        var rows = try await fill(container, store: storeID, logs: logs, perLog: perLog, devices: 4, seed: seed)
        let clock = ContinuousClock()
        let rowCount = rows.count
        // Two rounds, alternating baseline and replay, each from a quiet
        // disk (`sync()` first: filling the container leaves dirty pages
        // whose writeback would land in whichever phase runs next); the best
        // time of each counts. One round swung the baseline by 1.5x here.
        var rawSeconds = Double.infinity
        var seconds = Double.infinity
        var peak = 0
        var rssBefore = 0
        for round in 1...Self.replayRounds {
            // Baseline: the same rows, raw C API, one transaction.
            rawSeconds = min(rawSeconds, try Self.rawBulkLoad(rows, path: dir.appendingPathComponent("raw-\(round).sqlite").path))
            // The benchmark's own copy of the rows is not the replay's
            // memory: free it before the last round and restart the peak,
            // so (g) measures the import.
            if round == Self.replayRounds { rows = [] }
            Self.resetPeakResident()
            rssBefore = Self.peakResidentBytes()
            sync()
            let start = clock.now
            let device = try await store(dir, container: container, device: UInt64(round), durability: .normal)
            let report = try await device.importLogs()
            seconds = min(seconds, (clock.now - start) / .seconds(1))
            peak = Self.peakResidentBytes()
            let count = try device.snapshot.recordCounts()["Item"] ?? 0
            try await device.close()
            guard count == rowCount, report.failures.isEmpty else {
                throw ChronicleError(.applyFailed, "replay imported \(count) of \(rowCount) records (\(report.failures.count) failures)")
            }
        }
        let coldStart = try await coldStartFromBaseline(dir, container: container, replayedBy: UInt64(Self.replayRounds),
                                                        logs: logs, perLog: perLog, seed: seed, rowCount: rowCount)
        let rate = Double(rowCount) / seconds
        let rawRate = Double(rowCount) / rawSeconds
        let detail = String(format: "%d records from %d logs: %.0f records/s (%.1f s) vs raw bulk insert %.0f rows/s (%.1f s), best of %d rounds each",
                            rowCount, logs, rate, seconds, rawRate, rawSeconds, Self.replayRounds)
        log("(b) replay: \(detail)")
        let memory = String(format: "peak RSS %.0f MB during replay (%.0f MB when it started, after the benchmark freed its own copy of the rows)", Double(peak) / 1e6, Double(rssBefore) / 1e6)
        log("(g) memory: \(memory)")
        return [
            Target(name: "replay rows/s vs raw bulk insert", measured: rate / rawRate, limit: 0.7, lowerIsBetter: false, detail: detail),
            coldStart,
            Target(name: "peak RSS during replay (MB)", measured: Double(peak) / 1e6, limit: 150, lowerIsBetter: true, detail: memory),
            // A new device with no baseline materializes the store from the
            // full log history: exactly the replay above.
            Target(name: "cold start from the log history vs raw bulk load (time), informational", measured: seconds / rawSeconds,
                   limit: .infinity, lowerIsBetter: true,
                   detail: String(format: "a new device materializes %d records from %d logs in %.1f s; the raw bulk load takes %.1f s", rowCount, logs, seconds, rawSeconds)),
        ]
    }

    // MARK: (d) Cold start from a baseline

    /// (d): the device that replayed the store publishes a baseline; then,
    /// alternating, a raw bulk load of the same rows and a new device that
    /// starts from the baseline (fetch, verify, decode, apply every part,
    /// then look for logs after it: none), best of two rounds each.
    func coldStartFromBaseline(_ dir: URL, container: DirectoryContainer, replayedBy device: UInt64,
                               logs: Int, perLog: Int, seed: UInt64, rowCount: Int) async throws -> Target {
        let clock = ContinuousClock()
        var start = clock.now
        let source = try await store(dir, container: container, device: device, durability: .normal)
        let published = try await source.publishBaseline()
        let publishSeconds = (clock.now - start) / .seconds(1)
        try await source.close()
        let baselineBytes = try await container.listAll(prefix: published.prefix).reduce(0) { $0 + $1.size }
        var rawSeconds = Double.infinity
        var seconds = Double.infinity
        var peakGrowth = 0
        for round in 1...2 {
            var rows: [Row] = []
            rows.reserveCapacity(rowCount)
            for l in 0..<logs { rows += Self.logRows(l, perLog: perLog, seed: seed) }
            rawSeconds = min(rawSeconds, try Self.rawBulkLoad(rows, path: dir.appendingPathComponent("raw-cold-\(round).sqlite").path))
            rows = []
            sync()
            Self.resetPeakResident()
            let rssBefore = Self.peakResidentBytes()
            start = clock.now
            let newcomer = try await store(dir, container: container, device: 50 + UInt64(round), durability: .normal)
            let report = try await newcomer.importLogs()
            seconds = min(seconds, (clock.now - start) / .seconds(1))
            peakGrowth = max(peakGrowth, Self.peakResidentBytes() - rssBefore)
            let count = try newcomer.snapshot.recordCounts()["Item"] ?? 0
            try await newcomer.close()
            guard report.baseline?.parts == published.parts, count == rowCount, report.failures.isEmpty, report.appliedLogs == 0 else {
                throw ChronicleError(.applyFailed, "cold start applied \(report.baseline?.parts ?? 0) of \(published.parts) baseline parts, \(count) of \(rowCount) records, \(report.appliedLogs) logs, \(report.failures.count) failures")
            }
        }
        let detail = String(format: "a new device materializes %d records from a %d-part baseline (%.1f MB, published in %.1f s) in %.2f s (peak RSS %.0f MB above where it started); the raw bulk load of the same rows takes %.2f s; best of 2 rounds each, alternating",
                            rowCount, published.parts, Double(baselineBytes) / 1e6, publishSeconds, seconds, Double(peakGrowth) / 1e6, rawSeconds)
        log("(d) cold start: \(detail)")
        return Target(name: "cold start from a baseline vs raw bulk load", measured: seconds / rawSeconds, limit: 1.25, lowerIsBetter: true, detail: detail)
    }

    /// The raw side of (b) and (d): `rows` inserted with the SQLite C API in
    /// one transaction (`synchronous = NORMAL`, like the devices), from a
    /// quiet disk. Returns the seconds it took.
    static func rawBulkLoad(_ rows: [Row], path: String) throws -> Double {
        sync()
        let clock = ContinuousClock()
        let start = clock.now
        do {
            // Closed inside the timing: the raw side pays its whole cost.
            let raw = try RawSQLite(path: path, synchronous: "NORMAL")
            try raw.exec("BEGIN")
            try raw.insert(rows[...], upsert: false)
            try raw.exec("COMMIT")
        }
        return (clock.now - start) / .seconds(1)
    }

    /// Restarts the kernel's peak-RSS count (`VmHWM`) from the current
    /// resident size.
    static func resetPeakResident() {
        try? Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
    }

    static func peakResidentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kb = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kb * 1024
    }

    // MARK: (c) Bytes

    func bytes() throws -> [Target] {
        let store = StoreID(RecordID(high: 1, low: 1))
        func transaction(_ rows: [Row], _ seq: UInt64) -> Transaction {
            Self.transaction(rows, device: DeviceID(index: 1), sequence: seq, milliseconds: 1_700_000_000_000 + seq)
        }
        // The store's dictionary as a device trains it: from 64 earlier
        // one-record saves, under the ID its content gives it.
        let samples = (0..<64).map { i in LogEncoder.body(of: transaction(Self.rows(1, seed: 900 + UInt64(i), start: i), 1)) }
        let dictionary = try CompressionDictionary.trained(from: samples)
        var targets: [Target] = []
        for size in [1, 10, 100] {
            var raw = 0, plain = 0, withDict = 0, records = 0, v1 = 0, headers = 0
            for k in 0..<max(1, 200 / size) {
                let t = transaction(Self.rows(size, seed: 5_000 + UInt64(k), start: 10_000 + k * size), UInt64(k + 1))
                raw += LogEncoder.body(of: t).count
                // What devices upload: format version 2, against the store's dictionary.
                plain += try LogEncoder(storeID: store, version: LogEncoder.uploadVersion).encode([t]).count
                let uploaded = try LogEncoder(storeID: store, dictionary: dictionary, version: LogEncoder.uploadVersion).encode([t])
                withDict += uploaded.count
                headers += try LogDecoder(schema: nil, dictionaries: [dictionary])
                    .header(of: uploaded, at: LogLocation(storeID: store, deviceID: t.deviceID, firstSequence: t.sequence, lastSequence: t.sequence)).headerLength
                v1 += try LogEncoder(storeID: store, dictionary: dictionary).encode([t]).count
                records += size
            }
            let logs = max(1, 200 / size)
            let detail = String(format: "%d-record saves: %.1f B/record uncompressed body; uploaded (format 2, header %.1f B): %.1f B/record without a dictionary (%.2fx), %.1f B/record with the store's %d-byte dictionary (%.2fx); format 1 with the dictionary: %.1f B/record (%.2fx)",
                                size, Double(raw) / Double(records), Double(headers) / Double(logs), Double(plain) / Double(records), Double(plain) / Double(raw),
                                Double(withDict) / Double(records), dictionary.bytes.count, Double(withDict) / Double(raw),
                                Double(v1) / Double(records), Double(v1) / Double(raw))
            log("(c) bytes: \(detail)")
            if size == 100 {
                targets.append(Target(name: "bytes/record vs uncompressed, 100-record saves", measured: Double(withDict) / Double(raw), limit: 0.3, lowerIsBetter: true, detail: detail))
            }
            if size == 1 {
                targets.append(Target(name: "bytes/record vs uncompressed, 1-record saves with dictionary", measured: Double(withDict) / Double(raw), limit: 0.75, lowerIsBetter: true, detail: detail))
            }
        }
        return targets
    }

    // MARK: (e) Scaling

    func scaling() async throws -> [Target] {
        let newLogs = max(100, Int(10_000 * scale))
        // The new logs arrive in rounds, alternating between the two
        // containers, so both see the same machine noise; the ratio is of the
        // summed import times.
        let rounds = 5
        let perRound = max(4, newLogs / rounds / 4 * 4)
        final class Setup {
            let device: Store
            let container: DirectoryContainer
            var nextSequence: UInt64
            var seconds = 0.0
            init(device: Store, container: DirectoryContainer, nextSequence: UInt64) {
                self.device = device
                self.container = container
                self.nextSequence = nextSequence
            }
        }
        let storeID = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0002))
        func prepare(old: Int) async throws -> Setup {
            let dir = fresh("scaling-\(old)")
            let container = try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true)
            _ = try await fill(container, store: storeID, logs: old, perLog: 1, devices: 4, seed: 11)
            let device = try await store(dir, container: container, device: 1, durability: .normal)
            try await device.importLogs()
            return Setup(device: device, container: container, nextSequence: UInt64(old / 4 + 1))
        }
        let small = try await prepare(old: newLogs)
        let large = try await prepare(old: newLogs * 10)
        let clock = ContinuousClock()
        for round in 0..<rounds {
            for setup in [small, large] {
                _ = try await fill(setup.container, store: storeID, logs: perRound, perLog: 1, devices: 4,
                                   firstSequence: setup.nextSequence, seed: 1_000_011 &+ UInt64(round) &* 7_919)
                setup.nextSequence += UInt64(perRound / 4)
                let start = clock.now
                let report = try await setup.device.importLogs()
                setup.seconds += (clock.now - start) / .seconds(1)
                guard report.appliedLogs == perRound, report.failures.isEmpty else {
                    throw ChronicleError(.applyFailed, "scaling: imported \(report.appliedLogs) of \(perRound) new logs")
                }
            }
        }
        try await small.device.close()
        try await large.device.close()
        let imported = perRound * rounds
        let detail = String(format: "importing %d new logs in %d rounds: %.2f s over %d older logs, %.2f s over %d",
                            imported, rounds, small.seconds, newLogs, large.seconds, newLogs * 10)
        log("(e) scaling: \(detail)")
        // The ten-million-record rows are scenario (k), `large`; container
        // bytes over a long run, (l), `compaction`.
        return [
            Target(name: "import cost with 10x history", measured: large.seconds / small.seconds, limit: 1.2, lowerIsBetter: true, detail: detail),
        ]
    }

    // MARK: (f) Convergence

    func convergence() async throws -> [Target] {
        let devices = 8
        let saves = max(20, Int(1_000 * scale))
        let dir = fresh("convergence")
        let container = try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true)
        var stores: [Store] = []
        for d in 1...devices { stores.append(try await store(dir, container: container, device: UInt64(d), durability: .normal)) }
        let bar = self.progress("bench convergence: saving", "rounds", saves)
        for i in 0..<saves {
            bar.advance(to: i)
            for (d, s) in stores.enumerated() {
                try await s.write { tx in tx.insert("Item", Self.rows(1, seed: UInt64(d * 100_000 + i), start: d * 100_000 + i)[0].values) }
            }
        }
        bar.finish()
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<2 { for s in stores { try await s.sync() } }
        let seconds = (clock.now - start) / .seconds(1)
        var hashes = Set<String>()
        for s in stores { hashes.insert(try await s.stateHash()); try await s.close() }
        guard hashes.count == 1 else { throw ChronicleError(.applyFailed, "convergence benchmark did not converge") }
        let detail = String(format: "%d devices × %d saves: all converged %.2f s after the last save (two sync rounds)", devices, saves, seconds)
        log("(f) convergence: \(detail)")
        return [Target(name: "convergence time (s), informational", measured: seconds, limit: .infinity, lowerIsBetter: true, detail: detail)]
    }
}
