import Chronicle
import ChronicleContainer
import ChronicleCore
@testable import ChronicleSimulation
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// Every checker can fail: a small calm run quiesces, the checker finds
/// nothing, the state is broken on purpose, and the checker reports it.
@Suite struct InvariantCheckerTests {
    static var small: SimulationOptions {
        var options = SimulationOptions.calm
        options.devices = 3
        options.savesPerDevice = 8
        options.baselineProbability = .never
        return options
    }

    /// What `checker` reports before and after `tamper` breaks the quiesced state of seed 9.
    func reports(_ checker: any InvariantChecker, seed: UInt64 = 9,
                 tamper: @escaping (Simulation) async throws -> Void) async throws -> (before: CheckReport, after: CheckReport) {
        let simulation = Simulation(seed: seed, options: Self.small)
        var before = CheckReport()
        var after = CheckReport()
        simulation.beforeChecks = { sim in
            try await checker.check(sim.quiescedState, &before)
            try await tamper(sim)
            try await checker.check(sim.quiescedState, &after)
        }
        _ = try await simulation.run()
        return (before, after)
    }

    func store(_ sim: Simulation, _ device: Int) -> Store { sim.devices[device].store! }

    /// Puts in account A's container a log of `device`'s sequence 1 that inserts a reading.
    func putLog(_ sim: Simulation, device: DeviceID, label: String) async throws {
        let storeID = store(sim, 0).storeID
        let change = Change(.insert, entity: "Reading", recordID: RecordID(high: 1, low: 1), values: [FieldValue("label", .string(label))])
        let t = Transaction(deviceID: device, sequence: 1, clock: HybridTimestamp(milliseconds: 1, counter: 0),
                            schemaHash: Simulation.schema.hash, changes: [change])
        try await sim.accounts[0].everything.put(ContainerLayout.log(store: storeID, device: device, first: 1, last: 1),
                                                 try LogEncoder(storeID: storeID).encode([t]))
    }

    @Test func convergenceFailsWhenADeviceHoldsAnotherState() async throws {
        let (before, after) = try await reports(ConvergenceChecker()) { sim in
            try await store(sim, 0).write { tx in _ = tx.insert("Reading", ["label": "only on device 1"]) }
        }
        #expect(before.violations.isEmpty, "\(before.violations)")
        #expect(after.violations.count == 2)
        #expect(after.violations.first?.hasPrefix("convergence: devices hold 2 different states") == true)
        #expect(after.violations.last?.hasPrefix("convergence: device 1 alone shows Reading ") == true, "the record it alone holds is named")
    }

    @Test func orderIndependenceFailsWhenTheContainerLacksADevicesLogs() async throws {
        let (before, after) = try await reports(OrderIndependenceChecker()) { sim in
            let container = sim.accounts[0].everything
            let prefix = ContainerLayout.logPrefix(store: store(sim, 0).storeID, device: DeviceID(index: 2))
            let logs = try await container.listAll(prefix: prefix)
            #expect(!logs.isEmpty)
            for blob in logs { try await container.delete(blob.name) }
        }
        #expect(before.violations.isEmpty, "\(before.violations)")
        #expect(after.violations.first?.hasPrefix("order independence: a fresh replay gives") == true, "\(after.violations)")
    }

