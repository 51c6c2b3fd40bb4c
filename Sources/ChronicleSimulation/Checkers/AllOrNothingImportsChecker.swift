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
        if let missing = try await state.unapplied() { report.violation("imports: not every device applied every sequence of every device: \(missing)") }
        for (i, s) in state.stores.enumerated() {
            let pending = try s.snapshot.pendingUploadCount()
            if pending > 0 { report.violation("imports: device \(i + 1) still has \(pending) saves not uploaded") }
        }
    }
}
