import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// A record of an independent entity that one insert wrote keeps its merge
/// state in its row (`_chronicle_version`) instead of `_chronicle_records`.
/// Whatever form a state takes, the merge must come out the same, and a state
/// must live in exactly one place.
@Suite struct CompactStateTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Sample", attributes: [
            Attribute("text", .string), Attribute("n", .int64), Attribute("x", .double, optional: true),
            Attribute("flag", .bool, default: false), Attribute("at", .date, optional: true),
            Attribute("blob", .data, optional: true), Attribute("uid", .uuid, optional: true),
        ]),
        Entity("Priced", attributes: [Attribute("amount", .decimal)]),
    ])
    static let store = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))

    static func snapshot(_ dir: URL, device: UInt64 = 1) throws -> Snapshot {
        try Snapshot(path: dir.appendingPathComponent("s\(device).sqlite").path, schema: schema, storeID: store,
                     deviceID: DeviceID(index: device), durability: .normal)
    }

    static func log(device: UInt64, sequence: UInt64, _ changes: [Change]) throws -> VerifiedLog {
        let t = Transaction(deviceID: DeviceID(index: device), sequence: sequence,
                            clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + sequence * 10 + device, counter: 0),
                            schemaHash: schema.hash, changes: changes)
        return try LogDecoder(schema: schema).open(try LogEncoder(storeID: store).encode([t]))
    }

    static func temporary() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-compact-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Where the record's state is: (in `_chronicle_records`, compact in its row).
    static func places(_ snapshot: Snapshot, _ entity: String, _ id: RecordID) throws -> (full: Bool, compact: Bool) {
        try snapshot.read { db in
            let full = try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_records WHERE id = ?", arguments: [Data(id.bytes)]) ?? false
            let compact = try Bool.fetchOne(db, sql: "SELECT 1 FROM \"_chronicle_rows_\(entity)\" WHERE id = ? AND _chronicle_version IS NOT NULL",
                                            arguments: [Data(id.bytes)]) ?? false
            return (full, compact)
        }
    }

    static let awkward: [FieldValue] = [
        FieldValue("text", .string("nul \u{0} inside, é, 🙂")), FieldValue("n", .int(.min)),
        FieldValue("x", .double(Double(bitPattern: 0x7FF8_0000_0000_BEEF))), FieldValue("flag", .bool(true)),
        FieldValue("at", .date(Timestamp(microsecondsSinceEpoch: -1_234_567))), FieldValue("blob", .data(Data())),
        FieldValue("uid", .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!)),
    ]

    @Test func everyKindOfValueReadsBackExactlyFromACompactState() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Self.snapshot(dir)
        let a = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00A1)
        let b = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00A2)
        var negativeZero = Self.awkward
        negativeZero[2] = FieldValue("x", .double(-0.0))
        _ = try snapshot.apply(Self.log(device: 2, sequence: 1, [
            Change(.insert, entity: "Sample", recordID: a, values: Self.awkward),
            Change(.insert, entity: "Sample", recordID: b, values: negativeZero),
        ]), name: "one")
        for id in [a, b] {
            let place = try Self.places(snapshot, "Sample", id)
            #expect(place.compact && !place.full)
        }
        // The same record reached with its state in `_chronicle_records`
        // (an update applied first, then the insert) shows the same.
        let other = try Self.snapshot(dir, device: 3)
        let update = try Self.log(device: 4, sequence: 1, [Change(.update, entity: "Sample", recordID: a, values: [FieldValue("n", .int(7))])])
        _ = try other.apply(update, name: "update")
        _ = try other.apply(Self.log(device: 2, sequence: 1, [
            Change(.insert, entity: "Sample", recordID: a, values: Self.awkward),
            Change(.insert, entity: "Sample", recordID: b, values: negativeZero),
        ]), name: "one")
        _ = try snapshot.apply(update, name: "update")
        #expect(try snapshot.stateHash() == other.stateHash())
        let versions = try #require(try snapshot.recordVersions(entity: "Sample", id: b))
        #expect(versions.inserted && versions.deleteVersion == nil && versions.fields.count == 7)
        #expect(Set(versions.fields.values).count == 1)
        #expect(try other.recordVersions(entity: "Sample", id: b)?.fields == versions.fields)
        // The update kept a's state in its row, a version per field, the
        // same versions as the state the other snapshot holds in full.
        let place = try Self.places(snapshot, "Sample", a)
        #expect(place.compact && !place.full)
        let updated = try #require(try snapshot.recordVersions(entity: "Sample", id: a))
        #expect(Set(updated.fields.values).count == 2)
        #expect(try other.recordVersions(entity: "Sample", id: a) == updated)
    }

    @Test func aChangeAfterTheInsertMergesLikeAFullOne() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Self.snapshot(dir)
        let id = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00B1)
        let insert = try Self.log(device: 2, sequence: 1, [Change(.insert, entity: "Sample", recordID: id, values: Self.awkward)])
        _ = try snapshot.apply(insert, name: "insert")
        // An older concurrent update loses on every field it writes.
        let older = Transaction(deviceID: DeviceID(index: 5), sequence: 1, clock: HybridTimestamp(milliseconds: 1_600_000_000_000, counter: 0),
                                schemaHash: Self.schema.hash,
                                changes: [Change(.update, entity: "Sample", recordID: id, values: [FieldValue("n", .int(1))])])
        _ = try snapshot.apply(LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: Self.store).encode([older])), name: "older")
        #expect(try snapshot.read { db in try Int64.fetchOne(db, sql: "SELECT n FROM Sample") } == .min)
        var place = try Self.places(snapshot, "Sample", id)
        #expect(place.compact && !place.full)
        // A newer write of the same value changes the state but not the row:
        // the state stays in it, with the field's new version.
        let same = try Self.log(device: 2, sequence: 2, [Change(.update, entity: "Sample", recordID: id, values: [FieldValue("n", .int(.min))])])
        _ = try snapshot.apply(same, name: "same")
        place = try Self.places(snapshot, "Sample", id)
        #expect(place.compact && !place.full)
        #expect(try snapshot.recordVersions(entity: "Sample", id: id)?.fields["n"] == Version(clock: same.header.minClock, device: DeviceID(index: 2)))
        // A newer delete hides it, and its state survives the row.
        _ = try snapshot.apply(Self.log(device: 2, sequence: 3, [Change(.delete, entity: "Sample", recordID: id)]), name: "delete")
        #expect(try snapshot.recordCounts()["Sample"] == 0)
        place = try Self.places(snapshot, "Sample", id)
        #expect(place.full && !place.compact)
        let versions = try #require(try snapshot.recordVersions(entity: "Sample", id: id))
        #expect(versions.inserted && versions.deleteVersion != nil && versions.fields.count == 7)
        // Re-sending the insert changes nothing.
        #expect(try snapshot.apply(insert, name: "insert") == .alreadyApplied)
    }

    /// An insert skips looking for an existing state when its ID is above
    /// every ID with one; a state written earlier, by another log or earlier
    /// in the same one, must still be found.
    @Test func anInsertFindsAStateWrittenBeforeItWhereverItCameFrom() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Self.snapshot(dir)
        let small = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00C1)
        let large = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00C9)
        let smallest = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00C0)
        // An earlier log leaves a tombstone (a delete seen before its insert).
        _ = try snapshot.apply(Self.log(device: 2, sequence: 1, [Change(.delete, entity: "Sample", recordID: smallest)]), name: "tombstone")
        // One log: a new record, then a delete of a larger ID, then the
        // inserts of both deleted records, in a later transaction.
        let clock = { (ms: UInt64) in HybridTimestamp(milliseconds: 1_600_000_000_000 + ms, counter: 0) }
        let device = DeviceID(index: 3)
        let first = Transaction(deviceID: device, sequence: 1, clock: clock(1), schemaHash: Self.schema.hash, changes: [
            Change(.insert, entity: "Sample", recordID: small, values: Self.awkward),
            Change(.delete, entity: "Sample", recordID: large),
        ])
        let second = Transaction(deviceID: device, sequence: 2, clock: clock(2), schemaHash: Self.schema.hash, changes: [
            Change(.insert, entity: "Sample", recordID: large, values: Self.awkward),
            Change(.insert, entity: "Sample", recordID: smallest, values: Self.awkward),
        ])
        _ = try snapshot.apply(LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: Self.store).encode([first, second])), name: "both")
        // The tombstone's delete (newer) hides `smallest`; `large` was
        // deleted before its insert's clock, so it shows. Each state in one
        // place.
        #expect(try snapshot.recordCounts()["Sample"] == 2)
        #expect(try Self.places(snapshot, "Sample", small) == (full: false, compact: true))
        #expect(try Self.places(snapshot, "Sample", large) == (full: true, compact: false))
        #expect(try Self.places(snapshot, "Sample", smallest) == (full: true, compact: false))
    }

    @Test func valuesStoredAsTextAndPartialInsertsKeepTheFullState() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Self.snapshot(dir)
        let priced = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00C1)
        let partial = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00C2)
        _ = try snapshot.apply(Self.log(device: 2, sequence: 1, [
            Change(.insert, entity: "Priced", recordID: priced, values: [FieldValue("amount", .decimal(ChronicleDecimal(string: "1.50")!))]),
            // Fields left out of a logged insert show their defaults, but
            // were never written: a later older write must still win them.
            Change(.insert, entity: "Sample", recordID: partial, values: [FieldValue("text", .string("t")), FieldValue("n", .int(1))]),
        ]), name: "one")
        for (entity, id) in [("Priced", priced), ("Sample", partial)] {
            let place = try Self.places(snapshot, entity, id)
            #expect(place.full && !place.compact)
        }
    }

    @Test func aDamagedCompactVersionIsATypedError() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let snapshot = try Self.snapshot(dir)
        let id = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00D1)
        _ = try snapshot.apply(Self.log(device: 2, sequence: 1, [Change(.insert, entity: "Sample", recordID: id, values: Self.awkward)]), name: "one")
        try snapshot.close()
        let queue = try DatabaseQueue(path: dir.appendingPathComponent("s1.sqlite").path)
        try queue.write { try $0.execute(sql: "UPDATE _chronicle_rows_Sample SET _chronicle_version = x'0102'") }
        try queue.close()
        let reopened = try Self.snapshot(dir)
        #expect(throws: ChronicleError.self) { try reopened.recordVersions(entity: "Sample", id: id) }
        let update = try Self.log(device: 2, sequence: 2, [Change(.update, entity: "Sample", recordID: id, values: [FieldValue("n", .int(2))])])
        let result = try reopened.apply([(update, "two")])
        #expect(result.failure?.error.code == .databaseCorrupt)
        #expect(try reopened.read { db in try Int64.fetchOne(db, sql: "SELECT n FROM Sample") } == .min)
    }

    @Test func aFormatTwoSnapshotIsMigratedInPlace() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let id = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00E1)
        let path = dir.appendingPathComponent("s1.sqlite").path
        do {
            let snapshot = try Self.snapshot(dir)
            // Format 2 kept every state in `_chronicle_records`: a partial
            // insert does here too.
            _ = try snapshot.apply(Self.log(device: 2, sequence: 1, [
                Change(.insert, entity: "Sample", recordID: id, values: [FieldValue("text", .string("old")), FieldValue("n", .int(1))]),
            ]), name: "one")
            try snapshot.close()
        }
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "ALTER TABLE _chronicle_rows_Sample DROP COLUMN _chronicle_version; ALTER TABLE _chronicle_rows_Priced DROP COLUMN _chronicle_version; PRAGMA user_version = 2")
        }
        try queue.close()
        let snapshot = try Self.snapshot(dir)
        #expect(try snapshot.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") } == Snapshot.format)
        #expect(try snapshot.read { db in try db.columns(in: "_chronicle_rows_Sample").map(\.name).contains("_chronicle_version") })
        _ = try snapshot.apply(Self.log(device: 2, sequence: 2, [
            Change(.update, entity: "Sample", recordID: id, values: [FieldValue("n", .int(2))]),
            Change(.insert, entity: "Sample", recordID: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00E2), values: Self.awkward),
        ]), name: "two")
        #expect(try snapshot.recordCounts()["Sample"] == 2)
        #expect(try snapshot.read { db in try Int64.fetchOne(db, sql: "SELECT n FROM Sample WHERE text = 'old'") } == 2)
    }
    /// A compact version names its device by the snapshot's number for it
    /// (9 or 10 bytes); a snapshot of format 7 holds 24-byte versions (the
    /// device's own 16 bytes), which stay readable next to the new ones once
    /// it is opened, and merge alike.
    @Test func compactVersionsNumberTheirDevicesAndOlderOnesStayReadable() throws {
        let dir = try Self.temporary()
        defer { try? FileManager.default.removeItem(at: dir) }
        let old = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00F1)
        let new = RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00F2)
        let path = dir.appendingPathComponent("s1.sqlite").path
        let first = try Self.log(device: 2, sequence: 1, [Change(.insert, entity: "Sample", recordID: old, values: Self.awkward)])
        do {
            let snapshot = try Self.snapshot(dir)
            _ = try snapshot.apply(first, name: "one")
            #expect(try snapshot.read { db in try Int.fetchOne(db, sql: "SELECT length(_chronicle_version) FROM _chronicle_rows_Sample") } == 9)
            #expect(try snapshot.read { db in try Data.fetchOne(db, sql: "SELECT device FROM _chronicle_devices WHERE number = 1") } == Data(DeviceID(index: 2).rawValue.bytes))
            try snapshot.close()
        }
        // The version as format 7 wrote it: the clock, then the device's 16 bytes.
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            var legacy = withUnsafeBytes(of: first.header.minClock.rawValue.bigEndian) { Data($0) }
            legacy.append(Data(DeviceID(index: 2).rawValue.bytes))
            try db.execute(sql: "UPDATE _chronicle_rows_Sample SET _chronicle_version = ?", arguments: [legacy])
            try db.execute(sql: "DROP TABLE _chronicle_devices; PRAGMA user_version = 7")
        }
        try queue.close()
        let snapshot = try Self.snapshot(dir)
        #expect(try snapshot.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") } == Snapshot.format)
        let versions = try #require(try snapshot.recordVersions(entity: "Sample", id: old))
        #expect(versions.fields["text"] == Version(clock: first.header.minClock, device: DeviceID(index: 2)))
        // A record of another device next to it, then a change to the old one.
        _ = try snapshot.apply(Self.log(device: 3, sequence: 1, [Change(.insert, entity: "Sample", recordID: new, values: Self.awkward)]), name: "two")
        #expect(try Self.places(snapshot, "Sample", new) == (false, true))
        _ = try snapshot.apply(Self.log(device: 2, sequence: 2, [Change(.update, entity: "Sample", recordID: old, values: [FieldValue("n", .int(2))])]), name: "three")
        // The update keeps the state in the row, its versions now written
        // with device numbers.
        #expect(try Self.places(snapshot, "Sample", old) == (false, true))
        #expect(try snapshot.read { db in try Int.fetchOne(db, sql: "SELECT length(_chronicle_version) FROM _chronicle_rows_Sample WHERE n = 2") } != 24)
        // The same logs into a new snapshot give the same states.
        let fresh = try Self.snapshot(dir, device: 5)
        _ = try fresh.apply(first, name: "one")
        _ = try fresh.apply(Self.log(device: 3, sequence: 1, [Change(.insert, entity: "Sample", recordID: new, values: Self.awkward)]), name: "two")
        _ = try fresh.apply(Self.log(device: 2, sequence: 2, [Change(.update, entity: "Sample", recordID: old, values: [FieldValue("n", .int(2))])]), name: "three")
        #expect(try fresh.stateHash() == snapshot.stateHash())
        #expect(try fresh.recordVersions(entity: "Sample", id: old) == snapshot.recordVersions(entity: "Sample", id: old))
        // A number no device has is a typed error, not a record of nobody.
        try snapshot.close()
        let damaged = try DatabaseQueue(path: path)
        try damaged.write { db in try db.execute(sql: "DELETE FROM _chronicle_devices") }
        try damaged.close()
        let reopened = try Self.snapshot(dir)
        #expect { try reopened.recordVersions(entity: "Sample", id: new) } throws: { ($0 as? ChronicleError)?.code == .databaseCorrupt }
    }
}
