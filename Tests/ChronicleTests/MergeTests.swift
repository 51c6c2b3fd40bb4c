import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// Relationships, delete rules, dedupe and bad input, across devices.
@Suite struct MergeTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Author", attributes: [Attribute("name", .string), Attribute("bio", .string, optional: true)],
               relationships: [.toMany("books", to: "Book", inverse: "author"), .toMany("prizes", to: "Prize", inverse: "author")],
               unique: [["name"]]),
        Entity("Book", attributes: [Attribute("title", .string)],
               relationships: [.toOne("author", to: "Author", inverse: "books", deleteRule: .cascade)]),
        Entity("Prize", attributes: [Attribute("title", .string)],
               relationships: [.toOne("author", to: "Author", inverse: "prizes", deleteRule: .deny)]),
        Entity("Review", attributes: [Attribute("text", .string)],
               relationships: [.toOne("book", to: "Book", deleteRule: .nullify)]),
    ])

    @Test func sameNaturalKeyOnTwoDevicesIsDeduplicatedTheSameEverywhere() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        let a = try await d.stores[0].write { tx in tx.insert("Author", ["name": "Le Guin", "bio": "A"]) }
        let b = try await d.stores[1].write { tx in tx.insert("Author", ["name": "Le Guin"]) }
        // A book on the losing duplicate must follow its author to the survivor.
        let book = try await d.stores[1].write { tx in tx.insert("Book", ["title": "Lathe", "author": .reference(b)]) }
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        let survivor = min(a, b)
        for i in 0..<3 {
            #expect(try await d.count("SELECT COUNT(*) FROM Author", on: i) == 1)
            let author = try await d.stores[i].read { db in try RecordID.fetchOne(db, sql: "SELECT author FROM Book WHERE id = ?", arguments: [book]) }
            #expect(author == survivor)
        }
    }

    /// Regression (found by `chronicle demo`, seed 7): importing a duplicate
    /// whose ID is smaller than the visible one briefly made both visible and
    /// the unique index rejected the import.
    @Test func importingASmallerDuplicateReplacesTheVisibleOne() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let small = RecordID(high: 0x0100_0000_0000_7000, low: 0x8000_0000_0000_0001)
        let large = RecordID(high: 0x0200_0000_0000_7000, low: 0x8000_0000_0000_0001)
        try await d.stores[0].write { tx in tx.insert("Author", ["name": "Tiptree"], id: small) }
        try await d.stores[1].write { tx in tx.insert("Author", ["name": "Tiptree"], id: large) }
        let events = try d.stores[1].changes()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        let ids = try await d.stores[1].read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Author") }
        #expect(ids == [small])
        var seen: [RecordEvent] = []
        for await case .record(let e) in events {
            seen.append(e)
            if seen.count == 2 { break }
        }
        #expect(Set(seen.map(\.kind)) == [.deleted, .inserted])
    }

    @Test func localDuplicateKeyIsATypedErrorAndWritesNothing() async throws {
        let d = try await TestDevices(1, schema: Self.schema)
        try await d.stores[0].write { tx in tx.insert("Author", ["name": "Butler"]) }
        await #expect {
            try await d.stores[0].write { tx in
                tx.insert("Book", ["title": "Kindred"])
                tx.insert("Author", ["name": "Butler"])
            }
        } throws: { ($0 as? ChronicleError)?.code == .uniqueViolation }
        #expect(try await d.count("SELECT COUNT(*) FROM Book", on: 0) == 0)
        #expect(try d.stores[0].snapshot.pendingUploadCount() == 1)
    }

    @Test func deleteAgainstConcurrentUpdateIsDecidedByVersion() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let id = try await d.stores[0].write { tx in tx.insert("Author", ["name": "Delany"]) }
        try await d.syncAll()
        // Device 2 edits later than device 1 deletes: the edit wins, everywhere.
        try await d.stores[0].write { tx in tx.delete("Author", id: id) }
        d.clock.advance(byMilliseconds: 10)
        try await d.stores[1].write { tx in tx.update("Author", id: id, ["bio": "edited"]) }
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Author WHERE bio = 'edited'", on: 0) == 1)
        // Now a later delete wins over the earlier edit.
        d.clock.advance(byMilliseconds: 10)
        try await d.stores[0].write { tx in tx.delete("Author", id: id) }
        try await d.syncAll()
        #expect(try await d.count("SELECT COUNT(*) FROM Author", on: 1) == 0)
    }

    @Test func deleteRulesApplyTheSameOnEveryDevice() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let author = try await d.stores[0].write { tx in tx.insert("Author", ["name": "Jemisin"]) }
        let book = try await d.stores[0].write { tx in tx.insert("Book", ["title": "Fifth Season", "author": .reference(author)]) }
        try await d.stores[0].write { [book] tx in tx.insert("Review", ["text": "great", "book": .reference(book)]) }
        let prize = try await d.stores[0].write { tx in tx.insert("Prize", ["title": "Hugo", "author": .reference(author)]) }
        try await d.syncAll()
        // deny: a local delete of a referenced author is refused.
        await #expect {
            try await d.stores[1].write { tx in tx.delete("Author", id: author) }
        } throws: { ($0 as? ChronicleError)?.code == .deleteDenied }
        try await d.stores[1].write { tx in tx.delete("Prize", id: prize) }
        try await d.stores[1].write { tx in tx.delete("Author", id: author) }
        try await d.syncAll()
        for i in 0..<2 {
            // cascade: the book goes with its author; nullify: the review stays, pointing nowhere.
            #expect(try await d.count("SELECT COUNT(*) FROM Book", on: i) == 0)
            #expect(try await d.count("SELECT COUNT(*) FROM Review WHERE book IS NULL", on: i) == 1)
        }
        #expect(try await d.hashes().count == 1)
    }

    /// A required reference with the nullify rule cannot be left empty by a
    /// local delete of its target: the delete is refused, as with `deny`,
    /// until the referrers are deleted or pointed elsewhere.
    @Test func aDeleteThatWouldEmptyARequiredReferenceIsRefused() async throws {
        let schema = try Schema(version: 1, entities: [
            Entity("Owner", attributes: [Attribute("name", .string)]),
            Entity("Pet", attributes: [Attribute("name", .string)],
                   relationships: [.toOne("owner", to: "Owner", deleteRule: .nullify, optional: false)]),
        ])
        let d = try await TestDevices(1, schema: schema)
        let s = d.stores[0]
        let (owner, other) = try await s.write { tx in (tx.insert("Owner", ["name": "Ann"]), tx.insert("Owner", ["name": "Bo"])) }
        let pet = try await s.write { tx in tx.insert("Pet", ["name": "Rex", "owner": .reference(owner)]) }
        let error = await #expect(throws: ChronicleError.self) { try await s.write { tx in tx.delete("Owner", id: owner) } }
        #expect(error?.code == .deleteDenied)
        #expect(error?.message.contains("Pet.owner") == true && error?.message.contains("required") == true)
        // Pointed elsewhere first (in the same save), the delete goes through.
        try await s.write { tx in
            tx.update("Pet", id: pet, ["owner": .reference(other)])
            tx.delete("Owner", id: owner)
        }
        #expect(try await d.count("SELECT COUNT(*) FROM Pet WHERE owner IS NOT NULL", on: 0) == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Owner", on: 0) == 1)
    }

    @Test func badInputIsATypedErrorAndWritesNothing() async throws {
        let d = try await TestDevices(1, schema: Self.schema)
        let s = d.stores[0]
        let cases: [(ChronicleError.Code, @Sendable (inout WriteTransaction) -> Void)] = [
            (.unknownEntity, { $0.insert("Nope", [:]) }),
            (.unknownAttribute, { $0.insert("Author", ["name": "x", "age": 3]) }),
            (.typeMismatch, { $0.insert("Author", ["name": 3]) }),
            (.missingValue, { $0.insert("Author", ["bio": "no name"]) }),
            (.recordNotFound, { $0.update("Author", id: RecordID(high: 1, low: 1), ["name": "x"]) }),
            (.recordNotFound, { $0.insert("Book", ["title": "x", "author": .reference(RecordID(high: 1, low: 1))]) }),
        ]
        for (code, body) in cases {
            await #expect {
                try await s.write { tx in body(&tx) }
            } throws: { ($0 as? ChronicleError)?.code == code }
        }
        #expect(try s.snapshot.pendingUploadCount() == 0)
        #expect(try await s.stateHash() == (try await TestDevices(1, schema: Self.schema).stores[0].stateHash()))
    }

    @Test func aCorruptedBlobIsNotAppliedAndOtherDevicesKeepImporting() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        try await d.stores[0].write { tx in tx.insert("Author", ["name": "one"]) }
        try await d.stores[0].write { tx in tx.insert("Author", ["name": "two"]) }
        try await d.stores[1].write { tx in tx.insert("Author", ["name": "three"]) }
        try await d.stores[0].upload()
        try await d.stores[1].upload()
        // Flip one byte of device 1's log.
        let logs = try await d.container.listAll(prefix: ContainerLayout.logPrefix(store: d.stores[0].storeID, device: DeviceID(index: 1)))
        let path = d.container.root.appendingPathComponent("blobs/\(logs[0].name)")
        var bytes = try Data(contentsOf: path)
        bytes[bytes.count - 3] ^= 0x40
        try bytes.write(to: path)
        let report = try await d.stores[2].importLogs()
        #expect(report.failures.count == 1)
        #expect(report.failures.first?.error.code == .bodyChecksumMismatch)
        #expect(report.failures.first?.name == logs[0].name.rawValue)
        // Device 2's log still arrived; none of device 1's did, not even partly.
        #expect(try await d.count("SELECT COUNT(*) FROM Author", on: 2) == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Author WHERE name = 'three'", on: 2) == 1)
        #expect(try d.stores[2].snapshot.failures().first?.code == "bodyChecksumMismatch")
    }

    struct Book: ChronicleRecord {
        static let entityName = "Book"
        var id: RecordID
        var title: String
        var author: RecordID?
    }

    @Test func codableRecordsRoundTripAndUpdatesSendOnlyChangedFields() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var book = Book(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001), title: "Dawn", author: nil)
        try await d.stores[0].write { [book] tx in try tx.insert(book) }
        #expect(try await d.stores[0].fetch(Book.self, id: book.id)?.title == "Dawn")
        book.title = "Dawn (revised)"
        try await d.stores[0].write { [book] tx in try tx.update(book) }
        try await d.syncAll()
        #expect(try await d.stores[1].fetchAll(Book.self).map(\.title) == ["Dawn (revised)"])
        let updates = try await d.stores[0].snapshot.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM _chronicle_outbox") }
        #expect(updates == 2)
    }

    @Test func changeEventsReportLocalAndImportedChanges() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let events = try d.stores[1].changes()
        try await d.stores[0].write { tx in tx.insert("Author", ["name": "Okorafor"]) }
        try await d.stores[1].write { tx in tx.insert("Author", ["name": "Liu"]) }
        try await d.syncAll()
        var seen: [RecordEvent] = []
        for await case .record(let e) in events {
            seen.append(e)
            if seen.count == 2 { break }
        }
        #expect(seen.map(\.origin) == [.local, .imported])
        #expect(seen.allSatisfy { $0.kind == .inserted && $0.entity == "Author" })
    }
}
