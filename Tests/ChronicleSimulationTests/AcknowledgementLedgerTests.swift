import Chronicle
import ChronicleContainer
import ChronicleCore
@testable import ChronicleSimulation
import ChronicleSnapshot
import GRDB
import Testing

@Suite struct AcknowledgementLedgerTests {
    let store = StoreID(RecordID(high: 9, low: 9))
    let other = StoreID(RecordID(high: 8, low: 8))
    let old = DeviceID(index: 1)
    let new = DeviceID(index: 42)

    func ledger() -> AcknowledgementLedger {
        var ledger = AcknowledgementLedger()
        for sequence in UInt64(1)...4 {
            ledger.acknowledged([.init(kind: .insert, entity: "Reading", id: RecordID(high: 1, low: sequence), fields: ["label"])],
                                clock: HybridTimestamp(milliseconds: 1_000 + sequence, counter: 0), device: old, sequence: sequence,
                                account: 0, store: store)
        }
        ledger.acknowledged([.init(kind: .delete, entity: "Note", id: RecordID(high: 2, low: 2), fields: [])],
                            clock: HybridTimestamp(milliseconds: 5_000, counter: 0), device: old, sequence: 3, account: 1, store: other)
        return ledger
    }

    /// Re-submitted saves keep their clock and take the new device and
    /// sequence; the others stay where they were.
    @Test func resubmittedRetargetsOnlyTheMappedSaves() {
        var ledger = ledger()
        ledger.resubmitted(old: old, new: new, sequences: [(old: 3, new: 1), (old: 4, new: 2)], in: store)
        let entries = ledger.entries(account: 0)
        #expect(entries.map(\.device) == [old, old, new, new])
        #expect(entries.map(\.sequence) == [1, 2, 1, 2])
        #expect(entries[2].version == Version(clock: HybridTimestamp(milliseconds: 1_003, counter: 0), device: new))
        // The other store's sequence 3 is another save.
        #expect(ledger.entries(account: 1).map(\.device) == [old])
    }

    @Test func resubmittedInEveryStoreWhenNoneIsNamed() {
        var ledger = ledger()
        ledger.resubmitted(old: old, new: new, sequences: [(old: 3, new: 7)])
        #expect(ledger.entries.filter { $0.device == new }.map(\.sequence) == [7, 7])
    }
}
