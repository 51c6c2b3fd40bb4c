import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// With the lifecycle: the devices that turned the cloud on at the same
/// moment, first, each brought its local data (merged, the default), so
/// every record its local store held then is known to the store every
/// device ends on: under its own ID, or under the record a merge found with
/// the same unique key, or removed since by an acknowledged save, or gone
/// with a store deleted on purpose (or carried back from it to the local
/// store, when the container never got it), or gone with the local store
/// when the device deleted that on purpose before the merge was done. This is where several devices turning
/// the cloud on at once, each with its own data, are seen to end on one
/// store that holds everyone's.
struct LocalDataReachesCloudChecker: InvariantChecker {
    let invariant = "local data reaches the cloud store"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let final = state.stores[0].snapshot
        for (index, records) in state.firstEnableRecords.sorted(by: { $0.key < $1.key }) {
            for (entity, id) in records where try !Self.known(id, entity: entity, in: final, state) {
                let local = try NoAcknowledgedSaveLostChecker.localStore(of: state.devices[index], state)
                let there = try local?.recordVersions(entity: entity, id: id)
                try local?.close()
                // Brought into a store that was then deleted on purpose before
                // the container had it: carried back to the local store, where
                // it stays if the device later turned the cloud on leaving its
                // local data local.
                if !state.deletedAt.isEmpty, let there, there.inserted, there.deleteVersion == nil { continue }
                // The device deleted its local store on purpose before the
                // merge reached the store: what it held went with it.
                if there == nil, state.devices[index].deletedLocalStore { continue }
                report.violation("local data: device \(index + 1)'s local \(entity) \(id), brought when it turned the cloud on, is not in the store every device ends on"
                                 + (there.map { " (its local store \($0.deleteVersion != nil ? "deleted it" : "still has it"))" } ?? " (its local store no longer knows it)"))
            }
        }
    }

    static func known(_ id: RecordID, entity: String, in snapshot: Snapshot, _ state: QuiescedState) throws -> Bool {
        var id = id
        for _ in 0..<16 {
            if let versions = try snapshot.recordVersions(entity: entity, id: id), versions.inserted || versions.deleteVersion != nil { return true }
            guard let other = state.duplicates[id] else { break }
            id = other
        }
        return state.ledger.removed[id] != nil || state.deletedWithStore[id] != nil || state.hiddenBeforeMoves.contains(id)
    }
}
