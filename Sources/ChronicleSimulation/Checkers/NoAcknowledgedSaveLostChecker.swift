import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// No acknowledged save lost: for every save on account A that returned
/// success, every device holds each field it wrote at the save's version or
/// a newer one, has seen its insert, and each delete at its version or newer
/// (the save is there, or superseded by a write that wins the merge order).
struct NoAcknowledgedSaveLostChecker: InvariantChecker {
    let invariant = "no acknowledged save lost"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let stores = state.stores
        let none = Version(clock: .zero, device: DeviceID(index: 0))
        for ack in state.ledger.entries(account: 0) {
            for (i, s) in stores.enumerated() {
                guard let v = try s.snapshot.recordVersions(entity: ack.entity, id: ack.id) else {
                    report.violation("lost: device \(i + 1) knows nothing of \(ack.entity) \(ack.id) (\(ack.kind) at \(ack.version))")
                    continue
                }
                switch ack.kind {
                case .insert, .update:
                    if ack.kind == .insert && !v.inserted { report.violation("lost: device \(i + 1) never applied the insert of \(ack.entity) \(ack.id)") }
                    for f in ack.fields where (v.fields[f] ?? none) < ack.version {
                        report.violation("lost: device \(i + 1) holds \(ack.entity) \(ack.id).\(f) older than acknowledged \(ack.version)")
                    }
                case .delete:
                    if (v.deleteVersion ?? none) < ack.version {
                        report.violation("lost: device \(i + 1) missed the delete of \(ack.entity) \(ack.id) at \(ack.version)")
                    }
                }
            }
        }
    }
}
