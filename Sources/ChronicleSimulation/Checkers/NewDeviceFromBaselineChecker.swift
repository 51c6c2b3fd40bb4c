import Chronicle

/// A new device from a baseline agrees: a device that opens on account A's
/// container starts from the newest intact baseline (if any), imports the
/// logs after it, and reaches the devices' state.
struct NewDeviceFromBaselineChecker: InvariantChecker {
    let invariant = "a new device from a baseline agrees"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let stores = state.stores
        let expected = try await stores[0].stateHash()
        let joiner = try await Store.open(Store.Configuration(
            schema: Simulation.schema, deviceID: DeviceID(index: 998), directory: state.workDirectory.appendingPathComponent("joiner"),
            container: state.container.everything, clock: state.clock, seed: 2, logger: state.logger, durability: .normal,
            knownStore: stores[0].storeID))
        let joined = try await joiner.importLogs()
        report.newDeviceStartedFromBaseline = joined.baseline != nil
        let joinerHash = try await joiner.stateHash()
        try await joiner.close()
        if joinerHash != expected {
            report.violation("baseline: a new device reaches \(joinerHash) (baseline: \(joined.baseline.map { "\($0.parts) parts by \($0.device)" } ?? "none")), devices \(expected)")
        }
    }
}
