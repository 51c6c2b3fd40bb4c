import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// Random sets of transactions that insert, rename, delete and bring back
/// records sharing unique keys, with references to them (including to
/// hidden duplicates), applied in several random orders: every order, and
/// every way of batching the logs, must give the same tables, and those must
/// be what the rules of `docs/merge.md` compute from the set of changes.
@Suite struct DedupeOrderTests {
    /// Folders with two unique keys, notes that cascade with their folder,
    /// comments that nullify with their note.
    static let schema = DedupeTests.schema
    static let store = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))

    static func id(_ entity: UInt64, _ n: Int) -> RecordID {
        RecordID(high: 0x0100_0000_0000_7000 + (entity << 40) + (UInt64(n) << 16), low: 0x8000_0000_0000_0001)
    }

    static let folders = (0..<6).map { id(1, $0) }
    static let notes = (0..<6).map { id(2, $0) }
    static let comments = (0..<3).map { id(3, $0) }
    static let names = ["A", "B", "C"]
    static let codes: [Value] = [.null, "x", "y"]
    static let colors: [Value] = ["red", "green", "blue"]

    /// One transaction per device, so any order of the logs is complete.
    static func transactions(seed: UInt64, count: Int) -> [Transaction] {
        var rng = SeededRandom(seed: seed)
        func pick<T>(_ a: [T]) -> T { a[Int(rng.next() % UInt64(a.count))] }
        var result: [Transaction] = []
        for t in 0..<count {
            var changes: [Change] = []
            for _ in 0...(rng.next() % 3) {
                let roll = rng.next() % 100
                var values: [FieldValue] = []
                switch roll {
                case ..<22:
                    let f = pick(folders)
                    guard !changes.contains(where: { $0.recordID == f }) else { continue }
                    var inserted = [FieldValue("name", .string(pick(names))), FieldValue("code", pick(codes))]
                    if rng.next() % 2 == 0 { inserted.append(FieldValue("color", pick(colors))) }
                    changes.append(Change(.insert, entity: "Folder", recordID: f, values: inserted))
                case ..<44:
                    // Renames into and out of key groups, writes that bring a deleted folder back,
                    // and new colors (a survivor shows its duplicates' newer ones).
                    if rng.next() % 2 == 0 { values.append(FieldValue("name", .string(pick(names)))) }
                    if rng.next() % 2 == 0 { values.append(FieldValue("color", pick(colors))) }
                    if values.isEmpty || rng.next() % 3 == 0 { values.append(FieldValue("code", pick(codes))) }
                    changes.append(Change(.update, entity: "Folder", recordID: pick(folders), values: values))
                case ..<54:
                    changes.append(Change(.delete, entity: "Folder", recordID: pick(folders), values: []))
                case ..<72:
                    let n = pick(notes)
                    guard !changes.contains(where: { $0.recordID == n }) else { continue }
                    changes.append(Change(.insert, entity: "Note", recordID: n, values: [FieldValue("title", .string("t\(t)")), FieldValue("folder", .reference(pick(folders)))]))
                case ..<82:
                    changes.append(Change(.update, entity: "Note", recordID: pick(notes), values: [FieldValue("folder", .reference(pick(folders)))]))
                case ..<88:
                    changes.append(Change(.delete, entity: "Note", recordID: pick(notes), values: []))
                default:
                    let c = pick(comments)
                    guard !changes.contains(where: { $0.recordID == c }) else { continue }
                    changes.append(Change(.insert, entity: "Comment", recordID: c, values: [FieldValue("text", "c"), FieldValue("note", .reference(pick(notes)))]))
                }
            }
            guard !changes.isEmpty else { continue }
            let clock = HybridTimestamp(milliseconds: 1_700_000_000_000 + rng.next() % 40, counter: UInt16(rng.next() % 2))
            result.append(Transaction(deviceID: DeviceID(index: UInt64(t + 1)), sequence: 1, clock: clock, schemaHash: schema.hash, changes: changes))
        }
        return result
    }

    /// The visible tables, as sorted lines.
    static func tables(_ snapshot: Snapshot) throws -> [String] {
        try snapshot.read { db in
            var lines: [String] = []
            for row in try Row.fetchAll(db, sql: "SELECT id, name, code, color FROM Folder ORDER BY id") {
                lines.append("Folder \(row["id"] as RecordID) \(row["name"] as String) \((row["code"] as String?) ?? "-") \((row["color"] as String?) ?? "-")")
            }
            for row in try Row.fetchAll(db, sql: "SELECT id, title, folder FROM Note ORDER BY id") {
                lines.append("Note \(row["id"] as RecordID) \(row["title"] as String) \(row["folder"] as RecordID)")
            }
            for row in try Row.fetchAll(db, sql: "SELECT id, text, note FROM Comment ORDER BY id") {
                lines.append("Comment \(row["id"] as RecordID) \(row["text"] as String) \((row["note"] as RecordID?).map { "\($0)" } ?? "-")")
            }
            return lines
        }
    }

    /// Applies the logs in `order`, in random batches, to a new snapshot.
    static func replay(_ logs: [VerifiedLog], order: [Int], rng: inout SeededRandom, in dir: URL, name: String) throws -> Snapshot {
        let snapshot = try Snapshot(path: dir.appendingPathComponent("\(name).sqlite").path, schema: schema, storeID: store,
                                    deviceID: DeviceID(index: 10_000), durability: .normal)
        var i = 0
        while i < order.count {
            let size = min(order.count - i, 1 + Int(rng.next() % 4))
            let batch = order[i..<(i + size)].map { (logs[$0], "log-\($0)") }
            let result = try snapshot.apply(batch)
            #expect(result.failure == nil)
            i += size
        }
        return snapshot
    }

    static func check(seed: UInt64, transactions count: Int, orders: Int) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-dedupe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let transactions = transactions(seed: seed, count: count)
        let logs = try transactions.map { try LogDecoder(schema: schema).open(try LogEncoder(storeID: store).encode([$0])) }
        let expected = Oracle(transactions).tables()
        var rng = SeededRandom(seed: seed ^ 0x5EED)
        var first: String?
        for n in 0..<orders {
            var order = Array(logs.indices)
            if n == 1 { order.reverse() } else if n > 1 { order.shuffle(using: &rng) }
            let snapshot = try replay(logs, order: order, rng: &rng, in: dir, name: "order-\(n)")
            let hash = try snapshot.stateHash()
            let tables = try tables(snapshot)
            #expect(tables == expected, "seed \(seed), order \(n): \(order)")
            if let first {
                #expect(hash == first, "seed \(seed), order \(n): \(order)")
            } else {
                first = hash
            }
        }
    }

    /// A transaction of device `device` at `ms` milliseconds into the test's time.
    static func at(_ ms: UInt64, _ device: UInt64, _ changes: [Change], sequence: UInt64 = 1) -> Transaction {
        Transaction(deviceID: DeviceID(index: device), sequence: sequence, clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + ms, counter: 0),
                    schemaHash: schema.hash, changes: changes)
    }

    /// `transactions`, one log each, replayed in `orders` random orders and
    /// batchings: each gives the tables the rules compute.
    static func expectEveryOrder(_ transactions: [Transaction], orders: Int, seed: UInt64) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-dedupe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let logs = try transactions.map { try LogDecoder(schema: schema).open(try LogEncoder(storeID: store).encode([$0])) }
        let expected = Oracle(transactions).tables()
        var rng = SeededRandom(seed: seed)
        for n in 0..<orders {
            var order = Array(logs.indices)
            order.shuffle(using: &rng)
            let snapshot = try replay(logs, order: order, rng: &rng, in: dir, name: "order-\(n)")
            #expect(try tables(snapshot) == expected, "order \(order)")
            try snapshot.close()
        }
    }

    static let folderInsert = Change(.insert, entity: "Folder", recordID: folders[0], values: [FieldValue("name", "Inbox")])
    static let noteInsert = Change(.insert, entity: "Note", recordID: notes[0], values: [FieldValue("title", "n"), FieldValue("folder", .reference(folders[0]))])
    static let commentInsert = Change(.insert, entity: "Comment", recordID: comments[0], values: [FieldValue("text", "c"), FieldValue("note", .reference(notes[0]))])

    /// A note and a comment on it saved together, and the note deleted
    /// later (on its own, or with its folder), in every order: the comment
    /// shows no note, whichever arrived first.
    @Test(arguments: [false, true])
    func aReferrerSavedWithItsTargetShowsNoTargetAfterTheTargetsLaterDeleteInAnyOrder(folderDeleted: Bool) throws {
        try Self.expectEveryOrder([
            Self.at(1, 1, [Self.folderInsert]),
            Self.at(10, 2, [Self.noteInsert, Self.commentInsert]),
            Self.at(20, 3, [folderDeleted ? Change(.delete, entity: "Folder", recordID: Self.folders[0]) : Change(.delete, entity: "Note", recordID: Self.notes[0])]),
        ], orders: 12, seed: 7)
    }

    /// A save carried again by another device (same clock, another device:
    /// see `Snapshot.carryWrites`) beside the original, the note deleted
    /// later by both too, in many orders and batches.
    @Test func aSaveCarriedAgainBesideItsOriginalMergesTheSameInAnyOrder() throws {
        let n0 = Self.notes[0]
        let carriedNote = Change(.insert, entity: "Note", recordID: n0, values: [FieldValue("title", "renamed"), FieldValue("folder", .reference(Self.folders[0]))])
        try Self.expectEveryOrder([
            Self.at(1, 1, [Self.folderInsert]),
            Self.at(10, 3, [Self.noteInsert, Self.commentInsert]),
            Self.at(30, 6, [Change(.update, entity: "Note", recordID: n0, values: [FieldValue("title", "renamed")])]),
            Self.at(40, 5, [Change(.delete, entity: "Note", recordID: n0)]),
            Self.at(10, 9, [carriedNote, Self.commentInsert]),
            Self.at(40, 9, [Change(.delete, entity: "Note", recordID: n0)]),
        ], orders: 80, seed: 11)
    }

    /// A note deleted, then brought back by a later write to it (a write
    /// newer than the delete wins): the comment saved with it shows it
    /// again, in every order.
    @Test func aReferrerShowsItsTargetAgainWhenALaterWriteBringsItBack() throws {
        try Self.expectEveryOrder([
            Self.at(1, 1, [Self.folderInsert]),
            Self.at(10, 2, [Self.noteInsert, Self.commentInsert]),
            Self.at(20, 3, [Change(.delete, entity: "Note", recordID: Self.notes[0])]),
            Self.at(30, 4, [Change(.update, entity: "Note", recordID: Self.notes[0], values: [FieldValue("title", "back")])]),
        ], orders: 24, seed: 5)
    }

    /// A note and a comment on it saved together into a folder deleted
    /// (before or after, by clock), the note also deleted and written
    /// later: the comment shows the note exactly when it shows, in every
    /// order.
    @Test(arguments: [5, 15])
    func aReferrerSavedWithATargetItsFolderHidesShowsNoTargetInAnyOrder(folderDeletedAt: Int) throws {
        try Self.expectEveryOrder([
            Self.at(1, 1, [Self.folderInsert]),
            Self.at(UInt64(folderDeletedAt), 5, [Change(.delete, entity: "Folder", recordID: Self.folders[0])]),
            Self.at(10, 2, [Self.commentInsert, Self.noteInsert]),
            Self.at(20, 6, [Change(.delete, entity: "Note", recordID: Self.notes[0])]),
            Self.at(30, 4, [Change(.update, entity: "Note", recordID: Self.notes[0], values: [FieldValue("title", "later")])]),
        ], orders: 120, seed: 5)
    }

    /// One log that saves a comment and its note into a folder, then
    /// deletes the folder (hiding the note), applied where the note was
    /// known only by a later write and a delete, each log on its own.
    @Test func aLogThatSavesAReferrerAndHidesItsTargetShowsNoTarget() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-dedupe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let folder = Self.at(1, 1, [Self.folderInsert])
        let saved = Self.at(10, 2, [Self.commentInsert, Self.noteInsert])
        let deleted = Self.at(20, 2, [Change(.delete, entity: "Folder", recordID: Self.folders[0])], sequence: 2)
        let written = Self.at(30, 4, [Change(.update, entity: "Note", recordID: Self.notes[0], values: [FieldValue("title", "later")])])
        let noteDeleted = Self.at(25, 6, [Change(.delete, entity: "Note", recordID: Self.notes[0])])
        let expected = Oracle([folder, written, noteDeleted, saved, deleted]).tables()
        let logs = try [[folder], [written], [noteDeleted], [saved, deleted]].map {
            try LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: Self.store).encode($0))
        }
        let snapshot = try Snapshot(path: dir.appendingPathComponent("one-log.sqlite").path, schema: Self.schema, storeID: Self.store,
                                    deviceID: DeviceID(index: 10_000), durability: .normal)
        for (n, log) in logs.enumerated() { #expect(try snapshot.apply([(log, "log-\(n)")]).failure == nil) }
        #expect(try Self.tables(snapshot) == expected)
        #expect(try Self.tables(snapshot).contains("Comment \(Self.comments[0]) c -"))
        try snapshot.close()
    }

    /// A snapshot of format 5 shows a survivor's own values, not the newer
    /// ones of its duplicates; opening it recomputes the rows of entities
    /// with a unique key.
    @Test func openingAFormatFiveSnapshotShowsTheDuplicatesNewerValues() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-dedupe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let (f0, f1) = (Self.folders[0], Self.folders[1])
        func at(_ ms: UInt64, _ device: UInt64, _ changes: [Change]) -> Transaction {
            Transaction(deviceID: DeviceID(index: device), sequence: 1, clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + ms, counter: 0),
                        schemaHash: Self.schema.hash, changes: changes)
        }
        let transactions = [
            at(1, 1, [Change(.insert, entity: "Folder", recordID: f0, values: [FieldValue("name", "Inbox"), FieldValue("color", "red")])]),
            at(2, 2, [Change(.insert, entity: "Folder", recordID: f1, values: [FieldValue("name", "Inbox"), FieldValue("color", "red")])]),
            at(3, 3, [Change(.update, entity: "Folder", recordID: f1, values: [FieldValue("color", "blue")])]),
        ]
        let logs = try transactions.map { try LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: Self.store).encode([$0])) }
        var rng = SeededRandom(seed: 1)
        let snapshot = try Self.replay(logs, order: [0, 1, 2], rng: &rng, in: dir, name: "five")
        #expect(try Self.tables(snapshot) == ["Folder \(f0) Inbox - blue"])
        try snapshot.close()
        // What format 5 computed: the survivor's own color.
        let path = dir.appendingPathComponent("five.sqlite").path
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "UPDATE _chronicle_rows_Folder SET color = 'red'")
            try db.execute(sql: "PRAGMA user_version = 5")
        }
        try queue.close()
        let reopened = try Snapshot(path: path, schema: Self.schema, storeID: Self.store, deviceID: DeviceID(index: 10_000), durability: .normal)
        #expect(try Self.tables(reopened) == ["Folder \(f0) Inbox - blue"])
        #expect(try reopened.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") } == Snapshot.format)
    }

    /// A snapshot of format 3 may show what an older rule computed; opening
    /// it recomputes the rows from the states.
    @Test func openingAFormatThreeSnapshotRecomputesTheView() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-dedupe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let transactions = Self.transactions(seed: 5, count: 24)
        let logs = try transactions.map { try LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: Self.store).encode([$0])) }
        var rng = SeededRandom(seed: 5)
        let snapshot = try Self.replay(logs, order: Array(logs.indices), rng: &rng, in: dir, name: "old")
        let hash = try snapshot.stateHash()
        try snapshot.close()
        // What an older rule may have left: a hidden folder shown, a note pointing elsewhere.
        let path = dir.appendingPathComponent("old.sqlite").path
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "DELETE FROM _chronicle_rows_Folder")
            try db.execute(sql: "INSERT INTO _chronicle_rows_Folder (id, name, code) VALUES (?, 'stale', NULL)", arguments: [Self.folders[5]])
            try db.execute(sql: "UPDATE _chronicle_rows_Note SET folder = ?", arguments: [Self.folders[5]])
            try db.execute(sql: "PRAGMA user_version = 3")
        }
        try queue.close()
        let reopened = try Snapshot(path: path, schema: Self.schema, storeID: Self.store, deviceID: DeviceID(index: 10_000), durability: .normal)
        #expect(try reopened.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") } == Snapshot.format)
        #expect(try Self.tables(reopened) == Oracle(transactions).tables())
        #expect(try reopened.stateHash() == hash)
    }

    @Test(arguments: Array(UInt64(1)...40))
    func everyOrderGivesTheTablesTheRulesDefine(seed: UInt64) throws {
        try Self.check(seed: seed, transactions: 24, orders: 5)
    }
}

