import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// Accounts stay apart: nothing saved under account B is known in account A.
///
/// A record B inserted must be unknown in A, and no value or delete B wrote
/// may be held in A (a record can be in both accounts when it came from the
/// device's local store, which belongs to no account: then B's writes to it
/// must still stay in B).
struct AccountsStayApartChecker: InvariantChecker {
    let invariant = "accounts stay apart"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let store = state.stores[0]
        for ack in state.ledger.entries(account: 1) where ack.place != .local {
            guard let versions = try store.snapshot.recordVersions(entity: ack.entity, id: ack.id) else { continue }
            let leaked = ack.kind == .insert || versions.deleteVersion == ack.version
                || ack.fields.contains { versions.fields[$0] == ack.version }
            if leaked {
                report.violation("accounts: \(ack.entity) \(ack.id) saved under account B (\(ack.kind) at \(ack.version)) appears in account A")
            }
        }
    }
}
