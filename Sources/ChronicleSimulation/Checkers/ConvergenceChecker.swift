import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// Convergence: every device's state hash is equal.
struct ConvergenceChecker: InvariantChecker {
    let invariant = "convergence"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let stores = state.stores
        var hashes: [String] = []
        for s in stores { hashes.append(try await s.stateHash()) }
        if Set(hashes).count != 1 {
            report.violation("convergence: devices hold \(Set(hashes).count) different states: \(hashes.joined(separator: " "))")
        }
        report.stateHash = hashes[0]
        report.records = try stores[0].snapshot.recordCounts()
    }
}
