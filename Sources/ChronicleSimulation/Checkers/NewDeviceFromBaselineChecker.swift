import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// A new device from a baseline agrees: a device that opens on account A's
/// container starts from the newest intact baseline (if any), imports the
/// logs after it, and reaches the devices' state.
struct NewDeviceFromBaselineChecker: InvariantChecker {
    let invariant = "a new device from a baseline agrees"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let stores = state.stores
        let expected = try await stores[0].stateHash()
        let (joined, joinerHash) = try await state.withNewDevice(DeviceID(index: 998), container: state.container.everything) { joiner in
            (try await joiner.importLogs(), try await joiner.stateHash())
        }
        report.newDeviceStartedFromBaseline = joined.baseline != nil
        if joinerHash != expected {
            report.violation("baseline: a new device reaches \(joinerHash) (baseline: \(joined.baseline.map { "\($0.parts) parts by \($0.device)" } ?? "none")), devices \(expected)")
        }
    }
}
