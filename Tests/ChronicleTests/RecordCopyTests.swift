@testable import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import Logging
import Testing

/// Copying records between two stores of a device (a merge, a move, a
/// deletion's carry), checked on the records' merge state.
@Suite struct RecordCopyTests {
    /// Folders first: a copy deletes in schema order, so a folder's delete
    /// comes before its notes'.
    static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")]),
        Entity("Note", attributes: [Attribute("title", .string)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes", deleteRule: .cascade)]),
    ])

    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-copy-\(UUID().uuidString)")

    func store(_ name: String) async throws -> Store {
        try await Store.open(Store.Configuration(schema: Self.schema, directory: root.appendingPathComponent(name),
                                                 container: try DirectoryContainer(root: root.appendingPathComponent("container-\(name)"), create: true),
                                                 seed: 7, logger: Logger(label: "test"), durability: .normal))
    }

    /// Regression: carrying the deletes of a folder and of its note, the
    /// folder's delete hid the note (the cascade) before the note's delete
    /// ran, which then found no note and was dropped. Were the folder to
    /// come back (an update made elsewhere after its delete), the note
    /// would have come back with it. The note's delete is kept.
    @Test func aCarriedDeleteOfARecordACarriedCascadeHidAlreadyIsKept() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = RecordID(UUID()), note = RecordID(UUID())
        let destination = try await store("destination")
        try await destination.write { tx in
            _ = tx.insert("Folder", ["name": .string("f")], id: folder)
            _ = tx.insert("Note", ["title": .string("n"), "folder": .reference(folder)], id: note)
        }
        let source = try await store("source")
        try await source.write { tx in
            _ = tx.insert("Folder", ["name": .string("f")], id: folder)
            _ = tx.insert("Note", ["title": .string("n"), "folder": .reference(folder)], id: note)
        }
        try await source.write { tx in
            tx.delete("Note", id: note)
            tx.delete("Folder", id: folder)
        }

