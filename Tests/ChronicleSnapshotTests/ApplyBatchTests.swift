import ChronicleCore
@testable import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// Batches of logs share one SQLite transaction, but each log stays all or
/// nothing, and a batch stops at the first log that fails or leaves a gap.
@Suite struct ApplyBatchTests {
    static let schema = try! Schema(version: 1, entities: [Entity("Item", attributes: [Attribute("name", .string)])])
    static let store = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))
    static let otherStore = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0002))

    static func log(store: StoreID = store, device: UInt64, sequence: UInt64, names: [String]) throws -> VerifiedLog {
        try LogDecoder(schema: schema).open(try bytes(store: store, device: device, sequence: sequence, names: names))
    }

    static func bytes(store: StoreID = store, device: UInt64, sequence: UInt64, names: [String]) throws -> [UInt8] {
        var ids = RecordIDGenerator(seed: device &* 1000 &+ sequence)
        let t = Transaction(deviceID: DeviceID(index: device), sequence: sequence,
                            clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + sequence, counter: 0), schemaHash: schema.hash,
                            changes: names.map { Change(.insert, entity: "Item", recordID: ids.next(milliseconds: 1_700_000_000_000), values: [FieldValue("name", .string($0))]) })
        return try LogEncoder(storeID: store).encode([t])
    }

    static func snapshot() throws -> (Snapshot, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-batch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let snapshot = try Snapshot(path: dir.appendingPathComponent("s.sqlite").path, schema: schema, storeID: store,
                                    deviceID: DeviceID(index: 1), durability: .normal)
        return (snapshot, dir)
    }

    @Test func aFailingLogIsRolledBackAloneAndStopsTheBatch() throws {
        let (snapshot, dir) = try Self.snapshot()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try Self.log(device: 2, sequence: 1, names: ["a", "b"])
        let foreign = try Self.log(store: Self.otherStore, device: 2, sequence: 2, names: ["x"])
        let second = try Self.log(device: 2, sequence: 2, names: ["c"])
        let result = try snapshot.apply([(first, "one"), (foreign, "foreign"), (second, "two")])
        #expect(result.outcomes.count == 1)
        #expect(result.failure?.index == 1)
        #expect(result.failure?.error.code == .storeMismatch)
        #expect(try snapshot.recordCounts()["Item"] == 2)
        #expect(try snapshot.vector()[DeviceID(index: 2)] == 1)
        // The log after the failure was not applied, and applies now.
        let again = try snapshot.apply([(first, "one"), (second, "two")])
        #expect(again.failure == nil)
        #expect(again.outcomes.count == 2)
        #expect(again.outcomes[0] == .alreadyApplied)
        if case .applied(let transactions, let events) = again.outcomes[1] {
            #expect(transactions == 1 && events.count == 1)
        } else {
            Issue.record("the second log should apply: \(again.outcomes[1])")
        }
        #expect(try snapshot.recordCounts()["Item"] == 3)
    }

    /// A log that fails after writing many pages is rolled back alone,
    /// whether its savepoint kept the pages it changed in memory (a log of
    /// up to 256 KiB) or in a temporary file (a larger one): the logs
    /// before it in the batch stay, the store's pages are whole, and the
    /// log applies once it is right.
    @Test(arguments: [300, 12_000])
    func aLogThatFailsAfterWritingManyPagesIsRolledBackAlone(inserts: Int) throws {
        let (snapshot, dir) = try Self.snapshot()
        defer { try? FileManager.default.removeItem(at: dir) }
        let padding = String(repeating: "x", count: 40)
        // Pages for the failing log to change.
        _ = try snapshot.apply([(try Self.log(device: 3, sequence: 1, names: (0..<2_000).map { "earlier \($0) \(padding)" }), "earlier")])
        let good = try Self.log(device: 2, sequence: 1, names: ["kept"])
        var ids = RecordIDGenerator(seed: 99)
        var changes = (0..<inserts).map { i in
            Change(.insert, entity: "Item", recordID: ids.next(milliseconds: 1_700_000_000_000), values: [FieldValue("name", .string("new \(i) \(padding)"))])
        }
        let valid = changes
        // Last, a record the snapshot refuses (a trigger stands in for any
        // failure while a log applies): the log fails there.
        changes.append(Change(.insert, entity: "Item", recordID: ids.next(milliseconds: 1_700_000_000_000), values: [FieldValue("name", .string("boom"))]))
        try snapshot.pool.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON \(SnapshotTables.rows("Item").quotedDatabaseIdentifier) WHEN NEW.name = 'boom' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        func log(_ changes: [Change]) throws -> VerifiedLog {
            let t = Transaction(deviceID: DeviceID(index: 2), sequence: 2, clock: HybridTimestamp(milliseconds: 1_700_000_000_002, counter: 0),
                                schemaHash: Self.schema.hash, changes: changes)
            return try LogDecoder(schema: Self.schema).open(try LogEncoder(storeID: Self.store).encode([t]))
        }
        let failing = try log(changes)
        #expect((failing.body.count > Snapshot.inMemorySavepointBodyBytes) == (inserts > 1_000), "\(failing.body.count) bytes")
        let result = try snapshot.apply([(good, "good"), (failing, "failing")])
        #expect(result.outcomes.count == 1 && result.failure?.index == 1, "\(result)")
        #expect(try snapshot.recordCounts()["Item"] == 2_001)
        #expect(try snapshot.vector()[DeviceID(index: 2)] == 1)
        #expect(try snapshot.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") } == ["ok"])
        // The writer's other temporary data (sorts, say) is back on disk.
        #expect(try snapshot.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA temp_store") } == 0)
        let fixed = try snapshot.apply([(try log(valid), "fixed")])
        #expect(fixed.failure == nil && fixed.outcomes.count == 1)
        #expect(try snapshot.recordCounts()["Item"] == 2_001 + inserts)
    }

    @Test func aGapStopsTheBatch() throws {
        let (snapshot, dir) = try Self.snapshot()
        defer { try? FileManager.default.removeItem(at: dir) }
        let third = try Self.log(device: 2, sequence: 3, names: ["c"])
        let other = try Self.log(device: 3, sequence: 1, names: ["d"])
        let result = try snapshot.apply([(third, "three"), (other, "other")])
        #expect(result.outcomes == [.gap(expected: 1, found: 3)])
        #expect(result.failure == nil)
        #expect(try snapshot.recordCounts()["Item"] == nil || snapshot.recordCounts()["Item"] == 0)
        #expect(try snapshot.vector().isEmpty)
    }
}

