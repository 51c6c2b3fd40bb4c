import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// Accounts stay apart: nothing saved under account B is known in account A
/// (saves to a device's local store belong to no account).
struct AccountsStayApartChecker: InvariantChecker {
    let invariant = "accounts stay apart"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let store = state.stores[0]
        // A local store belongs to the device, not to an account.
        for ack in state.ledger.entries(account: 1) where ack.place != .local {
            guard try store.snapshot.recordVersions(entity: ack.entity, id: ack.id) != nil else { continue }
            report.violation("accounts: \(ack.entity) \(ack.id) saved under account B appears in account A")
        }
    }
}