        let report = try await RecordCopy(schema: Self.schema, batchSize: 500, existing: .overwrite, only: [folder, note])
            .run(from: source, into: destination)
        #expect(report.deleted == 2, "\(report)")
        let versions = try destination.snapshot.recordVersions(entity: "Note", id: note)
        let noteState = try #require(versions)
        #expect(noteState.deleteVersion != nil, "the note's delete is in its state, not only hidden by its folder's")
        #expect(try destination.snapshot.recordVersions(entity: "Folder", id: folder)?.deleteVersion != nil)
        #expect(try await destination.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") } == 0)
        try await source.close()
        try await destination.close()
    }
    /// A device carries into a new store a note it made and deleted while
    /// away; the new store has never known the note. A copy of the device's
    /// folder, made between the insert and the delete, carries the note
    /// there afterwards. The delete wins, as it would have in a sync: the
    /// first carry gives the new store the note's whole history (insert,
    /// then delete, at their own clocks), and the copy's carry finds it
    /// deleted.
    @Test func aCarriedDeleteOfARecordTheDestinationNeverKnewWinsOverALaterCopy() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let note = RecordID(UUID())
        let destination = try await store("destination")
        let source = try await store("source")
        try await source.write { tx in _ = tx.insert("Note", ["title": .string("made away")], id: note) }
        let twin = try await store("twin")
        try await twin.write { tx in _ = tx.insert("Note", ["title": .string("made away")], id: note) }
        try await source.write { tx in tx.delete("Note", id: note) }

        var carry = RecordCopy(schema: Self.schema, batchSize: 500, existing: .overwrite, only: [note])
        carry.deletedHistories = [note: ("Note", try #require(try source.snapshot.history(of: "Note", note)))]
        let report = try await carry.run(from: source, into: destination)
        #expect(report.deleted == 1, "\(report)")
        let state = try #require(try destination.snapshot.recordVersions(entity: "Note", id: note))
        #expect(state.inserted && state.deleteVersion != nil, "the new store holds the note's insert and its delete")
        #expect(state.fields["title"] == (try source.snapshot.recordVersions(entity: "Note", id: note))?.fields["title"],
                "at the clocks they were made with")

        _ = try await RecordCopy(schema: Self.schema, batchSize: 500, existing: .overwrite, only: [note]).run(from: twin, into: destination)
        #expect(try await destination.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") } == 0, "the delete wins over the copy")
        for s in [source, twin, destination] { try await s.close() }
    }

    /// Regression: a device leaving a cloud store deleted on purpose carries
    /// its saves the store never got, the seed of its local data among
    /// them when its copy had not imported that seed yet (an import cut
    /// short). The copy knows nothing of the seeded folder, so it holds no
    /// delete of it either: the local store's folder stays.
    @Test func aSelectedRecordTheSourceNeverKnewIsNotDeleted() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let home = RecordID(UUID()), other = RecordID(UUID())
        let destination = try await store("destination")
        try await destination.write { tx in _ = tx.insert("Folder", ["name": .string("Home")], id: home) }
        let source = try await store("source")
        try await source.write { tx in _ = tx.insert("Folder", ["name": .string("Other")], id: other) }
        let report = try await RecordCopy(schema: Self.schema, batchSize: 500, existing: .overwrite, only: [home, other])
            .run(from: source, into: destination)
        #expect(report.deleted == 0, "\(report)")
        #expect(try destination.snapshot.recordVersions(entity: "Folder", id: home)?.deleteVersion == nil)
        #expect(try await destination.read { db in try String.fetchAll(db, sql: "SELECT name FROM Folder ORDER BY name") } == ["Home", "Other"])
        try await source.close()
        try await destination.close()
    }

    /// Regression: a carry of selected records deleted only those the
    /// destination showed. A note the destination held hidden (its folder
    /// deleted there, the cascade) kept no delete of its own, so it would
    /// have come back with its folder though the source deleted it.
    @Test func aCarriedDeleteOfARecordTheDestinationHidesIsKept() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = RecordID(UUID()), note = RecordID(UUID())
        let destination = try await store("destination")
        try await destination.write { tx in
            _ = tx.insert("Folder", ["name": .string("f")], id: folder)
            _ = tx.insert("Note", ["title": .string("n"), "folder": .reference(folder)], id: note)
        }
        try await destination.write { tx in tx.delete("Folder", id: folder) }
        #expect(try destination.snapshot.recordVersions(entity: "Note", id: note)?.deleteVersion == nil, "hidden by the cascade only")
        let source = try await store("source")
        try await source.write { tx in
            _ = tx.insert("Folder", ["name": .string("f")], id: folder)
            _ = tx.insert("Note", ["title": .string("n"), "folder": .reference(folder)], id: note)
        }
        try await source.write { tx in tx.delete("Note", id: note) }
        let report = try await RecordCopy(schema: Self.schema, batchSize: 500, existing: .overwrite, only: [note]).run(from: source, into: destination)
        #expect(report.deleted == 1, "\(report)")
        #expect(try destination.snapshot.recordVersions(entity: "Note", id: note)?.deleteVersion != nil, "the note's own delete is kept")
        try await source.close()
        try await destination.close()
    }

    /// Regression: a carry of selected records (a device leaving a deleted
    /// store carries its saves the store never got) skipped a field the
    /// source wrote later with the value the destination already showed.
    /// The destination kept its older version of it, so a later merge
    /// against another device's write made between the two would have
    /// dropped the carried save.
    @Test func aCarryKeepsTheVersionOfALaterWriteOfTheSameValue() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = RecordID(UUID())
        let destination = try await store("destination")
        try await destination.write { tx in _ = tx.insert("Folder", ["name": .string("Inbox")], id: folder) }
        let before = try #require(try destination.snapshot.recordVersions(entity: "Folder", id: folder)?.fields["name"])
        let source = try await store("source")
        try await source.write { tx in _ = tx.insert("Folder", ["name": .string("Inbox")], id: folder) }
        try await source.write { tx in tx.update("Folder", id: folder, ["name": .string("Inbox")]) }
        let written = try #require(try source.snapshot.recordVersions(entity: "Folder", id: folder)?.fields["name"])
        #expect(written > before)
        _ = try await RecordCopy(schema: Self.schema, batchSize: 500, existing: .overwrite, only: [folder]).run(from: source, into: destination)
        let after = try #require(try destination.snapshot.recordVersions(entity: "Folder", id: folder)?.fields["name"])
        #expect(after >= written, "the carried write's version reaches the destination")
        #expect(try await destination.read { db in try String.fetchAll(db, sql: "SELECT name FROM Folder") } == ["Inbox"])
        try await source.close()
        try await destination.close()
    }

    /// Regression: merging a store (a fallback store, the local store) into
    /// one that already had a record kept the destination's values whole,
    /// so an edit made in the merged store after the destination got the
    /// record (on a copy of the device folder, say) was dropped. Each field
    /// the source wrote later is carried; a field the destination wrote
    /// later stays.
    @Test func aMergeCarriesTheFieldsTheSourceWroteLater() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = RecordID(UUID())
        let destination = try await store("destination")
        let source = try await store("source")
        try await destination.write { tx in _ = tx.insert("Folder", ["name": .string("first")], id: folder) }
        try await source.write { tx in _ = tx.insert("Folder", ["name": .string("first")], id: folder) }
        try await source.write { tx in tx.update("Folder", id: folder, ["name": .string("edited in the source")]) }
        let copy = RecordCopy(schema: Self.schema, batchSize: 500, existing: .newer)
        let first = try await copy.run(from: source, into: destination)
        #expect(first.alreadyPresent == 1 && first.transactions == 1, "\(first)")
        #expect(try await destination.read { db in try String.fetchOne(db, sql: "SELECT name FROM Folder") } == "edited in the source")
        // Run again, it carries nothing more; a later edit of the
        // destination stays.
        #expect(try await copy.run(from: source, into: destination).transactions == 0)
        try await destination.write { tx in tx.update("Folder", id: folder, ["name": .string("edited in the destination")]) }
        #expect(try await copy.run(from: source, into: destination).transactions == 0)
        #expect(try await destination.read { db in try String.fetchOne(db, sql: "SELECT name FROM Folder") } == "edited in the destination")
        try await source.close()
        try await destination.close()
    }

    /// Regression: a merge (`newer`) took a record the destination held but
    /// did not show (deleted there, or merged into a record of the same
    /// unique key) as deleted, and dropped what the source wrote to it
    /// after that. A sync brings such a record back (an update made after
    /// a delete by a device that had not seen it); a merge must too, and a
    /// note the source put in it must keep its folder. An edit the source
    /// made before the delete does not bring it back.
    @Test func aMergeBringsBackARecordTheSourceEditedAfterTheDestinationDeletedIt() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let kept = RecordID(UUID()), gone = RecordID(UUID()), note = RecordID(UUID())
        let destination = try await store("destination")
        let source = try await store("source")
        for store in [destination, source] {
            try await store.write { tx in
                _ = tx.insert("Folder", ["name": .string("kept")], id: kept)
                _ = tx.insert("Folder", ["name": .string("gone")], id: gone)
            }
        }
        // Before the destination's delete: this edit loses to it.
        try await source.write { tx in tx.update("Folder", id: gone, ["name": .string("edited before the delete")]) }
        try await Task.sleep(for: .milliseconds(5))
        try await destination.write { tx in
            tx.delete("Folder", id: kept)
            tx.delete("Folder", id: gone)
        }
        try await Task.sleep(for: .milliseconds(5))
        // After it: this edit, and the note filed in the folder, win.
        try await source.write { tx in
            tx.update("Folder", id: kept, ["name": .string("edited after the delete")])
            _ = tx.insert("Note", ["title": .string("n"), "folder": .reference(kept)], id: note)
        }
        let report = try await RecordCopy(schema: Self.schema, batchSize: 500, existing: .newer).run(from: source, into: destination)
        #expect(report.copied == 1 && report.alreadyPresent == 2, "\(report)")
        let folders = try await destination.read { db in try String.fetchAll(db, sql: "SELECT name FROM Folder") }
        #expect(folders == ["edited after the delete"])
        let noteFolder = try await destination.read { db in try RecordID.fetchOne(db, sql: "SELECT folder FROM Note") }
        #expect(noteFolder == kept)
        // The edit that lost is still in the state, as a sync keeps it.
        #expect(try destination.snapshot.recordVersions(entity: "Folder", id: gone)?.deleteVersion != nil)
        // Run again, it carries nothing more.
        #expect(try await RecordCopy(schema: Self.schema, batchSize: 500, existing: .newer).run(from: source, into: destination).transactions == 0)
        try await source.close()
        try await destination.close()
    }
}
