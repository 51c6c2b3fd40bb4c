import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import Logging
import Testing

/// The replayer applies logs in batches; a damaged log in the middle of a
/// device's sequence keeps the logs before it and stops the ones after it,
/// until it is repaired.
@Suite struct ReplayerBatchTests {
    @Test func aDamagedLogKeepsTheLogsBeforeItAndStopsTheOnesAfter() async throws {
        let container = InMemoryContainer()
        let store = ApplyBatchTests.store
        let writer = DeviceID(index: 2)
        let encoder = LogEncoder(storeID: store)
        func transaction(_ sequence: UInt64) -> Transaction {
            var ids = RecordIDGenerator(seed: sequence)
            return Transaction(deviceID: writer, sequence: sequence, clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
                               schemaHash: ApplyBatchTests.schema.hash,
                               changes: [Change(.insert, entity: "Item", recordID: ids.next(milliseconds: 1_700_000_000_000 + sequence),
                                                values: [FieldValue("name", .string("item \(sequence)"))])])
        }
        _ = try await container.createMarker(ContainerLayout.deviceRegistration(store: store, device: writer), [])
        var good: [UInt64: [UInt8]] = [:]
        for sequence in UInt64(1)...5 {
            good[sequence] = try encoder.encode([transaction(sequence)])
            var bytes = good[sequence]!
            if sequence == 3 { bytes[bytes.count - 1] ^= 0x01 }  // a flipped bit in the body
            try await container.put(ContainerLayout.log(store: store, device: writer, first: sequence, last: sequence), bytes)
        }
        let (snapshot, dir) = try ApplyBatchTests.snapshot()
        defer { try? FileManager.default.removeItem(at: dir) }
        let replayer = Replayer(snapshot: snapshot, container: container, logger: Logger(label: "test"))

        let first = try await replayer.importOnce()
        #expect(first.appliedLogs == 2)
        #expect(first.failures.map(\.error.code) == [.bodyChecksumMismatch])
        #expect(try snapshot.vector()[writer] == 2)
        #expect(try snapshot.recordCounts()["Item"] == 2)
        #expect(try snapshot.failures().map(\.name) == [ContainerLayout.log(store: store, device: writer, first: 3, last: 3).rawValue])

        // The owner repairs the log: the rest of the sequence follows.
        let name = ContainerLayout.log(store: store, device: writer, first: 3, last: 3)
        try await container.delete(name)
        try await container.put(name, good[3]!)
        let second = try await replayer.importOnce()
        #expect(second.appliedLogs == 3)
        #expect(second.failures.isEmpty)
        #expect(try snapshot.vector()[writer] == 5)
        #expect(try snapshot.recordCounts()["Item"] == 5)
        #expect(try snapshot.failures().isEmpty)
    }

    @Test func smallPagesAndBatchesApplyEverythingInOrder() async throws {
        let container = InMemoryContainer()
        let store = ApplyBatchTests.store
        _ = try await container.createMarker(ContainerLayout.deviceRegistration(store: store, device: DeviceID(index: 2)), [])
        _ = try await container.createMarker(ContainerLayout.deviceRegistration(store: store, device: DeviceID(index: 3)), [])
        for device in UInt64(2)...3 {
            for sequence in UInt64(1)...7 {
                let bytes = try ApplyBatchTests.bytes(device: device, sequence: sequence, names: ["d\(device)s\(sequence)a", "d\(device)s\(sequence)b"])
                try await container.put(ContainerLayout.log(store: store, device: DeviceID(index: device), first: sequence, last: sequence), bytes)
            }
        }
        let (snapshot, dir) = try ApplyBatchTests.snapshot()
        defer { try? FileManager.default.removeItem(at: dir) }
        var replayer = Replayer(snapshot: snapshot, container: container, logger: Logger(label: "test"))
        replayer.pageSize = 3
        replayer.batchLimits = (logs: 2, bytes: 1 << 20)
        let report = try await replayer.importOnce()
        #expect(report.appliedLogs == 14)
        #expect(report.appliedTransactions == 14)
        #expect(report.events.count == 28)
        #expect(report.failures.isEmpty && report.gaps.isEmpty)
        #expect(try snapshot.vector() == [DeviceID(index: 2): 7, DeviceID(index: 3): 7])
        #expect(try snapshot.recordCounts()["Item"] == 28)
    }
}