/// The snapshot's hybrid clock never goes back: not when the wall clock
/// does, not across a reopen, not after an import of a later clock.
@Suite struct SnapshotClockTests {
    @Test func savesOrderAfterEverythingSeenWhateverTheWallClockSays() throws {
        let (first, dir) = try ApplyBatchTests.snapshot()
        defer { try? FileManager.default.removeItem(at: dir) }
        var ids = RecordIDGenerator(seed: 3)
        func insert() -> [Change] {
            [Change(.insert, entity: "Item", recordID: ids.next(milliseconds: 1_700_000_000_000), values: [FieldValue("name", .string("x"))])]
        }
        let a = try first.save(insert(), physicalMilliseconds: 1_700_000_001_000).clock
        // The wall clock went back.
        let b = try first.save(insert(), physicalMilliseconds: 1_700_000_000_500).clock
        #expect(b > a)
        #expect(try first.latestClock() == b)
        try first.close()
        let reopened = try Snapshot(path: dir.appendingPathComponent("s.sqlite").path, schema: ApplyBatchTests.schema,
                                    storeID: ApplyBatchTests.store, deviceID: DeviceID(index: 1), durability: .normal)
        let c = try reopened.save(insert(), physicalMilliseconds: 1_700_000_000_400).clock
        #expect(c > b)
        // A log of another device from further ahead: the next save orders after it.
        let ahead = try LogDecoder(schema: ApplyBatchTests.schema).open(try LogEncoder(storeID: ApplyBatchTests.store).encode([
            Transaction(deviceID: DeviceID(index: 2), sequence: 1, clock: HybridTimestamp(milliseconds: 1_700_000_009_000, counter: 0),
                        schemaHash: ApplyBatchTests.schema.hash, changes: insert()),
        ]))
        _ = try reopened.apply(ahead, name: "ahead")
        #expect(try reopened.latestClock() >= ahead.header.maxClock)
        let d = try reopened.save(insert(), physicalMilliseconds: 1_700_000_000_300).clock
        #expect(d > ahead.header.maxClock)
        #expect(try reopened.latestClock() == d)
        // Moved ahead by hand (records copied from another store).
        try reopened.observe(HybridTimestamp(milliseconds: 1_700_000_020_000, counter: 0))
        let e = try reopened.save(insert(), physicalMilliseconds: 1_700_000_000_200).clock
        #expect(e > HybridTimestamp(milliseconds: 1_700_000_020_000, counter: 0))
        try reopened.close()
    }
}
