import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// Records of entities with unique keys or references keep their state in
/// their row too, as long as the row shows exactly what one insert wrote.
/// Their keys and references are then read from the row, not from
/// `_chronicle_keys` and `_chronicle_refs`. Whatever form the states take,
/// the view must be the same in every order, and a state must live in
/// exactly one place.
@Suite struct CompactKeyedStateTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
        Entity("Note", attributes: [Attribute("key", .string), Attribute("title", .string)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes", deleteRule: .cascade),
                               .toMany("comments", to: "Comment", inverse: "note")],
               unique: [["key"]]),
        Entity("Comment", attributes: [Attribute("text", .string)],
               relationships: [.toOne("note", to: "Note", inverse: "comments", deleteRule: .nullify)]),
    ])
    static let store = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))

    static func id(_ n: UInt64) -> RecordID { RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0000 | n) }

    static func temporary() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-compact-keyed-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func snapshot(_ dir: URL, device: UInt64 = 1) throws -> Snapshot {
        try Snapshot(path: dir.appendingPathComponent("s\(device).sqlite").path, schema: schema, storeID: store,
                     deviceID: DeviceID(index: device), durability: .normal)
    }

    static func log(device: UInt64, sequence: UInt64, _ changes: [Change]) throws -> (VerifiedLog, String) {
        let t = Transaction(deviceID: DeviceID(index: device), sequence: sequence,
                            clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + sequence * 10 + device, counter: 0),
                            schemaHash: schema.hash, changes: changes)
        return (try LogDecoder(schema: schema).open(try LogEncoder(storeID: store).encode([t])), "d\(device)-\(sequence)")
    }

    static func folder(_ id: RecordID, _ name: String) -> Change {
        Change(.insert, entity: "Folder", recordID: id, values: [FieldValue("name", .string(name))])
    }

    static func note(_ id: RecordID, _ key: String, in folder: RecordID) -> Change {
        Change(.insert, entity: "Note", recordID: id, values: [
            FieldValue("key", .string(key)), FieldValue("title", .string("about \(key)")), FieldValue("folder", .reference(folder)),
        ])
    }

    static func comment(_ id: RecordID, on note: RecordID) -> Change {
        Change(.insert, entity: "Comment", recordID: id, values: [FieldValue("text", .string("yes")), FieldValue("note", .reference(note))])
    }

    /// Applies the logs one at a time, in order: each one applies (the
    /// tests give each device's logs in sequence order, or one log each).
    static func replay(_ logs: [(VerifiedLog, String)], into snapshot: Snapshot) throws {
        for (log, name) in logs {
            let outcome = try snapshot.apply(log, name: name)
            guard case .applied = outcome else {
                Issue.record("\(name) did not apply: \(outcome)")
                continue
            }
        }
    }

    /// Where a record's state is, and whether its keys and references are
    /// in their tables.
    struct Place: Equatable {
        var full = false, compact = false, keys = false, refs = false
    }

    static func place(_ snapshot: Snapshot, _ entity: String, _ id: RecordID) throws -> Place {
        try snapshot.read { db in
            let bytes = Data(id.bytes)
            return Place(
                full: try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_records WHERE id = ?", arguments: [bytes]) ?? false,
                compact: try Bool.fetchOne(db, sql: "SELECT 1 FROM \"_chronicle_rows_\(entity)\" WHERE id = ? AND _chronicle_version IS NOT NULL",
                                           arguments: [bytes]) ?? false,
                keys: try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_keys WHERE id = ?", arguments: [bytes]) ?? false,
                refs: try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_refs WHERE id = ?", arguments: [bytes]) ?? false)
        }
    }

    static let compact = Place(compact: true)

    /// Every state in exactly one place; a compact one has nothing in the
    /// key and reference tables.
    static func checkOnePlace(_ snapshot: Snapshot) throws {
        try snapshot.read { db in
            for entity in schema.entities {
                let rows = "\"_chronicle_rows_\(entity.name)\""
                let both = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM \(rows) WHERE _chronicle_version IS NOT NULL AND id IN (SELECT id FROM _chronicle_records)
                    """) ?? -1
                #expect(both == 0, "\(entity.name): states in two places")
                let indexed = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM \(rows) WHERE _chronicle_version IS NOT NULL
                    AND (id IN (SELECT id FROM _chronicle_keys) OR id IN (SELECT id FROM _chronicle_refs))
                    """) ?? -1
                #expect(indexed == 0, "\(entity.name): compact states with stored keys or references")
            }
        }
    }

    /// Replays `logs` in order and in reverse into two new snapshots and
    /// checks they show the same; returns the one that got them in order.
    static func replayBothWays(_ logs: [(VerifiedLog, String)], _ dir: URL) throws -> Snapshot {
        // Snapshots of their own, not those a test made before.
        let forward = try snapshot(dir, device: 101)
        let backward = try snapshot(dir, device: 102)
        try replay(logs, into: forward)
        try replay(logs.reversed(), into: backward)
        #expect(try forward.stateHash() == backward.stateHash())
        try checkOnePlace(forward)
        try checkOnePlace(backward)
        return forward
    }

    @Test func insertsOfKeyedAndReferringRecordsKeepTheirStateInTheRow() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (f, n, c) = (Self.id(1), Self.id(2), Self.id(3))
        let inserts = try Self.log(device: 5, sequence: 1, [Self.folder(f, "Inbox"), Self.note(n, "a", in: f), Self.comment(c, on: n)])
        let snapshot = try Self.snapshot(dir)
        try Self.replay([inserts], into: snapshot)
        for (entity, id) in [("Folder", f), ("Note", n), ("Comment", c)] {
            #expect(try Self.place(snapshot, entity, id) == Self.compact, "\(entity)")
        }
        #expect(try snapshot.recordCounts() == ["Folder": 1, "Note": 1, "Comment": 1])
        // An update of an attribute in no key keeps the note's state in its
        // row, with the title's own version.
        let update = try Self.log(device: 6, sequence: 1, [Change(.update, entity: "Note", recordID: n, values: [FieldValue("title", .string("new"))])])
        try Self.replay([update], into: snapshot)
        #expect(try Self.place(snapshot, "Note", n) == Self.compact)
        let noteVersions = try #require(try snapshot.recordVersions(entity: "Note", id: n))
        #expect(noteVersions.fields["title"] == Version(clock: update.0.header.minClock, device: DeviceID(index: 6)))
        #expect(noteVersions.fields["key"] == Version(clock: inserts.0.header.minClock, device: DeviceID(index: 5)))
        #expect(noteVersions.fields["folder"] == noteVersions.fields["key"])
        #expect(try snapshot.read { db in try String.fetchOne(db, sql: "SELECT title FROM Note") } == "new")
        // A change of its key moves its state, keys and reference out of
        // its row; the others stay as they were.
        let rekey = try Self.log(device: 7, sequence: 1, [Change(.update, entity: "Note", recordID: n, values: [FieldValue("key", .string("b"))])])
        try Self.replay([rekey], into: snapshot)
        #expect(try Self.place(snapshot, "Note", n) == Place(full: true, keys: true, refs: true))
        #expect(try Self.place(snapshot, "Folder", f) == Self.compact)
        #expect(try Self.place(snapshot, "Comment", c) == Self.compact)
        let moved = try #require(try snapshot.recordVersions(entity: "Note", id: n))
        #expect(moved.fields["title"] == noteVersions.fields["title"] && moved.fields["folder"] == noteVersions.fields["folder"])
        let both = try Self.replayBothWays([inserts, update, rekey], dir)
        #expect(try both.stateHash() == snapshot.stateHash())
        let versions = try #require(try snapshot.recordVersions(entity: "Comment", id: c))
        #expect(versions.inserted && versions.fields.count == 2)
    }

    /// A record that shares its key with a duplicate shows the newest value
    /// any of them holds: an update to it goes the general way, even when
    /// its state is compact (the duplicate held the same values), and a
    /// newer write of the duplicate still wins over it, in every order.
    @Test func anUpdateOfARecordWithADuplicateShowsTheNewestValueOfThemAll() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (f, n, duplicate) = (Self.id(1), Self.id(2), Self.id(9))
        let first = try Self.log(device: 5, sequence: 1, [Self.folder(f, "Inbox"), Self.note(n, "a", in: f)])
        // Later, on another device: a note with the same key and values.
        let second = try Self.log(device: 7, sequence: 1, [Self.note(duplicate, "a", in: f)])
        // Between the two: an edit of the first note's title.
        let edit = try Self.log(device: 6, sequence: 1, [Change(.update, entity: "Note", recordID: n, values: [FieldValue("title", .string("edited"))])])
        let snapshot = try Self.snapshot(dir)
        try Self.replay([first, second], into: snapshot)
        #expect(try snapshot.recordCounts()["Note"] == 1)
        #expect(try Self.place(snapshot, "Note", n) == Self.compact, "its row shows what it holds: the duplicate's values are the same")
        try Self.replay([edit], into: snapshot)
        #expect(try snapshot.read { db in try String.fetchOne(db, sql: "SELECT title FROM Note") } == "about a",
                "the duplicate's title is newer than the edit")
        let both = try Self.replayBothWays([first, second, edit], dir)
        #expect(try both.stateHash() == snapshot.stateHash())
        try Self.checkOnePlace(snapshot)
    }

    /// Updates of attributes keep a record's state compact, a version per
    /// field, through any number of edits from several devices; the merge
    /// comes out as from full states, in every order, and an older write
    /// loses to what the row holds.
    @Test func editsOfAttributesKeepTheStateCompactAndMergeInAnyOrder() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (f, n) = (Self.id(1), Self.id(2))
        var logs = [try Self.log(device: 5, sequence: 1, [Self.folder(f, "Inbox"), Self.note(n, "a", in: f)])]
        // Each edit from a device of its own, later devices' clocks later.
        for i in 0..<7 {
            logs.append(try Self.log(device: UInt64(10 + i), sequence: 1, [
                Change(.update, entity: i % 3 == 2 ? "Folder" : "Note", recordID: i % 3 == 2 ? f : n,
                       values: [i % 3 == 2 ? FieldValue("name", .string("Inbox")) : FieldValue("title", .string("edit \(i)"))]),
            ]))
        }
        // Older than the insert: loses on the title.
        logs.append(try Self.log(device: 2, sequence: 1, [Change(.update, entity: "Note", recordID: n, values: [FieldValue("title", .string("old"))])]))
        let snapshot = try Self.snapshot(dir)
        try Self.replay(logs, into: snapshot)
        #expect(try Self.place(snapshot, "Note", n) == Self.compact)
        #expect(try snapshot.read { db in try String.fetchOne(db, sql: "SELECT title FROM Note") } == "edit 6")
        let versions = try #require(try snapshot.recordVersions(entity: "Note", id: n))
        #expect(versions.fields["title"]?.device == DeviceID(index: 16))
        let both = try Self.replayBothWays(logs, dir)
        #expect(try both.stateHash() == snapshot.stateHash())
        #expect(try both.recordVersions(entity: "Note", id: n)?.fields == versions.fields)
        // The same logs with the note's state kept full from the start (an
        // edit before the insert) give the same versions.
        let full = try Self.snapshot(dir, device: 3)
        try Self.replay(Array(logs[1...]) + [logs[0]], into: full)
        #expect(try full.recordVersions(entity: "Note", id: n)?.fields == versions.fields)
        #expect(try full.stateHash() == snapshot.stateHash())
    }

    @Test func aDeletedFolderHidesItsCompactNotesAndTheirStatesSurvive() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (f, n1, n2, c) = (Self.id(1), Self.id(2), Self.id(3), Self.id(4))
        let logs = [
            try Self.log(device: 5, sequence: 1, [Self.folder(f, "Inbox"), Self.note(n1, "a", in: f), Self.note(n2, "b", in: f), Self.comment(c, on: n1)]),
            try Self.log(device: 6, sequence: 1, [Change(.delete, entity: "Folder", recordID: f)]),
        ]
        let snapshot = try Self.replayBothWays(logs, dir)
        // The cascade hides both notes; the comment's note shows NULL.
        #expect(try snapshot.recordCounts() == ["Folder": 0, "Note": 0, "Comment": 1])
        #expect(try snapshot.read { db in try Data.fetchOne(db, sql: "SELECT note FROM Comment") } == nil)
        for id in [n1, n2] {
            let place = try Self.place(snapshot, "Note", id)
            #expect(place.full && !place.compact && place.refs)
        }
        // An edit of the folder made without seeing the delete brings it
        // back, and its notes with it, with every value they had.
        let edit = Transaction(deviceID: DeviceID(index: 7), sequence: 1, clock: HybridTimestamp(milliseconds: 1_800_000_000_000, counter: 0),
                               schemaHash: Self.schema.hash, changes: [Change(.update, entity: "Folder", recordID: f, values: [FieldValue("name", .string("Back"))])])
        _ = try snapshot.apply(LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: Self.store).encode([edit])), name: "edit")
        #expect(try snapshot.recordCounts() == ["Folder": 1, "Note": 2, "Comment": 1])
        #expect(try snapshot.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY key") } == ["about a", "about b"])
        try Self.checkOnePlace(snapshot)
    }

    @Test func aSmallerRecordWithTheSameKeyTakesOverACompactOneAndItsReferrers() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Two devices make an "Inbox" apart; the one with the larger ID is
        // seen first, with a note in it.
        let (small, large, n) = (Self.id(1), Self.id(2), Self.id(3))
        let logs = [
            try Self.log(device: 5, sequence: 1, [Self.folder(large, "Inbox"), Self.note(n, "a", in: large)]),
            try Self.log(device: 6, sequence: 1, [Self.folder(small, "Inbox")]),
        ]
        let snapshot = try Self.replayBothWays(logs, dir)
        #expect(try snapshot.recordCounts() == ["Folder": 1, "Note": 1, "Comment": 0])
        #expect(try snapshot.read { db in try Data.fetchOne(db, sql: "SELECT id FROM Folder") } == Data(small.bytes))
        #expect(try snapshot.read { db in try Data.fetchOne(db, sql: "SELECT folder FROM Note") } == Data(small.bytes))
        #expect(try snapshot.survivors(of: [large]) == [large: small])
        // The hidden duplicate, the note that now shows another folder than
        // the one it names, and the survivor that found its key taken keep
        // full states.
        #expect(try Self.place(snapshot, "Folder", large) == Place(full: true, keys: true))
        #expect(try Self.place(snapshot, "Note", n) == Place(full: true, keys: true, refs: true))
        #expect(try Self.place(snapshot, "Folder", small) == Place(full: true, keys: true))
        // A third "Inbox", larger still, joins the group as a duplicate; a
        // compact survivor stays compact when a duplicate joins it.
        let third = try Self.log(device: 7, sequence: 1, [Self.folder(Self.id(9), "Inbox")])
        let other = try Self.log(device: 8, sequence: 1, [Self.folder(Self.id(5), "Work"), Self.folder(Self.id(10), "Work")])
        try Self.replay([third, other], into: snapshot)
        #expect(try snapshot.recordCounts()["Folder"] == 2)
        #expect(try Self.place(snapshot, "Folder", Self.id(9)) == Place(full: true, keys: true))
        #expect(try Self.place(snapshot, "Folder", Self.id(5)) == Self.compact)
        #expect(try Self.place(snapshot, "Folder", Self.id(10)) == Place(full: true, keys: true))
        let all = try Self.replayBothWays(logs + [third, other], try Self.temporary())
        #expect(try all.stateHash() == snapshot.stateHash())
    }

    @Test func aReferenceToARecordNotSeenYetWaitsInAFullState() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (f, n, c) = (Self.id(1), Self.id(2), Self.id(3))
        let logs = [
            try Self.log(device: 5, sequence: 1, [Self.note(n, "a", in: f), Self.comment(c, on: n)]),
            try Self.log(device: 6, sequence: 1, [Self.folder(f, "Inbox")]),
        ]
        let snapshot = try Self.snapshot(dir)
        try Self.replay([logs[0]], into: snapshot)
        // The folder is not there: the note is hidden (cascade), the
        // comment shows no note (nullify).
        #expect(try snapshot.recordCounts() == ["Folder": 0, "Note": 0, "Comment": 1])
        #expect(try Self.place(snapshot, "Note", n).full)
        #expect(try Self.place(snapshot, "Comment", c).full)
        try Self.replay([logs[1]], into: snapshot)
        #expect(try snapshot.recordCounts() == ["Folder": 1, "Note": 1, "Comment": 1])
        #expect(try snapshot.read { db in try Data.fetchOne(db, sql: "SELECT note FROM Comment") } == Data(n.bytes))
        try Self.checkOnePlace(snapshot)
        let both = try Self.replayBothWays(logs, try Self.temporary())
        #expect(try both.stateHash() == snapshot.stateHash())
    }

    @Test func aLocalSaveAndABaselineKeepStatesCompact() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Self.snapshot(dir)
        let (f, n, c) = (Self.id(1), Self.id(2), Self.id(3))
        _ = try snapshot.save([Self.folder(f, "Inbox"), Self.note(n, "a", in: f), Self.comment(c, on: n)], physicalMilliseconds: 1_700_000_000_000)
        for (entity, id) in [("Folder", f), ("Note", n), ("Comment", c)] {
            #expect(try Self.place(snapshot, entity, id) == Self.compact, "\(entity)")
        }
        // A local save still refuses a second "Inbox" and a taken key.
        #expect { _ = try snapshot.save([Self.folder(Self.id(4), "Inbox")], physicalMilliseconds: 1_700_000_000_001) }
            throws: { ($0 as? ChronicleError)?.code == .uniqueViolation }
        #expect { _ = try snapshot.save([Self.note(Self.id(5), "a", in: f)], physicalMilliseconds: 1_700_000_000_002) }
            throws: { ($0 as? ChronicleError)?.code == .uniqueViolation }
        _ = try snapshot.save([Self.note(Self.id(6), "b", in: f),
                               Change(.update, entity: "Note", recordID: n, values: [FieldValue("title", .string("edited"))])],
                              physicalMilliseconds: 1_700_000_000_003)
        // A baseline carries compact and full states alike, and a device
        // that starts from it stores the compact ones compact again.
        let fresh = try Self.snapshot(dir, device: 2)
        let export = try snapshot.baselineExport(partBytes: 1024)
        var application = fresh.baselineApplication()
        let decoder = LogDecoder(schema: Self.schema)
        while let part = try export.nextPart() { _ = try application.apply(try decoder.open(part.bytes)) }
        #expect(try fresh.stateHash() == snapshot.stateHash())
        #expect(try fresh.recordCounts() == ["Folder": 1, "Note": 2, "Comment": 1])
        #expect(try Self.place(fresh, "Comment", c) == Self.compact)
        #expect(try Self.place(fresh, "Note", n) == Place(full: true, keys: true, refs: true))
        try Self.checkOnePlace(fresh)
        // Deleting the folder locally takes its notes with it (found through
        // their rows), and the comment shows no note.
        _ = try snapshot.save([Change(.delete, entity: "Folder", recordID: f)], physicalMilliseconds: 1_700_000_000_004)
        #expect(try snapshot.recordCounts() == ["Folder": 0, "Note": 0, "Comment": 1])
        try Self.checkOnePlace(snapshot)
    }
}