/// The rules of `docs/merge.md`, computed directly from the set of changes:
/// join every change into its record's state, then compute entity by entity
/// (folders, then notes, then comments: references point one way) which
/// records are live with their cascade references resolved; folders in ID
/// order, each visible unless a smaller visible one shares a key with it;
/// and what each reference resolves to.
struct Oracle {
    struct State {
        var fields: [String: (Value, Version)] = [:]
        var inserted = false
        var deleted: Version?
        var isLive: Bool {
            guard inserted else { return false }
            guard let deleted else { return true }
            return fields.values.contains { $0.1 > deleted }
        }
    }

    var states: [RecordID: State] = [:]
    var entities: [RecordID: String] = [:]

    init(_ transactions: [Transaction]) {
        for t in transactions {
            let version = Version(clock: t.clock, device: t.deviceID)
            for c in t.changes {
                entities[c.recordID] = c.entity
                var s = states[c.recordID] ?? State()
                if c.kind == .insert { s.inserted = true }
                if c.kind == .delete, s.deleted.map({ $0 < version }) ?? true { s.deleted = version }
                for v in c.values where s.fields[v.name].map({ $0.1 < version }) ?? true { s.fields[v.name] = (v.value, version) }
                states[c.recordID] = s
            }
        }
    }

    func ids(_ entity: String) -> [RecordID] { entities.filter { $0.value == entity }.map(\.key).sorted() }
    func value(_ id: RecordID, _ field: String) -> Value { states[id]?.fields[field]?.0 ?? .null }
    func text(_ id: RecordID, _ field: String) -> String {
        if case .string(let s) = value(id, field) { return s }
        return "-"
    }

