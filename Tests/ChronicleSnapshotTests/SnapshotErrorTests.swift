import ChronicleCore
import Foundation
import GRDB
import Testing

@testable import ChronicleSnapshot

/// What a save or an import reports when it fails: the app's own mistakes
/// as typed errors that name the record and the value, and SQLite's
/// failures with a code that says whether to retry and SQLite's error kept
/// underneath.
@Suite struct SnapshotErrorTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string), Attribute("body", .string, optional: true)], unique: [["title"]]),
    ])

    static func id(_ n: UInt64) -> RecordID { RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0000 | n) }

    static func note(_ kind: ChangeKind, _ n: UInt64, _ values: [FieldValue] = []) -> Change {
        Change(kind, entity: "Note", recordID: id(n), values: values)
    }

    /// Runs `body` with a new snapshot in a folder of its own.
    static func withSnapshot<R>(_ body: (Snapshot, URL) throws -> R) throws -> R {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-errors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Snapshot(path: dir.appendingPathComponent("s.sqlite").path, schema: schema,
                                    storeID: ApplyBatchTests.store, deviceID: DeviceID(index: 1), durability: .normal)
        defer { try? snapshot.close() }
        return try body(snapshot, dir)
    }

    /// The error `body` throws, checked to have `code`.
    static func expectCode(_ code: ChronicleError.Code, sourceLocation: SourceLocation = #_sourceLocation,
                           _ body: () throws -> Void) -> ChronicleError? {
        let error = #expect(throws: ChronicleError.self, sourceLocation: sourceLocation) { try body() }
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        return error
    }

    @Test func aUniqueViolationNamesTheValueAndTheRecordThatHasIt() throws {
        try Self.withSnapshot { snapshot, _ in
            _ = try snapshot.save([Self.note(.insert, 1, [FieldValue("title", "Groceries")])], physicalMilliseconds: 1)
            let error = Self.expectCode(.uniqueViolation) {
                _ = try snapshot.save([Self.note(.insert, 2, [FieldValue("title", "Groceries")])], physicalMilliseconds: 2)
            }
            let message = error?.message ?? ""
            #expect(message.contains(#"title "Groceries""#), "\(message)")
            #expect(message.contains("Note \(Self.id(1))"), "\(message)")
            #expect(message.contains("\(Self.id(2))"), "\(message)")
        }
    }

    /// A string holding U+0000 is refused: SQLite would store it whole, but
    /// reading its text back stops at the NUL, so the app (and `query`)
    /// would get less than it saved.
    @Test func aStringWithANulIsRefused() throws {
        try Self.withSnapshot { snapshot, _ in
            let error = Self.expectCode(.invalidValue) {
                _ = try snapshot.save([Self.note(.insert, 1, [FieldValue("title", "a\u{0}after")])], physicalMilliseconds: 1)
            }
            #expect(error?.message.contains("U+0000") == true, "\(error?.message ?? "")")
            _ = try snapshot.save([Self.note(.insert, 2, [FieldValue("title", "a\u{1}after")])], physicalMilliseconds: 2)
        }
    }

    /// Mistakes in the app's data are typed errors, each its own code.
    @Test func theAppsDataMistakesAreTypedErrorsNotMisuse() throws {
        try Self.withSnapshot { snapshot, _ in
            _ = try snapshot.save([Self.note(.insert, 1, [FieldValue("title", "a")])], physicalMilliseconds: 1)
            _ = Self.expectCode(.recordExists) {
                _ = try snapshot.save([Self.note(.insert, 1, [FieldValue("title", "b")])], physicalMilliseconds: 2)
            }
            _ = Self.expectCode(.invalidChange) { _ = try snapshot.save([Self.note(.update, 1)], physicalMilliseconds: 3) }
            _ = Self.expectCode(.invalidChange) {
                _ = try snapshot.save([Self.note(.delete, 1, [FieldValue("title", "c")])], physicalMilliseconds: 4)
            }
            _ = Self.expectCode(.invalidChange) {
                _ = try snapshot.save([Self.note(.update, 1, [FieldValue("title", "d"), FieldValue("title", "e")])], physicalMilliseconds: 5)
            }
            _ = Self.expectCode(.recordNotFound) { _ = try snapshot.save([Self.note(.delete, 9)], physicalMilliseconds: 6) }
            _ = Self.expectCode(.unknownAttribute) {
                _ = try snapshot.save([Self.note(.update, 1, [FieldValue("colour", "red")])], physicalMilliseconds: 7)
            }
        }
    }

    /// A save with no change is a misuse of the API: a precondition
    /// failure with a message, as GRDB stops on misuse.
    @Test func aSaveOfNothingIsAPreconditionFailure() async {
        await #expect(processExitsWith: .failure) {
            _ = try? SnapshotErrorTests.withSnapshot { snapshot, _ in try snapshot.save([], physicalMilliseconds: 1) }
        }
    }

    /// A full disk is transient (nothing is damaged; the save succeeds once
    /// space is freed) and keeps SQLite's `SQLITE_FULL` underneath, for a
    /// save and for an import alike.
    @Test func aFullDiskIsTransientAndKeepsSQLitesError() throws {
        try Self.withSnapshot { snapshot, _ in
            try snapshot.pool.writeWithoutTransaction { db in
                let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 1
                try db.execute(sql: "PRAGMA max_page_count = \(pages)")
            }
            let large = String(repeating: "x", count: 256 * 1024)
            let error = Self.expectCode(.diskFull) {
                _ = try snapshot.save([Self.note(.insert, 1, [FieldValue("title", .string(large))])], physicalMilliseconds: 1)
            }
            #expect(error?.code.isTransient == true)
            #expect(error?.underlying(as: DatabaseError.self)?.resultCode == .SQLITE_FULL)

            let log = try LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: ApplyBatchTests.store).encode([
                Transaction(deviceID: DeviceID(index: 2), sequence: 1, clock: HybridTimestamp(milliseconds: 5, counter: 0),
                            schemaHash: Self.schema.hash, changes: [Self.note(.insert, 3, [FieldValue("title", .string(large))])]),
            ]))
            var failure: ChronicleError?
            do {
                failure = try snapshot.apply([(log, "full")]).failure?.error
            } catch let error as ChronicleError {
                failure = error
            }
            #expect(failure?.code == .diskFull, "\(String(describing: failure))")
            #expect(failure?.underlying(as: DatabaseError.self)?.resultCode == .SQLITE_FULL)
        }
    }

    /// A damaged snapshot file is `databaseCorrupt`: not transient, told
    /// apart from a full disk by its code and by SQLite's error underneath.
    @Test func aDamagedSnapshotFileIsCorruptNotTransient() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-corrupt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("s.sqlite").path
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 131) }).write(to: URL(fileURLWithPath: path))
        let error = Self.expectCode(.databaseCorrupt) {
            _ = try Snapshot(path: path, schema: Self.schema, storeID: ApplyBatchTests.store, deviceID: DeviceID(index: 1))
        }
        #expect(error?.code.isTransient == false)
        #expect(error?.underlying(as: DatabaseError.self)?.resultCode == .SQLITE_NOTADB)
        #expect(error?.message.contains(path) == true)
    }

    /// A baseline part stored under a log's name is bad data from the
    /// container: a typed error, never a misuse or a trap.
    @Test func aBaselineWhereALogBelongsIsMalformed() throws {
        try Self.withSnapshot { snapshot, _ in
            let bytes = try LogEncoder(storeID: ApplyBatchTests.store).encode(
                Baseline(vector: [DeviceID(index: 2): 1], records: []), deviceID: DeviceID(index: 2), schemaHash: Self.schema.hash)
            let log = try LogDecoder(schema: Self.schema).open(bytes)
            let failure = try snapshot.apply([(log, "disguised")]).failure?.error
            #expect(failure?.code == .malformedBody, "\(String(describing: failure))")
        }
    }
}
