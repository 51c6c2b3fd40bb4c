import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot

/// No device needs a removed log: once the run has quiesced, every device
/// has applied at least what the store's compaction marker says was
/// removed, from the logs before they went or from the baseline that
/// stands for them, and that baseline is whole in the container (a device
/// that joins, or comes back, can still get every removed save).
struct CompactionChecker: InvariantChecker {
    let invariant = "no device needs a removed log"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let stores = state.stores
        let storeID = stores[0].storeID
        guard let horizon = try await state.container.everything.readMarker(ContainerLayout.compaction(store: storeID), as: CompactionHorizon.self)?.payload
        else { return }
        for (i, store) in stores.enumerated() where store.storeID == storeID {
            let vector = try store.snapshot.vector()
            for (device, covered) in horizon.vector where (vector[device] ?? 0) < covered {
                report.violation("device \(i + 1) applied device \(device) through \(vector[device] ?? 0), but compaction removed its logs through \(covered)")
            }
        }
        let parts = try await state.container.everything.listAll(prefix: horizon.baseline).compactMap { ContainerLayout.parseBaselinePart($0.name)?.part }.sorted()
        if parts.isEmpty || parts != Array(1...UInt64(parts.count)) {
            report.violation("the baseline that stands for the compacted logs, \(horizon.baseline), is not whole in the container (parts \(parts))")
        }
    }
}
