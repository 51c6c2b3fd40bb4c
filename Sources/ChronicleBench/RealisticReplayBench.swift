import CSQLite
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging

/// (i) Replay of a schema shaped like a notes app's: folders with a unique
/// name, notes with a unique key and a to-one reference to a folder,
/// comments that refer to notes (deleted with them). Logs from four devices
/// mix inserts (80%), per-attribute updates (15%, some of the same notes
/// on several devices) and deletes (5%, a note's taking its comments).
extension MacroBench {
    static let realisticSchema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string), Attribute("created", .date)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
        Entity("Note", attributes: [
            Attribute("key", .string), Attribute("title", .string), Attribute("body", .string, optional: true),
            Attribute("pages", .int64), Attribute("updated", .date),
        ], relationships: [.toOne("folder", to: "Folder", inverse: "notes"), .toMany("comments", to: "Comment", inverse: "note")],
           unique: [["key"]]),
        Entity("Comment", attributes: [Attribute("text", .string), Attribute("created", .date)],
               relationships: [.toOne("note", to: "Note", inverse: "comments", deleteRule: .cascade)]),
    ])

    /// The records a sequential apply of the generated logs leaves, by entity.
    struct RealisticHistory {
        var folders: [RecordID] = []
        var notes: [RecordID] = []
        var comments: [RecordID] = []
        /// Each live comment's note, to delete comments with their note.
        var noteOfComment: [RecordID: RecordID] = [:]
        var commentsOfNote: [RecordID: [RecordID]] = [:]
        var changes = (inserts: 0, updates: 0, deletes: 0)
    }

    /// Puts `logs` logs of `perLog` changes each, from four devices, into
    /// `container`; returns what a sequential apply leaves.
    ///
    /// - Parameters:
    ///   - firstDevice: the devices are `firstDevice` to `firstDevice + 3`,
    ///     each from sequence 1.
    ///   - names: a prefix for the folders' names and the notes' keys, so that
    ///     histories made with different prefixes can go into one store.
    ///   - milliseconds: the clock of the first log (each log one later).
    ///
    /// The logs depend on the seed and their number only: with the same
    /// seed, a call for fewer logs writes the first logs of a longer call.
    func fillRealistic(_ container: any Container, store: StoreID, logs: Int, perLog: Int, seed: UInt64,
                       firstDevice: UInt64 = 100, names: String = "", milliseconds: UInt64 = 1_700_000_000_000) async throws -> RealisticHistory {
        _ = try? await container.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: store))
        let schema = Self.realisticSchema
        let encoder = LogEncoder(storeID: store)
        var rng = SeededRandom(seed: seed)
        var ids = RecordIDGenerator(seed: seed)
        var h = RealisticHistory()
        var counter = 0
        let base = milliseconds
        func pick(_ list: [RecordID], recent: Int) -> Int? {
            guard !list.isEmpty else { return nil }
            // Mostly recent records, as apps edit what they just made.
            let window = min(list.count, recent)
            return list.count - 1 - Int(rng.next() % UInt64(window))
        }
        func remove(_ id: RecordID, from list: inout [RecordID]) {
            if let i = list.lastIndex(of: id) { list.swapAt(i, list.count - 1); list.removeLast() }
        }
        let bar = self.progress("bench: writing logs", "logs", logs)
        defer { bar.finish() }
        for l in 0..<logs {
            bar.advance(to: l)
            let device = DeviceID(index: firstDevice + UInt64(l % 4))
            let sequence = UInt64(1 + l / 4)
            let ms = base + UInt64(l)
            var changes: [Change] = []
            for _ in 0..<perLog {
                counter += 1
                let r = rng.next() % 100
                if r < 80 || h.notes.isEmpty {
                    h.changes.inserts += 1
                    let kind = rng.next() % 100
                    let id = ids.next(milliseconds: ms)
                    if kind < 2 || h.folders.isEmpty {
                        changes.append(Change(.insert, entity: "Folder", recordID: id, values: [
                            FieldValue("name", .string("\(names)folder \(counter)")), FieldValue("created", .date(Timestamp(microsecondsSinceEpoch: Int64(ms) * 1000))),
                        ]))
                        h.folders.append(id)
                    } else if kind < 60 || h.notes.isEmpty {
                        let folder = h.folders[Int(rng.next() % UInt64(h.folders.count))]
                        changes.append(Change(.insert, entity: "Note", recordID: id, values: [
                            FieldValue("key", .string("\(names)note-\(counter)")), FieldValue("title", .string("Note \(counter) about the \(counter % 7 == 0 ? "garden" : "trip")")),
                            FieldValue("body", rng.next() % 2 == 0 ? .string("Remember to bring the maps, the tickets and the camera charger.") : .null),
                            FieldValue("pages", .int(Int64(rng.next() % 500))), FieldValue("updated", .date(Timestamp(microsecondsSinceEpoch: Int64(ms) * 1000))),
                            FieldValue("folder", .reference(folder)),
                        ]))
                        h.notes.append(id)
                    } else {
                        let note = h.notes[pick(h.notes, recent: 2_000)!]
                        changes.append(Change(.insert, entity: "Comment", recordID: id, values: [
                            FieldValue("text", .string("Looks good \(counter)")), FieldValue("created", .date(Timestamp(microsecondsSinceEpoch: Int64(ms) * 1000))),
                            FieldValue("note", .reference(note)),
                        ]))
                        h.comments.append(id)
                        h.noteOfComment[id] = note
                        h.commentsOfNote[note, default: []].append(id)
                    }
                } else if r < 95 {
                    // An attribute of a recent note: the window spans the
                    // four devices' last logs, so some are edited on several.
                    h.changes.updates += 1
                    let note = h.notes[pick(h.notes, recent: 400)!]
                    let value: FieldValue = rng.next() % 2 == 0
                        ? FieldValue("title", .string("Edited \(counter)")) : FieldValue("pages", .int(Int64(rng.next() % 500)))
                    changes.append(Change(.update, entity: "Note", recordID: note, values: [value]))
                } else {
                    h.changes.deletes += 1
                    if rng.next() % 5 < 3, let i = pick(h.comments, recent: 5_000) {
                        let comment = h.comments[i]
                        changes.append(Change(.delete, entity: "Comment", recordID: comment))
                        remove(comment, from: &h.comments)
                        if let note = h.noteOfComment.removeValue(forKey: comment) {
                            h.commentsOfNote[note]?.removeAll { $0 == comment }
                        }
                    } else if let i = pick(h.notes, recent: 5_000), h.notes.count > 1 {
                        let note = h.notes[i]
                        changes.append(Change(.delete, entity: "Note", recordID: note))
                        remove(note, from: &h.notes)
                        // Its comments go with it (cascade).
                        for comment in h.commentsOfNote.removeValue(forKey: note) ?? [] {
                            remove(comment, from: &h.comments)
                            h.noteOfComment[comment] = nil
                        }
                    }
                }
            }
            let t = Transaction(deviceID: device, sequence: sequence, clock: HybridTimestamp(milliseconds: ms, counter: 0),
                                schemaHash: schema.hash, changes: changes)
            try await container.put(ContainerLayout.log(store: store, device: device, first: sequence, last: sequence), try encoder.encode([t]))
            if l < 4 { _ = try? await container.createMarker(ContainerLayout.deviceRegistration(store: store, device: device),
                                                         DeviceRegistration(device: device, incarnation: nil)) }
        }
        return h
    }

    /// (i): a new device replays the realistic history, against the raw
    /// bulk insert of the rows it ends with (same tables and indexes: the
    /// unique keys, the reference columns), best of two rounds each.
    func realisticReplay() async throws -> [Target] {
        let logs = max(100, Int(10_000 * scale))
        let dir = fresh("replay-realistic")
        let container = try DirectoryContainer(root: dir.appendingPathComponent("container"), create: true)
        let storeID = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0002))
        let history = try await fillRealistic(container, store: storeID, logs: logs, perLog: 100, seed: 11)
        let expected = ["Folder": history.folders.count, "Note": history.notes.count, "Comment": history.comments.count]
        let rowCount = expected.values.reduce(0, +)
        let clock = ContinuousClock()
        var seconds = Double.infinity
        var rawSeconds = Double.infinity
        var peak = 0
        var startRSS = 0
        var cpu = 0.0
        var finalRows: [String: [[DatabaseValue]]] = [:]
        for round in 1...Self.replayRounds {
            if round > 1 {
                rawSeconds = min(rawSeconds, try Self.rawRealisticLoad(finalRows, path: dir.appendingPathComponent("raw-\(round).sqlite").path))
                // The benchmark's own copy of the rows is not the replay's
                // memory: freed before the last round, whose peak counts.
                finalRows = [:]
                // And what it freed goes back to the system, so that the
                // peak below is the replay's, not what the allocator kept.
                _ = releaseFreedMemory(0)
            }
            Self.resetPeakResident()
            let rssBefore = Self.peakResidentBytes()
            sync()
            let start = clock.now
            let cpuStart = Self.cpuSeconds()
            let device = try await realisticStore(dir, container: container, device: UInt64(round))
            let report = try await device.importLogs()
            let elapsed = (clock.now - start) / .seconds(1)
            if elapsed < seconds { cpu = Self.cpuSeconds() - cpuStart }
            seconds = min(seconds, elapsed)
            if round == Self.replayRounds { (peak, startRSS) = (Self.peakResidentBytes(), rssBefore) }
            let counts = try device.snapshot.recordCounts()
            guard report.failures.isEmpty, counts == expected else {
                throw ChronicleError(.applyFailed, "the realistic replay left \(counts), a sequential apply \(expected) (\(report.failures.count) failures)")
            }
            if round == 1 {
                finalRows = try await device.read { db in
                    var rows: [String: [[DatabaseValue]]] = [:]
                    for entity in Self.realisticSchema.entities {
                        let columns = (["id"] + entity.fields.map { $0.name.quotedDatabaseIdentifier }).joined(separator: ", ")
                        rows[entity.name] = try GRDB.Row.fetchAll(db, sql: "SELECT \(columns) FROM \(entity.name.quotedDatabaseIdentifier)").map { Array($0.databaseValues) }
                    }
                    return rows
                }
            }
            try await device.close()
            if round == 1 { rawSeconds = min(rawSeconds, try Self.rawRealisticLoad(finalRows, path: dir.appendingPathComponent("raw-1.sqlite").path)) }
        }
        let ratio = rawSeconds / seconds
        let detail = String(format: "%d logs of 100 changes from 4 devices (%d inserts, %d updates, %d deletes) leave %d records (%d folders, %d notes, %d comments): replayed in %.2f s (%.0f records/s, %.2f s of CPU); raw bulk insert of the same rows with the same indexes %.2f s (%.0f rows/s); best of %d rounds each; peak RSS %.0f MB during the last replay (%.0f MB when it started)",
                            logs, history.changes.inserts, history.changes.updates, history.changes.deletes, rowCount,
                            history.folders.count, history.notes.count, history.comments.count,
                            seconds, Double(rowCount) / seconds, cpu, rawSeconds, Double(rowCount) / rawSeconds, Self.replayRounds, Double(peak) / 1e6, Double(startRSS) / 1e6)
        log("(i) realistic replay: \(detail)")
        return [Target(name: "replay, realistic schema, rows/s vs raw bulk insert", measured: ratio, limit: 0.5, lowerIsBetter: false, detail: detail)]
    }

    /// User and system CPU time of the process so far.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func s(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return s(usage.ru_utime) + s(usage.ru_stime)
    }

    func realisticStore(_ dir: URL, container: any Container, device: UInt64) async throws -> Store {
        try await Store.open(Store.Configuration(
            schema: Self.realisticSchema, deviceID: DeviceID(index: device), directory: dir.appendingPathComponent("device-\(device)"),
            container: container, seed: device, logger: .init(label: "bench") { _ in SwiftLogNoOpLogHandler() }, durability: .normal))
    }

    /// The statements that make the realistic schema's tables in a raw
    /// database: a column per field, and with `indexed` the store's indexes
    /// (a unique index per unique key, an index per reference column).
    static func realisticTables(indexed: Bool, in database: String = "main") -> [String] {
        var statements: [String] = []
        for entity in realisticSchema.entities {
            let columns = entity.fields.map { "\($0.name.quotedDatabaseIdentifier) \($0.kind.sqlTypeForBench)" }
            statements.append("CREATE TABLE \(database).\(entity.name) (id BLOB PRIMARY KEY NOT NULL, \(columns.joined(separator: ", ")))")
            guard indexed else { continue }
            for field in entity.fields {
                if case .reference = field.kind { statements.append("CREATE INDEX \(database).\(entity.name)_\(field.name) ON \(entity.name) (\(field.name))") }
            }
            for (i, key) in entity.uniqueConstraints.enumerated() {
                statements.append("CREATE UNIQUE INDEX \(database).\(entity.name)_u\(i) ON \(entity.name) (\(key.joined(separator: ", ")))")
            }
        }
        return statements
    }

    /// The raw side of (i): `rows` inserted with the SQLite C API in one
    /// transaction into tables with the store's indexes (a unique index per
    /// unique key, an index per reference column), `synchronous = NORMAL`.
    static func rawRealisticLoad(_ rows: [String: [[DatabaseValue]]], path: String) throws -> Double {
        sync()
        let clock = ContinuousClock()
        let start = clock.now
        let raw = try RawSQLite(path: path, synchronous: "NORMAL", creating: false)
        let (db, exec) = (raw.db, raw.exec)
        defer { withExtendedLifetime(raw) {} }
        for sql in realisticTables(indexed: true) { try exec(sql) }
        try exec("BEGIN")
        for entity in realisticSchema.entities {
            var stmt: OpaquePointer?
            let marks = Array(repeating: "?", count: entity.fields.count + 1).joined(separator: ", ")
            guard sqlite3_prepare_v2(db, "INSERT INTO \(entity.name) VALUES (\(marks))", -1, &stmt, nil) == SQLITE_OK else {
                throw ChronicleError(.database, String(cString: sqlite3_errmsg(db)))
            }
            defer { sqlite3_finalize(stmt) }
            for row in rows[entity.name] ?? [] {
                for (i, value) in row.enumerated() {
                    let slot = Int32(i + 1)
                    switch value.storage {
                    case .null: sqlite3_bind_null(stmt, slot)
                    case .int64(let v): sqlite3_bind_int64(stmt, slot, v)
                    case .double(let v): sqlite3_bind_double(stmt, slot, v)
                    case .string(let v): sqlite3_bind_text(stmt, slot, v, -1, chronicle_sqlite_transient())
                    case .blob(let v): v.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, slot, $0.baseAddress, Int32($0.count), chronicle_sqlite_transient()) }
                    }
                }
                guard sqlite3_step(stmt) == SQLITE_DONE else { throw ChronicleError(.database, String(cString: sqlite3_errmsg(db))) }
                sqlite3_reset(stmt)
            }
        }
        try exec("COMMIT")
        return (clock.now - start) / .seconds(1)
    }
}

extension Field.Kind {
    /// The column type the raw side of (i) gives a field.
    var sqlTypeForBench: String {
        switch self {
        case .reference: return "BLOB"
        case .attribute(let type):
            switch type {
            case .string, .decimal: return "TEXT"
            case .int64, .bool, .date: return "INTEGER"
            case .double: return "REAL"
            default: return "BLOB"
            }
        }
    }
}

/// glibc's `malloc_trim` (in `malloc.h`, which the Glibc module does not
/// export): gives the memory the allocator holds free back to the system.
@_silgen_name("malloc_trim")
func releaseFreedMemory(_ pad: Int) -> Int32
