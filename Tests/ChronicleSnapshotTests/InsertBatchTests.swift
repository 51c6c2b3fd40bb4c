import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// New records given as an ``InsertBatch`` (a bulk import's way) are the
/// same save as the same records given as insert changes: the same log
/// body, the same state, the same refusals.
@Suite struct InsertBatchTests {
    typealias Fixture = CompactKeyedStateTests

    static let folder = Fixture.schema.entity(named: "Folder")!
    static let note = Fixture.schema.entity(named: "Note")!

    /// Saves the same records once as a batch and once as changes, each
    /// in a fresh snapshot with one clock, and returns each save's
    /// outbox body and state hash, or its error.
    static func bothWays(before: [Change] = [], andThen later: [Change] = [], _ batch: InsertBatch, then changes: [Change] = []) throws
        -> (batch: Result<([UInt8], String), ChronicleError>, changes: Result<([UInt8], String), ChronicleError>) {
        func run(_ asBatch: Bool) throws -> Result<([UInt8], String), ChronicleError> {
            let dir = try Fixture.temporary()
            defer { try? FileManager.default.removeItem(at: dir) }
            let snapshot = try Fixture.snapshot(dir)
            if !before.isEmpty { _ = try snapshot.save(before, physicalMilliseconds: 1_700_000_000_000) }
            if !later.isEmpty { _ = try snapshot.save(later, physicalMilliseconds: 1_700_000_000_500) }
            do {
                _ = try snapshot.save(physicalMilliseconds: 1_700_000_001_000, building: { _ in
                    asBatch ? (changes, batch) : (batch.ids.indices.map(batch.change) + changes, nil)
                })
            } catch let error as ChronicleError {
                return .failure(error)
            }
            let body = try snapshot.read { db in
                try [UInt8](Data.fetchOne(db, sql: "SELECT body FROM _chronicle_outbox ORDER BY sequence DESC LIMIT 1")!)
            }
            return .success((body, try snapshot.stateHash()))
        }
        return (try run(true), try run(false))
    }

    static func folders(_ names: [String], from n: UInt64 = 10) -> InsertBatch {
        var batch = InsertBatch(entity: folder)
        for (i, name) in names.enumerated() { batch.append(id: Fixture.id(n + UInt64(i)), row: [.string(name)]) }
        return batch
    }

    @Test func aBatchIsTheSameSaveAsItsRecordsAsInsertChanges() throws {
        let (batch, changes) = try Self.bothWays(Self.folders(["a", "b", "c"]),
                                                 then: [Change(.update, entity: "Folder", recordID: Fixture.id(10), values: [FieldValue("name", .string("z"))])])
        let (batchBody, batchHash) = try batch.get()
        let (changesBody, changesHash) = try changes.get()
        #expect(batchBody == changesBody)
        #expect(batchHash == changesHash)
        // Stored at once as compact rows, with no separate key rows.
        let dir = try Fixture.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Fixture.snapshot(dir)
        _ = try snapshot.save(physicalMilliseconds: 1_700_000_001_000, building: { _ in ([], Self.folders(["a"])) })
        #expect(try Fixture.place(snapshot, "Folder", Fixture.id(10)) == Fixture.Place(compact: true))
    }

    @Test func recordsThatCannotBeStoredAtOnceAreSavedAsChanges() throws {
        // Notes refer to a folder: they go through the insert's checks and
        // merge, and land where the changes would put them.
        var notes = InsertBatch(entity: Self.note)
        notes.append(id: Fixture.id(20), row: [.string("k1"), .string("one"), .reference(Fixture.id(1))])
        notes.append(id: Fixture.id(21), row: [.string("k2"), .string("two"), .null])
        let (batch, changes) = try Self.bothWays(before: [Fixture.folder(Fixture.id(1), "home")], notes)
        let (batchBody, batchHash) = try batch.get()
        let (changesBody, changesHash) = try changes.get()
        #expect(batchBody == changesBody)
        #expect(batchHash == changesHash)
    }

    @Test func aBatchIsRefusedAsItsChangesAre() throws {
        let cases: [(before: [Change], later: [Change], batch: InsertBatch, code: ChronicleError.Code)] = [
            // A key another record holds.
            ([Fixture.folder(Fixture.id(1), "taken")], [], Self.folders(["free", "taken"]), .uniqueViolation),
            // Two records of the batch with one key.
            ([], [], Self.folders(["same", "same"]), .uniqueViolation),
            // An ID a record has.
            ([Fixture.folder(Fixture.id(10), "old")], [], Self.folders(["new"]), .recordExists),
            // The ID of a deleted record, which keeps its state and no row.
            ([Fixture.folder(Fixture.id(10), "old")], [Change(.delete, entity: "Folder", recordID: Fixture.id(10))], Self.folders(["new"]), .recordExists),
            // A value of the wrong type, and a required value missing.
            ([], [], { var b = InsertBatch(entity: Self.folder); b.append(id: Fixture.id(10), row: [.int(3)]); return b }(), .typeMismatch),
            ([], [], { var b = InsertBatch(entity: Self.folder); b.append(id: Fixture.id(10), row: [.null]); return b }(), .missingValue),
            // Text holding U+0000.
            ([], [], Self.folders(["a\u{0}b"]), .invalidValue),
        ]
        for (before, later, records, code) in cases {
            let (batch, changes) = try Self.bothWays(before: before, andThen: later, records)
            guard case .failure(let batchError) = batch, case .failure(let changesError) = changes else {
                Issue.record("saved: \(records.ids.count) records, expected \(code)")
                continue
            }
            #expect(batchError.code == code)
            #expect(batchError.message == changesError.message)
        }
    }

    @Test func aSaveThatMayFreeAKeyChecksTheBatchAfterIt() throws {
        // The batch takes a name the same save's delete frees: allowed, as
        // with changes, because keys are checked once the save is applied.
        let (batch, changes) = try Self.bothWays(before: [Fixture.folder(Fixture.id(1), "moving")], Self.folders(["moving"]),
                                                 then: [Change(.delete, entity: "Folder", recordID: Fixture.id(1))])
        let (batchBody, batchHash) = try batch.get()
        let (changesBody, changesHash) = try changes.get()
        #expect(batchBody == changesBody)
        #expect(batchHash == changesHash)
    }
}
