import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// Dedupe across devices: references that resolve through key groups whose
/// membership changes (inserts, renames into and out of a group, deletes),
/// and deletes of a survivor that has merged duplicates.
@Suite struct DedupeTests {
    /// Folders with two unique keys (a name, and an optional code: a NULL
    /// code is not deduplicated), notes that cascade with their folder,
    /// comments that nullify with their note.
    static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string), Attribute("code", .string, optional: true),
                                      Attribute("color", .string, optional: true)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"], ["code"]]),
        Entity("Note", attributes: [Attribute("title", .string)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes", deleteRule: .cascade),
                               .toMany("comments", to: "Comment", inverse: "note")]),
        Entity("Comment", attributes: [Attribute("text", .string)],
               relationships: [.toOne("note", to: "Note", inverse: "comments", deleteRule: .nullify)]),
    ])

    /// Folder IDs in a known order: `folder(0) < folder(1) < ...`.
    static func folder(_ n: UInt64) -> RecordID { RecordID(high: 0x0100_0000_0000_7000 + (n << 20), low: 0x8000_0000_0000_0001) }

    /// Every device and a fresh one that replays the whole container show the same state.
    static func expectConverged(_ d: TestDevices, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await d.syncAll()
        let hashes = try await d.hashes()
        #expect(hashes.count == 1, "devices disagree", sourceLocation: sourceLocation)
        let fresh = try await d.add()
        try await fresh.sync()
        #expect(try await fresh.stateHash() == hashes.first, "a fresh replay disagrees", sourceLocation: sourceLocation)
    }

    static func folderOfNote(_ note: RecordID, on store: Store) async throws -> RecordID? {
        try await store.read { db in try RecordID.fetchOne(db, sql: "SELECT folder FROM Note WHERE id = ?", arguments: [note]) }
    }

    /// A note on a hidden duplicate follows its key group's survivor when a
    /// rename moves a folder with a smaller ID into the group.
    @Test func aRenameIntoAGroupMovesReferencesToTheNewSurvivorEverywhere() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        let (f0, f1, f2) = (Self.folder(0), Self.folder(1), Self.folder(2))
        try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f1) }
        let note = try await d.stores[1].write { tx in
            tx.insert("Folder", ["name": "Inbox"], id: f2)
            return tx.insert("Note", ["title": "n", "folder": .reference(f2)])
        }
        try await d.stores[2].write { tx in tx.insert("Folder", ["name": "Work"], id: f0) }
        // Devices 1 and 2 merge the two inboxes (the note resolves to f1)
        // and see "Work".
        try await d.stores[2].sync()
        for s in [d.stores[0], d.stores[1], d.stores[0]] { try await s.sync() }
        #expect(try await Self.folderOfNote(note, on: d.stores[1]) == f1)
        // Device 3, which never saw an inbox, renames its folder into the group.
        try await d.stores[2].write { tx in tx.update("Folder", id: f0, ["name": "Inbox"]) }
        try await Self.expectConverged(d)
        for s in d.stores {
            #expect(try await Self.folderOfNote(note, on: s) == f0)
            #expect(try await s.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Folder") } == [f0])
        }
    }

    /// Two devices create the same natural key apart, and one of them then
    /// updates its record (a newer revision of an imported feed, say).
    /// Once they sync, the record with the smaller ID stays and the other is
    /// its hidden duplicate; the update is not hidden with it: the record
    /// that stays shows the newest value of each plain field, everywhere.
    @Test func anUpdateMadeToAHiddenDuplicateShowsOnTheRecordThatStays() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let (f1, f2) = (Self.folder(1), Self.folder(2))
        try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox", "color": "red"], id: f1) }
        try await d.stores[1].write { tx in tx.insert("Folder", ["name": "Inbox", "color": "red"], id: f2) }
        try await d.stores[1].write { tx in tx.update("Folder", id: f2, ["color": "blue"]) }
        try await Self.expectConverged(d)
        for s in d.stores {
            let ids = try await s.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Folder") }
            #expect(ids == [f1])
            let color = try await s.read { db in try String.fetchOne(db, sql: "SELECT color FROM Folder") }
            #expect(color == "blue", "the duplicate's newer color shows on the record that stays")
        }
        // The duplicate itself takes no change: the error names the record
        // it was merged into.
        do {
            try await d.stores[1].write { tx in tx.update("Folder", id: f2, ["color": "pink"]) }
            Issue.record("an update of a merged duplicate was accepted")
        } catch let error as ChronicleError {
            #expect(error.code == .recordNotFound && error.message.contains("was merged into Folder \(f1)"), "\(error)")
        }
        // Nor does a reference to it: the error names the record to refer to.
        do {
            try await d.stores[1].write { tx in _ = tx.insert("Note", ["title": "n", "folder": .reference(f2)]) }
            Issue.record("a reference to a merged duplicate was accepted")
        } catch let error as ChronicleError {
            #expect(error.code == .recordNotFound && error.message.contains("which was merged into Folder \(f1)")
                    && error.message.contains("refer to \(f1) instead"), "\(error)")
        }
        // A later update of the record that stays wins over both.
        try await d.stores[0].write { tx in tx.update("Folder", id: f1, ["color": "green"]) }
        try await Self.expectConverged(d)
        for s in d.stores {
            #expect(try await s.read { db in try String.fetchOne(db, sql: "SELECT color FROM Folder") } == "green")
        }
    }

    /// Deleting the visible record of a key group deletes the logical
    /// record: its merged duplicates do not come back.
    @Test func deletingASurvivorDeletesItsDuplicatesEverywhere() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        let (f1, f2) = (Self.folder(1), Self.folder(2))
        try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f1) }
        try await d.stores[1].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f2) }
        try await d.syncAll()
        d.clock.advance(byMilliseconds: 5)
        try await d.stores[2].write { tx in tx.delete("Folder", id: f1) }
        #expect(try await d.count("SELECT COUNT(*) FROM Folder WHERE name = 'Inbox'", on: 2) == 0)
        try await Self.expectConverged(d)
        for i in d.stores.indices {
            #expect(try await d.count("SELECT COUNT(*) FROM Folder WHERE name = 'Inbox'", on: i) == 0)
        }
    }

    static func folders(on store: Store) async throws -> [RecordID] {
        try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Folder ORDER BY id") }
    }

    /// Renaming a survivor renames the duplicates merged into it (as far as
    /// the renaming device knows them): the note on the hidden duplicate
    /// stays in the renamed folder, and no "Inbox" comes back.
    @Test func aRenameOutOfAGroupTakesTheKnownDuplicatesAlong() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        let (f1, f2) = (Self.folder(1), Self.folder(2))
        try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f1) }
        let note = try await d.stores[1].write { tx in
            tx.insert("Folder", ["name": "Inbox"], id: f2)
            return tx.insert("Note", ["title": "n", "folder": .reference(f2)])
        }
        try await d.syncAll()
        d.clock.advance(byMilliseconds: 5)
        try await d.stores[2].write { tx in tx.update("Folder", id: f1, ["name": "Work"]) }
        try await Self.expectConverged(d)
        for s in d.stores {
            #expect(try await Self.folders(on: s) == [f1])
            #expect(try await Self.folderOfNote(note, on: s) == f1)
            #expect(try await s.read { db in try String.fetchOne(db, sql: "SELECT name FROM Folder") } == "Work")
        }
    }

    /// A device that never saw the duplicate renames only the record it
    /// knows: the duplicate leaves the group, becomes visible again on every
    /// device, and the note on it follows it there.
    @Test func aRenameByADeviceThatNeverSawTheDuplicateSplitsTheGroupEverywhere() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        let (f1, f2) = (Self.folder(1), Self.folder(2))
        try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f1) }
        try await d.stores[0].sync()
        try await d.stores[2].sync()
        let (note, comment) = try await d.stores[1].write { tx in
            tx.insert("Folder", ["name": "Inbox"], id: f2)
            let note = tx.insert("Note", ["title": "n", "folder": .reference(f2)])
            return (note, tx.insert("Comment", ["text": "c", "note": .reference(note)]))
        }
        try await d.stores[1].sync()
        try await d.stores[0].sync()
        #expect(try await Self.folderOfNote(note, on: d.stores[0]) == f1)
        d.clock.advance(byMilliseconds: 5)
        // Device 3 knows f1 only.
        try await d.stores[2].write { tx in tx.update("Folder", id: f1, ["name": "Work"]) }
        try await Self.expectConverged(d)
        for s in d.stores {
            #expect(try await Self.folders(on: s) == [f1, f2])
            #expect(try await Self.folderOfNote(note, on: s) == f2)
            #expect(try await s.read { db in try RecordID.fetchOne(db, sql: "SELECT note FROM Comment WHERE id = ?", arguments: [comment]) } == note)
        }
    }

    /// A chain: a comment on a note on a hidden duplicate. The group's
    /// survivor changes twice (a smaller folder renamed in, then deleted
    /// with its duplicates); the note follows, then cascades away, and the
    /// comment shows NULL, on every device and on a fresh replay.
    @Test func aChainThroughAHiddenDuplicateFollowsEverySurvivorChange() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        let (f0, f1, f2) = (Self.folder(0), Self.folder(1), Self.folder(2))
        try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f1) }
        try await d.stores[2].write { tx in tx.insert("Folder", ["name": "Work"], id: f0) }
        try await d.stores[2].sync()
        let (note, comment) = try await d.stores[1].write { tx in
            tx.insert("Folder", ["name": "Inbox"], id: f2)
            let note = tx.insert("Note", ["title": "n", "folder": .reference(f2)])
            return (note, tx.insert("Comment", ["text": "c", "note": .reference(note)]))
        }
        for s in [d.stores[0], d.stores[1], d.stores[0]] { try await s.sync() }
        #expect(try await Self.folderOfNote(note, on: d.stores[0]) == f1)
        // Device 3, which has seen no inbox, renames its folder into the group.
        d.clock.advance(byMilliseconds: 5)
        try await d.stores[2].write { tx in tx.update("Folder", id: f0, ["name": "Inbox"]) }
        try await Self.expectConverged(d)
        for s in d.stores { #expect(try await Self.folderOfNote(note, on: s) == f0) }
        d.clock.advance(byMilliseconds: 5)
        try await d.stores[0].write { tx in tx.delete("Folder", id: f0) }
        try await Self.expectConverged(d)
        for s in d.stores {
            #expect(try await Self.folders(on: s).isEmpty)
            #expect(try await Self.folderOfNote(note, on: s) == nil)
            #expect(try await s.read { db in try Bool.fetchOne(db, sql: "SELECT note IS NULL FROM Comment WHERE id = ?", arguments: [comment]) } == true)
        }
    }

    /// After deleting a group, the same key is free: a new record with it is
    /// visible everywhere. A device that had not seen the delete and inserts
    /// the same key concurrently makes a record the delete did not know of:
    /// it stays, everywhere.
    @Test func aKeyIsFreeAfterItsGroupIsDeletedAndAConcurrentInsertStays() async throws {
        let d = try await TestDevices(4, schema: Self.schema)
        let (f1, f2) = (Self.folder(1), Self.folder(2))
        try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f1) }
        try await d.stores[1].write { tx in tx.insert("Folder", ["name": "Inbox"], id: f2) }
        try await d.stores[0].sync()
        try await d.stores[1].sync()
        try await d.stores[0].sync()
        d.clock.advance(byMilliseconds: 5)
        try await d.stores[0].write { tx in tx.delete("Folder", id: f1) }
        let again = try await d.stores[0].write { tx in tx.insert("Folder", ["name": "Inbox"]) }
        // Device 4 has seen nothing and creates its own "Archive" and "Inbox".
        let concurrent = try await d.stores[3].write { tx in
            tx.insert("Folder", ["name": "Archive"])
            return tx.insert("Folder", ["name": "Inbox"], id: Self.folder(3))
        }
        try await Self.expectConverged(d)
        for s in d.stores {
            // The smaller of the two new inboxes survives; the other is its duplicate.
            #expect(try await s.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Folder WHERE name = 'Inbox'") } == [min(again, concurrent)])
        }
    }

    /// A save's changes share one version, so its keys must be unique once
    /// it is applied, whatever order its changes are in: two folders swap
    /// names (through a temporary name, which the transaction folds away),
    /// three rotate codes; a save that leaves two records with one key is
    /// refused whole.
    @Test func aSaveMayMoveKeysBetweenItsRecordsButNotLeaveOneOnTwo() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let s = d.stores[0]
        let (a, b, c) = (Self.folder(1), Self.folder(2), Self.folder(3))
        try await s.write { tx in
            tx.insert("Folder", ["name": "P", "code": "1"], id: a)
            tx.insert("Folder", ["name": "Q", "code": "2"], id: b)
            tx.insert("Folder", ["name": "R", "code": "3"], id: c)
        }
        try await s.write { tx in
            tx.update("Folder", id: a, ["name": "tmp"])
            tx.update("Folder", id: b, ["name": "P"])
            tx.update("Folder", id: a, ["name": "Q"])
            tx.update("Folder", id: a, ["code": "2"])
            tx.update("Folder", id: b, ["code": "3"])
            tx.update("Folder", id: c, ["code": "1"])
        }
        let expected = ["P:3", "Q:2", "R:1"]
        let shown = { (store: Store) in try await store.read { db in try String.fetchAll(db, sql: "SELECT name || ':' || code FROM Folder ORDER BY name") } }
        #expect(try await shown(s) == expected)
        func refused(_ label: String, _ body: @escaping @Sendable (inout WriteTransaction) -> Void) async throws {
            do {
                try await s.write(body)
                Issue.record("the save that \(label) was taken")
            } catch let error as ChronicleError {
                #expect(error.code == .uniqueViolation, "\(label): \(error)")
            }
            #expect(try await shown(s) == expected, "nothing of the refused save that \(label)")
        }
        try await refused("gives a name to two folders") { tx in tx.update("Folder", id: a, ["name": "R"]) }
        try await refused("gives a code to two folders") { tx in tx.update("Folder", id: c, ["code": "2"]) }
        try await refused("moves names but leaves a clash") { tx in
            tx.update("Folder", id: a, ["name": "P"])
            tx.update("Folder", id: b, ["name": "X"])
            tx.update("Folder", id: c, ["name": "X"])
        }
        try await Self.expectConverged(d)
        #expect(try await shown(d.stores[1]) == expected)
    }

    /// A key a later change of the same save frees (a delete of its holder,
    /// or a rename) may be taken earlier in that save, by an insert or by
    /// another record; the record that held it is deleted alone.
    @Test func aKeyFreedLaterInTheSameSaveMayBeTakenEarlierInIt() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let s = d.stores[0]
        let (a, b, c) = (Self.folder(1), Self.folder(2), Self.folder(3))
        try await s.write { tx in
            tx.insert("Folder", ["name": "A"], id: a)
            tx.insert("Folder", ["name": "B"], id: b)
            tx.insert("Folder", ["name": "C"], id: c)
        }
        let shown = { (store: Store) in try await store.read { db in try String.fetchAll(db, sql: "SELECT name FROM Folder ORDER BY name") } }
        let new = try await s.write { tx in
            let new = tx.insert("Folder", ["name": "A"])
            tx.delete("Folder", id: a)
            return new
        }
        try await s.write { tx in
            tx.insert("Folder", ["name": "B"])
            tx.update("Folder", id: b, ["name": "B2"])
        }
        try await s.write { tx in
            tx.update("Folder", id: c, ["name": "A"])
            tx.delete("Folder", id: new)
        }
        let expected = ["A", "B", "B2"]
        #expect(try await shown(s) == expected)
        #expect(try await s.read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Folder WHERE name = 'A'") } == c)
        try await Self.expectConverged(d)
        #expect(try await shown(d.stores[1]) == expected)
    }

    /// Devices save at random (folders whose names and codes collide,
    /// renames into and out of groups, deletes of survivors, notes and
    /// comments on whatever they see) and sync in random orders. After a
    /// local delete or rename, the old key is gone on that device at once;
    /// in the end every device and a fresh replay agree.
    @Test(arguments: Array(UInt64(1)...8))
    func randomSavesAndSyncsConverge(seed: UInt64) async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        var rng = SeededRandom(seed: seed)
        func pick<T>(_ a: [T]) -> T { a[Int(rng.next() % UInt64(a.count))] }
        let names = ["A", "B", "C"]
        let codes: [String?] = [nil, "x", "y"]
        for _ in 0..<70 {
            let store = d.stores[Int(rng.next() % 3)]
            d.clock.advance(byMilliseconds: Int64(rng.next() % 3))
            if rng.next() % 4 == 0 {
                try await store.sync()
                continue
            }
            let folders = try await Self.folders(on: store)
            let notes = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note ORDER BY id") }
            let roll = rng.next() % 100
            let (name, codeText) = (pick(names), pick(codes))
            let code = codeText.map { Value.string($0) } ?? .null
            let folder = folders.isEmpty ? nil : pick(folders)
            let note = notes.isEmpty ? nil : pick(notes)
            let renameCode = rng.next() % 3 == 0
            // The keys a rename or delete of `folder` takes out of this device's view.
            let before = try await store.read { db in
                try Row.fetchOne(db, sql: "SELECT name, code FROM Folder WHERE id = ?", arguments: [folder]).map { ($0["name"] as String, $0["code"] as String?) }
            }
            var gone: [(column: String, value: String?)] = []
            do {
                try await store.write { tx in
                    switch (roll, folder, note) {
                    case (..<25, _, _), (_, nil, _):
                        tx.insert("Folder", ["name": .string(name), "code": code])
                    case (..<45, let f?, _):
                        tx.update("Folder", id: f, renameCode ? ["code": code] : ["name": .string(name)])
                    case (..<55, let f?, _):
                        tx.delete("Folder", id: f)
                    case (..<80, let f?, _), (_, let f?, nil):
                        tx.insert("Note", ["title": "n", "folder": .reference(f)])
                    case (..<90, _, let n?):
                        tx.insert("Comment", ["text": "c", "note": .reference(n)])
                    case (_, _, let n?):
                        tx.delete("Note", id: n)
                    }
                }
                if let before, roll >= 25, roll < 55 {
                    let (oldName, oldCode) = before
                    let deleted = roll >= 45
                    if deleted || (!renameCode && name != oldName) { gone.append(("name", oldName)) }
                    if deleted || (renameCode && codeText != oldCode) { gone.append(("code", oldCode)) }
                }
            } catch let error as ChronicleError where error.code == .uniqueViolation {
                continue
            }
            for (column, value) in gone {
                guard let value else { continue }
                let left = try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Folder WHERE \(column) = ?", arguments: [value]) }
                #expect(left == 0, "seed \(seed): \(column) \(value) is still visible")
            }
        }
        try await Self.expectConverged(d)
    }
}
