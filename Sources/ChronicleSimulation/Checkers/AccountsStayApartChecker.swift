import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// Accounts stay apart: nothing saved under account B is known in account A.
struct AccountsStayApartChecker: InvariantChecker {
    let invariant = "accounts stay apart"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let store = state.stores[0]
        for ack in state.ledger.entries(account: 1) where try store.snapshot.recordVersions(entity: ack.entity, id: ack.id) != nil {
            report.violation("accounts: \(ack.entity) \(ack.id) saved under account B appears in account A")
        }
    }
}