/// What a device takes for its own log damaged in transit or at rest.
@Suite struct DamagedCopyTests {
    /// Log `sequence` of device `device`, its one change named `name`, made at `milliseconds`.
    static func log(device: UInt64, sequence: UInt64, at milliseconds: UInt64, name: String) throws -> [UInt8] {
        var ids = RecordIDGenerator(seed: device &* 1000 &+ sequence)
        let t = Transaction(deviceID: DeviceID(index: device), sequence: sequence,
                            clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + milliseconds, counter: 0), schemaHash: ApplyBatchTests.schema.hash,
                            changes: [Change(.insert, entity: "Item", recordID: ids.next(milliseconds: 1_700_000_000_000), values: [FieldValue("name", .string(name))])])
        return try LogEncoder(storeID: ApplyBatchTests.store).encode([t])
    }

    /// The devices' logs are applied in the order of their clocks, each
    /// device's in sequence order, whatever the page and batch sizes; a log
    /// that fails stops its own device only: the other devices' later logs
    /// (in the same batch) are applied.
    @Test(arguments: [(pageSize: 512, batch: 256), (pageSize: 1, batch: 1), (pageSize: 2, batch: 3)])
    func logsApplyInClockOrderAndAFailureStopsOnlyItsDevice(pageSize: Int, batch: Int) async throws {
        let container = InMemoryContainer()
        let store = ApplyBatchTests.store
        // Device 2 at 10, 30, 50, 70 ms; device 3 at 20, 40, 60, 80 ms;
        // device 4 late, at 5 ms and 90 ms.
        let plan: [(device: UInt64, clocks: [UInt64])] = [(2, [10, 30, 50, 70]), (3, [20, 40, 60, 80]), (4, [5, 90])]
        for (device, clocks) in plan {
            _ = try await container.createMarker(ContainerLayout.deviceRegistration(store: store, device: DeviceID(index: device)), [])
            for (i, clock) in clocks.enumerated() {
                let sequence = UInt64(i + 1)
                var bytes = try Self.log(device: device, sequence: sequence, at: clock, name: "\(clock)")
                if device == 3 && sequence == 3 { bytes[bytes.count - 1] ^= 0x01 }  // a flipped bit in the body
                try await container.put(ContainerLayout.log(store: store, device: DeviceID(index: device), first: sequence, last: sequence), bytes)
            }
        }
        let (snapshot, dir) = try ApplyBatchTests.snapshot()
        defer { try? FileManager.default.removeItem(at: dir) }
        var replayer = Replayer(snapshot: snapshot, container: container, logger: Logger(label: "test"))
        replayer.pageSize = pageSize
        replayer.batchLimits = (logs: batch, bytes: 1 << 20)
        let report = try await replayer.importOnce()
        var named: [RecordID: String] = [:]
        for (device, clocks) in plan {
            for (i, clock) in clocks.enumerated() {
                var ids = RecordIDGenerator(seed: device &* 1000 &+ UInt64(i + 1))
                named[ids.next(milliseconds: 1_700_000_000_000)] = "\(clock)"
            }
        }
        let order = report.events.compactMap { named[$0.recordID] }
        #expect(order == ["5", "10", "20", "30", "40", "50", "70", "90"])
        #expect(report.failures.map(\.error.code) == [.bodyChecksumMismatch])
        #expect(try snapshot.vector() == [DeviceID(index: 2): 4, DeviceID(index: 3): 2, DeviceID(index: 4): 2])
    }

    @Test func aTornOrRottedCopyIsOwnAndAnotherLogIsNot() {
        let bytes = (0..<256).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        #expect(Replayer.isDamagedCopy(Array(bytes.prefix(100)), of: bytes), "a torn copy")
        var rotted = bytes
        rotted[10] ^= 0x01
        rotted[200] ^= 0x81
        #expect(Replayer.isDamagedCopy(rotted, of: bytes), "three flipped bits")
        var other = bytes
        for i in 16..<other.count { other[i] ^= 0x5A }
        #expect(!Replayer.isDamagedCopy(other, of: bytes), "other bytes throughout")
        #expect(!Replayer.isDamagedCopy(bytes + [0], of: bytes), "longer")
        #expect(!Replayer.isDamagedCopy([1] + Array(bytes.dropFirst(2)), of: bytes), "shorter, not a prefix")
    }
}
