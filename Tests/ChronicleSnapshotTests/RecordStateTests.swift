import ChronicleCore
import Foundation
import GRDB
import Testing
@testable import ChronicleSnapshot

/// The per-record merge state kept in `_chronicle_records`: its encoding
/// round-trips, and damaged bytes are typed errors, never a trap.
@Suite struct RecordStateTests {
    static func randomState(_ rng: inout SeededRandom) -> RecordState {
        var s = RecordState()
        s.inserted = rng.next() % 4 != 0
        let versions = (0..<(1 + Int(rng.next() % 3))).map { _ in
            Version(clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + rng.next() % 1000, counter: UInt16(rng.next() % 4)),
                    device: DeviceID(index: 1 + rng.next() % 3))
        }
        if rng.next() % 3 == 0 { s.deleteVersion = versions[Int(rng.next() % UInt64(versions.count))] }
        for field in 0..<Int(rng.next() % 7) where rng.next() % 4 != 0 {
            let value: Value
            switch rng.next() % 5 {
            case 0: value = .string("v\(rng.next() % 100)")
            case 1: value = .int(Int64(bitPattern: rng.next()))
            case 2: value = .double(Double(bitPattern: rng.next()))
            case 3: value = .null
            default: value = .data(Data((0..<Int(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }))
            }
            s.fields[field] = (value, versions[Int(rng.next() % UInt64(versions.count))])
        }
        return s
    }

    @Test func statesRoundTripAndEqualStatesEncodeEqually() throws {
        var rng = SeededRandom(seed: 11)
        for _ in 0..<2_000 {
            let state = Self.randomState(&rng)
            let bytes = state.encoded()
            let decoded = try RecordState(encoded: bytes)
            #expect(decoded == state)
            #expect(decoded.encoded() == bytes)
        }
    }

    @Test func fieldSlotsStaySortedWhateverTheOrderOfWrites() {
        var rng = SeededRandom(seed: 13)
        for _ in 0..<500 {
            var slots = FieldSlots()
            var model: [Int: Int64] = [:]
            for _ in 0..<Int(rng.next() % 12) {
                let index = Int(rng.next() % 8)
                if rng.next() % 5 == 0 {
                    slots[index] = nil
                    model[index] = nil
                } else {
                    let value = Int64(rng.next() % 100)
                    slots[index] = (.int(value), Version(clock: HybridTimestamp(milliseconds: 1, counter: 0), device: DeviceID(index: 1)))
                    model[index] = value
                }
            }
            #expect(slots.entries.map(\.index) == model.keys.sorted())
            #expect(slots.entries.map(\.value) == model.keys.sorted().map { .int(model[$0]!) })
        }
    }

    @Test func aSharedVersionIsStoredOnce() {
        var s = RecordState()
        s.inserted = true
        let v = Version(clock: HybridTimestamp(milliseconds: 1_700_000_000_000, counter: 0), device: DeviceID(index: 1))
        for field in 0..<5 { s.fields[field] = (.int(Int64(field)), v) }
        // flags, one version (24 bytes), five fields of index, version number and a small int.
        #expect(s.encoded().count <= 1 + 1 + 24 + 1 + 5 * 4)
    }

    @Test func everyTruncationAndRandomGarbageIsATypedError() {
        var rng = SeededRandom(seed: 12)
        for _ in 0..<200 {
            let bytes = Self.randomState(&rng).encoded()
            for cut in 0..<bytes.count {
                #expect(throws: ChronicleError.self) { try RecordState(encoded: Array(bytes[..<cut])) }
            }
        }
        for _ in 0..<5_000 {
            let garbage = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Decodes or throws a ChronicleError; anything else fails the test.
            do { _ = try RecordState(encoded: garbage) } catch { #expect(error.code == .malformedBody || error.code == .shortRead) }
        }
    }

    @Test func aSnapshotOfAnotherFormatIsATypedError() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-format-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("s.sqlite").path
        let schema = ApplyBatchTests.schema
        _ = try Snapshot(path: path, schema: schema, storeID: ApplyBatchTests.store, deviceID: DeviceID(index: 1))
        try DatabaseQueue(path: path).write { try $0.execute(sql: "PRAGMA user_version = 1") }
        let error = #expect(throws: ChronicleError.self) {
            _ = try Snapshot(path: path, schema: schema, storeID: ApplyBatchTests.store, deviceID: DeviceID(index: 1))
        }
        #expect(error?.code == .unsupportedVersion)
    }
}
