import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging

/// One invariant, checked once the run has quiesced.
///
/// A checker reads the quiesced devices, their containers and the
/// acknowledgement ledger, and reports what breaks its invariant; it never
/// changes the devices' state. To add one: a type here and an entry in
/// ``InvariantCheckers/standard`` (its ``invariant`` joins every summary's
/// list of invariants checked).
protocol InvariantChecker: Sendable {
    /// The invariant's name, as summaries list it.
    var invariant: String { get }
    /// Reports every violation found (and what the summary shows of the
    /// final state) into `report`.
    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws
}

enum InvariantCheckers {
    /// Every invariant, in the order the summary lists them.
    static let standard: [any InvariantChecker] = [
        ConvergenceChecker(),
        OrderIndependenceChecker(),
        NoAcknowledgedSaveLostChecker(),
        LocalDataReachesCloudChecker(),
        AllOrNothingImportsChecker(),
        AccountsStayApartChecker(),
        NewDeviceFromBaselineChecker(),
        CompactionChecker(),
        BoundedMemoryChecker(),
    ]
}

/// What the checkers see after quiescence: every device on account A with
/// its store open, both accounts' containers, every acknowledged save.
struct QuiescedState {
    let devices: [SimulatedDevice]
    let accounts: [SimulatedContainer]
    let ledger: AcknowledgementLedger
    let clock: ManualClock
    /// Where checkers may open stores of their own.
    let workDirectory: URL
    let logger: Logger
    /// With the lifecycle: what became of account A's stores, the logs a
    /// store deleted on purpose held as it went, and which records merges
    /// found under another ID (see ``StoreManager/MergeReport/duplicates``).
    var fates: [StoreID: StoreFate] = [:]
    var deletedStoreLogs: [StoreID: Set<LogKey>] = [:]
    var deletedStoreSaves: [StoreID: [RecordID: Set<HybridTimestamp>]] = [:]
    var duplicates: [RecordID: RecordID] = [:]
    var hiddenBeforeMoves: Set<RecordID> = []
    var deletedWithStore: [RecordID: UInt64] = [:]
    var deletedStoreVersions: [StoreID: [RecordID: Snapshot.RecordVersions]] = [:]
    var deletedAt: [StoreID: UInt64] = [:]
    var firstEnableRecords: [Int: [(entity: String, id: RecordID)]] = [:]
    /// Whether the run has corruption faults (``SimulationOptions/corruption``).
    var corruption = false
    /// Whether the run's devices upgraded their schema (``SimulationOptions/upgrades``).
    var upgrades = false

    /// The schema every device ends on.
    var schema: Schema { Workload.finalSchema(upgrades: upgrades) }

    var stores: [Store] {
        devices.map { d in
            guard let store = d.store else { preconditionFailure("device \(d.number) has no open store after quiescence") }
            return store
        }
    }

    /// Account A's container.
    var container: SimulatedContainer { accounts[0] }

    /// Opens a store of a device that joins account A's store now, in a
    /// folder of its own (never one a checker used before), runs `body` on
    /// it, then closes it and removes its folder.
    func withNewDevice<T>(_ device: DeviceID, container: any Container, _ body: (Store) async throws -> T) async throws -> T {
        let directory = workDirectory.appendingPathComponent("checker-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = Store.Configuration(
            schema: schema, deviceID: device, directory: directory, container: container, clock: clock,
            seed: 1, logger: logger, durability: .normal, knownStore: stores[0].storeID).waitingForBaselines(.zero)
        // It learns earlier versions from the store's record of them.
        let store = try await Store.open(configuration)
        do {
            let result = try await body(store)
            try await store.close()
            return result
        } catch {
            try? await store.close()
            throw error
        }
    }

    /// Whether every device applied every sequence of every device: those
    /// the devices made under their current IDs and every log the container
    /// holds (under any ID, current or past).
    func fullyApplied() async throws -> Bool {
        try await unapplied() == nil
    }

    /// The first device, device ID and sequences it lacks, if any device
    /// did not apply every sequence (see ``fullyApplied()``).
    func unapplied() async throws -> String? {
        let stores = self.stores
        var latest = try await StoreLogs.latest(container.everything, store: stores[0].storeID)
        for s in stores {
            let device = SimulatedDevice.deviceID(of: s)
            latest[device] = max(latest[device] ?? 0, try s.snapshot.vector()[device] ?? 0)
        }
        for s in stores {
            let vector = try s.snapshot.vector()
            for (device, sequence) in latest where (vector[device] ?? 0) != sequence {
                return "device \(stores.firstIndex { $0 === s }! + 1) has \(vector[device] ?? 0) of \(device)'s sequences, the container and devices \(sequence)"
            }
        }
        return nil
    }
}

/// What the checks found, and what the summary shows of the final state.
struct CheckReport {
    /// At most ``limit`` violations are kept.
    static let limit = 20
    private(set) var violations: [String] = []
    var stateHash = ""
    var records: [String: Int] = [:]
    var newDeviceStartedFromBaseline = false

    mutating func violation(_ text: String) {
        if violations.count < Self.limit { violations.append(text) }
    }
}