    /// A second log of device 1's sequence 1 with other contents (as a twin
    /// would write) is refused by the container, so the checker, which
    /// names such conflicts for backends that cannot refuse them, finds none.
    @Test func aConflictingLogOfASequenceIsRefused() async throws {
        let (_, after) = try await reports(OrderIndependenceChecker()) { sim in
            let refused = await #expect(throws: ChronicleError.self) {
                try await putLog(sim, device: DeviceID(index: 1), label: "twin")
            }
            #expect(refused?.code == .blobConflict)
        }
        #expect(after.violations.isEmpty, "\(after.violations)")
    }

    @Test func noAcknowledgedSaveLostFailsWhenNoDeviceHoldsASave() async throws {
        let (before, after) = try await reports(NoAcknowledgedSaveLostChecker()) { sim in
            // The ledger holds a save at a version no device applied.
            let s = store(sim, 0)
            let note = try #require(try await s.read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Note") })
            sim.ledger.acknowledged([.init(kind: .update, entity: "Note", id: note, fields: ["words"])],
                                    clock: HybridTimestamp(milliseconds: Simulation.epochMilliseconds + 10_000_000, counter: 0),
                                    device: DeviceID(index: 1), sequence: 999, account: 0, store: s.storeID)
        }
        #expect(before.violations.isEmpty, "\(before.violations)")
        #expect(after.violations.count == 3, "one per device: \(after.violations)")
        #expect(after.violations.allSatisfy { $0.hasPrefix("lost: device") && $0.contains(".words at ") && $0.contains("older than acknowledged") })
    }

    @Test func allOrNothingImportsFailsOnSavesNotUploaded() async throws {
        let (before, after) = try await reports(AllOrNothingImportsChecker()) { sim in
            try await store(sim, 1).write { tx in _ = tx.insert("Reading", ["label": "not uploaded"]) }
        }
        #expect(before.violations.isEmpty, "\(before.violations)")
        #expect(after.violations.count == 2)
        #expect(after.violations.first?.hasPrefix("imports: not every device applied every sequence of every device: device 1 has ") == true, "\(after.violations)")
        #expect(after.violations.last == "imports: device 2 still has 1 saves not uploaded")
    }

    /// A log in the container from a device ID no device uses any more (as
    /// one whose files went back in time leaves) must be applied too.
    @Test func allOrNothingImportsFailsOnALogOfAPastDeviceIDNobodyApplied() async throws {
        let (_, after) = try await reports(AllOrNothingImportsChecker()) { sim in
            try await putLog(sim, device: DeviceID(index: 77), label: "from a past ID")
        }
        #expect(after.violations == ["imports: not every device applied every sequence of every device: device 1 has 0 of \(DeviceID(index: 77))'s sequences, the container and devices 1"])
    }

    @Test func accountsStayApartFailsWhenASaveOfAccountBShowsInA() async throws {
        let (before, after) = try await reports(AccountsStayApartChecker()) { sim in
            let s = store(sim, 0)
            let folder = try #require(try await s.read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Folder") })
            sim.ledger.acknowledged([.init(kind: .insert, entity: "Folder", id: folder, fields: ["name"])], clock: .zero,
                                    device: DeviceID(index: 1), sequence: 1, account: 1, store: s.storeID)
        }
        #expect(before.violations.isEmpty, "\(before.violations)")
        #expect(after.violations.count == 1)
        #expect(after.violations.first?.hasPrefix("accounts: Folder") == true)
    }

    /// A baseline that does not hold the devices' state (published by a
    /// device that saw something else) makes a new device disagree.
    @Test func newDeviceFromBaselineFailsOnABaselineOfAnotherState() async throws {
        let (before, after) = try await reports(NewDeviceFromBaselineChecker()) { sim in
            let storeID = store(sim, 0).storeID
            let side = InMemoryContainer()
            _ = try await side.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: storeID))
            let rogue = try await Store.open(Store.Configuration(
                schema: Simulation.schema, deviceID: DeviceID(index: 77), directory: sim.root.appendingPathComponent("rogue"),
                container: side, clock: sim.clock, seed: 5, logger: sim.logger, durability: .normal, knownStore: storeID))
            try await rogue.write { tx in _ = tx.insert("Reading", ["label": "rogue"]) }
            sim.clock.advance(byMilliseconds: 1_000)
            try await rogue.publishBaseline()
            try await rogue.close()
            for blob in try await side.listAll(prefix: ContainerLayout.baselinesPrefix(store: storeID)) {
                try await sim.accounts[0].everything.put(blob.name, try await side.get(blob.name))
            }
        }
        #expect(before.violations.isEmpty, "\(before.violations)")
        #expect(after.newDeviceStartedFromBaseline)
        #expect(after.violations.first?.hasPrefix("baseline: a new device reaches") == true, "\(after.violations)")
    }

    @Test func boundedMemoryFailsAboveItsLimit() async throws {
        let (before, _) = try await reports(BoundedMemoryChecker()) { _ in }
        #expect(before.violations.isEmpty)
        let (_, after) = try await reports(BoundedMemoryChecker(limitBytes: 1 << 20)) { _ in }
        #expect(after.violations.first?.hasPrefix("memory: resident size") == true)
        #expect(after.violations.first?.hasSuffix("exceeds 1 MiB") == true, "\(after.violations)")
    }

    @Test func aReportKeepsAtMostTwentyViolations() {
        var report = CheckReport()
        for i in 0..<30 { report.violation("v\(i)") }
        #expect(report.violations.count == CheckReport.limit)
        #expect(report.violations.last == "v19")
    }

    /// Every checker of the standard list runs, in the order summaries list them.
    @Test func summariesListEveryInvariant() async throws {
        let summary = try await Simulation(seed: 9, options: Self.small).run()
        #expect(summary.passed, "\(summary.violations)")
        #expect(summary.invariantsChecked == [
            "convergence", "order independence (fresh replay)", "no acknowledged save lost", "all-or-nothing imports",
            "accounts stay apart", "a new device from a baseline agrees", "no device needs a removed log", "bounded memory",
        ])
    }
}