    func tables() -> [String] {
        // Folders: no references.
        let live = ids("Folder").filter { states[$0]!.isLive }
        func keys(_ f: RecordID) -> [String] {
            var k = ["name=\(value(f, "name"))"]
            if value(f, "code") != .null { k.append("code=\(value(f, "code"))") }
            return k
        }
        // In ID order: visible unless a smaller visible folder shares a key.
        var visible: [RecordID] = []
        for f in live where !visible.contains(where: { !Set(keys($0)).isDisjoint(with: keys(f)) }) { visible.append(f) }
        // A duplicate resolves to the smallest visible folder sharing a key with it.
        func resolveFolder(_ f: RecordID) -> RecordID? {
            guard live.contains(f) else { return nil }
            return visible.first { !Set(keys($0)).isDisjoint(with: keys(f)) }
        }
        var lines: [String] = []
        for f in visible {
            // The newest color among the folder and the duplicates merged into it.
            let merged = live.filter { $0 == f || $0 > f && resolveFolder($0) == f }
            let color = merged.compactMap { states[$0]!.fields["color"] }.max { $0.1 < $1.1 }?.0
            var shown = "-"
            if case .string(let s)? = color { shown = s }
            lines.append("Folder \(f) \(text(f, "name")) \(text(f, "code")) \(shown)")
        }
        // Notes: visible if live and their folder resolves (cascade).
        var visibleNotes: Set<RecordID> = []
        for n in ids("Note") where states[n]!.isLive {
            guard case .reference(let target) = value(n, "folder"), let folder = resolveFolder(target) else { continue }
            visibleNotes.insert(n)
            lines.append("Note \(n) \(text(n, "title")) \(folder)")
        }
        for c in ids("Comment") where states[c]!.isLive {
            var note = "-"
            if case .reference(let target) = value(c, "note"), visibleNotes.contains(target) { note = "\(target)" }
            lines.append("Comment \(c) \(text(c, "text")) \(note)")
        }
        return lines
    }
}
