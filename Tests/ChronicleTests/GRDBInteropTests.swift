import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// The snapshot read through GRDB's own decoding, as an app's GRDB records
/// read it.
@Suite struct GRDBInteropTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)]),
        Entity("Thing", attributes: [
            Attribute("name", .string),
            Attribute("count", .int64),
            Attribute("ratio", .double),
            Attribute("done", .bool),
            Attribute("created", .date),
            Attribute("bytes", .data),
            Attribute("price", .decimal),
            Attribute("token", .uuid),
            Attribute("tags", .transformable),
            Attribute("due", .date, optional: true),
        ], relationships: [.toOne("folder", to: "Folder")]),
    ])

    /// A plain GRDB record of every attribute type, with GRDB's default decoding.
    struct ThingRow: Decodable, FetchableRecord, TableRecord, Identifiable, Equatable {
        static let databaseTableName = "Thing"
        var id: RecordID
        var name: String
        var count: Int64
        var ratio: Double
        var done: Bool
        var created: Date
        var bytes: Data
        var price: Decimal
        var token: UUID
        var tags: TransformableValue
        var due: Date?
        var folder: RecordID?
    }

    struct Thing: ChronicleRecord, Equatable {
        static let entityName = "Thing"
        var id: RecordID
        var name: String
        var count: Int64
        var ratio: Double
        var done: Bool
        var created: Date
        var bytes: Data
        var price: Decimal
        var token: UUID
        var tags: [String]
        var due: Date?
        var folder: RecordID?
    }

    static let dates: [Date] = [
        Date(timeIntervalSince1970: 1_790_000_000.123456),
        Date(timeIntervalSince1970: -2_000_000_000.654321),  // 1906
        Date(timeIntervalSince1970: 0.000001),
        Date.distantFuture,  // whole seconds, far from 1970
        Date.distantPast,
    ]

    static func thing(_ n: UInt64, created: Date, folder: RecordID?) -> Thing {
        Thing(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0000 | n), name: "thing \(n)", count: -Int64(n) * 1_000_000_007,
              ratio: 1.0 / Double(n + 3), done: n % 2 == 0, created: created, bytes: Data([0, 1, 2, UInt8(n)]),
              price: Decimal(string: "1234567890123456789.0123456789")! + Decimal(n), token: UUID(),
              tags: ["t\(n)", "ü"], due: n % 2 == 0 ? nil : created.addingTimeInterval(0.5), folder: folder)
    }

    @Test func everyAttributeTypeDecodesExactlyThroughAGRDBRecord() async throws {
        let store = try await TestDevices(1, schema: Self.schema).stores[0]
        let folder = try await store.write { tx in tx.insert("Folder", ["name": "Inbox"]) }
        let things = Self.dates.enumerated().map { Self.thing(UInt64($0.offset), created: $0.element, folder: $0.offset == 0 ? folder : nil) }
        try await store.write { tx in for t in things { try tx.insert(t) } }
        let rows = try await store.read { db in try ThingRow.fetchAll(db, sql: "SELECT * FROM Thing ORDER BY id") }
        #expect(rows.count == things.count)
        for (row, thing) in zip(rows, things) {
            #expect(row.id == thing.id)
            #expect(row.name == thing.name)
            #expect(row.count == thing.count)
            #expect(row.ratio.bitPattern == thing.ratio.bitPattern)
            #expect(row.done == thing.done)
            // Exactly the date Chronicle keeps: the microsecond nearest the one saved.
            #expect(row.created == Timestamp(thing.created).date)
            #expect(abs(row.created.timeIntervalSince(thing.created)) < 0.000_001)
            #expect(row.bytes == thing.bytes)
            #expect(row.price == thing.price)
            #expect(row.token == thing.token)
            #expect(try row.tags.decoded(as: [String].self) == thing.tags)
            #expect(row.due == thing.due.map { Timestamp($0).date })
            #expect(row.folder == thing.folder)
        }
        // The same through Chronicle's own records.
        #expect(try await store.fetchAll(Thing.self).map(\.created) == things.map { Timestamp($0.created).date })
        // Single columns, as GRDB reads them.
        let created = try await store.read { db in try Date.fetchAll(db, sql: "SELECT created FROM Thing ORDER BY id") }
        #expect(created == things.map { Timestamp($0.created).date })
        let timestamps = try await store.read { db in try Timestamp.fetchAll(db, sql: "SELECT created FROM Thing ORDER BY id") }
        #expect(timestamps == things.map { Timestamp($0.created) })
        let decimal = try await store.read { db in try ChronicleDecimal.fetchOne(db, sql: "SELECT price FROM Thing ORDER BY id") }
        #expect(decimal.map { $0.isIdentical(to: ChronicleDecimal(string: "1234567890123456789.0123456789")!) } == true)
        // SQLite's date functions read the column too.
        let day = try await store.read { db in try String.fetchOne(db, sql: "SELECT date(created, 'unixepoch') FROM Thing ORDER BY id") }
        #expect(day == "2026-09-21")
    }

    @Test func aDateNoDoubleHoldsExactlyIsAnErrorInGRDBNotAWrongDate() async throws {
        let store = try await TestDevices(1, schema: Self.schema).stores[0]
        // Year 2400 with microseconds: more digits than a double has.
        let far = Timestamp(microsecondsSinceEpoch: 13_569_465_600_123_457)
        var thing = Self.thing(1, created: Date(), folder: nil)
        thing.created = far.date
        let id = try await store.write { tx in
            tx.insert("Thing", ["name": "far", "count": 1, "ratio": 0.5, "done": true, "created": far, "bytes": Data(),
                                "price": Decimal(1), "token": UUID(), "tags": TransformableValue(typeName: "x", data: Data())])
        }
        #expect(try await store.values(of: "Thing", id: id)?["created"] == .date(far))
        #expect(try await store.read { db in try Timestamp.fetchOne(db, sql: "SELECT created FROM Thing") } == far)
        await #expect(throws: (any Error).self) { try await store.read { db in try ThingRow.fetchAll(db) } }
    }

    @Test(arguments: [-0.0, Double.nan, Double(bitPattern: 0x7FF8_0000_0000_0001), -Double.infinity])
    func doublesSQLiteCannotKeepReadBackBitForBitThroughRecords(ratio: Double) async throws {
        let store = try await TestDevices(1, schema: Self.schema).stores[0]
        var thing = Self.thing(3, created: Self.dates[0], folder: nil)
        thing.ratio = ratio
        try await store.write { [thing] tx in try tx.insert(thing) }
        #expect(try await store.fetchAll(Thing.self).map(\.ratio.bitPattern) == [ratio.bitPattern])
        #expect(try await store.fetch(Thing.self, id: thing.id)?.ratio.bitPattern == ratio.bitPattern)
    }

    @Test func selectStarAndTypedFetchesShowOnlyTheFields() async throws {
        let store = try await TestDevices(1, schema: Self.schema).stores[0]
        let thing = Self.thing(7, created: Self.dates[0], folder: nil)
        try await store.write { [thing] tx in try tx.insert(thing) }
        let columns = try await store.read { db in try Row.fetchOne(db, sql: "SELECT * FROM Thing").map { Array($0.columnNames) } }
        #expect(columns == ["id"] + Self.schema.entity(named: "Thing")!.fields.map(\.name))
        let found = try await store.read { db in try ThingRow.find(db, id: thing.id) }
        #expect(found.id == thing.id)
        #expect(try await store.read { db in try ThingRow.fetchCount(db) } == 1)
        #expect(try await store.read { db in try ThingRow.filter(Column("count") < 0).fetchAll(db) }.map(\.id) == [thing.id])
        // What GRDB's observation of a request on the view tracks: the rows' table, which Chronicle writes.
        let region = try await store.read { db in try ThingRow.all().databaseRegion(db) }
        #expect(region.isModified(byEventsOfKind: .insert(tableName: "_chronicle_rows_Thing")))
        #expect(!region.isModified(byEventsOfKind: .insert(tableName: "_chronicle_outbox")))
    }

    // MARK: Snapshots of format 4

    /// A snapshot written by Chronicle's format 4 (dates as integer
    /// microseconds, `_chronicle_version` in each entity table): two devices
    /// of `Self.legacySchema`; device 1's file, closed. `Event` has a unique
    /// key with a date, and device 2 inserted a duplicate of one event;
    /// `Stamp` records are compact.
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    static let legacySchema = try! Schema(version: 1, entities: [
        Entity("Event", attributes: [Attribute("title", .string), Attribute("at", .date), Attribute("note", .string, optional: true)],
               unique: [["title", "at"]]),
        Entity("Stamp", attributes: [Attribute("label", .string), Attribute("at", .date)]),
    ])

    @Test func openingAFormatFourSnapshotMovesTheRowsAndConvertsTheDates() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-format4-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("snapshot.sqlite").path
        try FileManager.default.copyItem(atPath: Self.fixtures.appendingPathComponent("snapshot-format4.sqlite").path, toPath: path)
        let oldHash = try String(contentsOf: Self.fixtures.appendingPathComponent("snapshot-format4.hash"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let identity = try Snapshot.identity(at: path)
        #expect(identity.schema == Self.legacySchema)
        let snapshot = try Snapshot(path: path, schema: Self.legacySchema, storeID: identity.store, deviceID: identity.device, durability: .normal)
        defer { try? snapshot.close() }
        #expect(try snapshot.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") } == Snapshot.format)
        // What the app sees has not changed: same hash, dates as they were.
        #expect(try snapshot.stateHash() == oldHash)
        #expect(try snapshot.recordCounts() == ["Event": 2, "Stamp": 3])
        let stamps = try snapshot.read { db in try Row.fetchAll(db, sql: "SELECT * FROM Stamp ORDER BY label") }
        #expect(stamps.map { Array($0.columnNames) } == Array(repeating: ["id", "label", "at"], count: 3))
        #expect(stamps.map { $0["at"] as Timestamp } == Self.legacyStampTimes)
        #expect(try snapshot.read { db in try Date.fetchAll(db, sql: "SELECT at FROM Event ORDER BY title") }
            == [Timestamp(microsecondsSinceEpoch: 1_790_000_000_123_456).date, Timestamp(microsecondsSinceEpoch: 1_790_000_100_000_001).date])
        // Compact states still read; unique keys with a date still hold.
        #expect(try snapshot.recordVersions(entity: "Stamp", id: try snapshot.read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Stamp") }!) != nil)
        let duplicate = Change(.insert, entity: "Event", recordID: RecordID(high: 0x018C_0000_0000_7000, low: 0x8000_0000_0000_0001),
                               values: [FieldValue("title", "launch"), FieldValue("at", .date(Timestamp(microsecondsSinceEpoch: 1_790_000_000_123_456)))])
        #expect(throws: ChronicleError.self) { try snapshot.save([duplicate], physicalMilliseconds: 1_800_000_000_000) }
        let later = Change(.update, entity: "Stamp", recordID: try snapshot.read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Stamp WHERE label = 'now'") }!,
                           values: [FieldValue("at", .date(Timestamp(microsecondsSinceEpoch: 1_790_000_000_000_002)))])
        _ = try snapshot.save([later], physicalMilliseconds: 1_800_000_000_000)
        #expect(try snapshot.read { db in try Timestamp.fetchOne(db, sql: "SELECT at FROM Stamp WHERE label = 'now'") }
            == Timestamp(microsecondsSinceEpoch: 1_790_000_000_000_002))
    }

    /// The Stamp times of the fixture, by label: `far` (year 2400 with
    /// microseconds: stored as 8 bytes from format 5 on), `now`, `old`.
    static let legacyStampTimes: [Timestamp] = [
        Timestamp(microsecondsSinceEpoch: 13_569_465_600_123_457),
        Timestamp(microsecondsSinceEpoch: 1_790_000_000_654_321),
        Timestamp(microsecondsSinceEpoch: -2_000_000_000_000_001),
    ]
}
