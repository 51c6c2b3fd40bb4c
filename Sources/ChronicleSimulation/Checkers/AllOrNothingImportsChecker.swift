import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// All-or-nothing imports: every device applied every log whole (every
/// sequence of every device ID, current or past), and none has saves left
/// to upload.
struct AllOrNothingImportsChecker: InvariantChecker {
    let invariant = "all-or-nothing imports"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        if try await !state.fullyApplied() { report.violation("imports: some device did not apply every sequence of every device") }
        for (i, s) in state.stores.enumerated() {
            let pending = try s.snapshot.pendingUploadCount()
            if pending > 0 { report.violation("imports: device \(i + 1) still has \(pending) saves not uploaded") }
        }
    }
}
