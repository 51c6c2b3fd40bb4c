import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// With the lifecycle: every device ends with the cloud on, having merged
/// its local store into it, so every record its local store shows is known
/// to the store they all end on: under its own ID, or under the record a
/// merge found with the same unique key, or gone with a store deleted on
/// purpose. This is where several devices that turned the cloud on at the
/// same moment, each with its own data, are seen to end on one store that
/// holds everyone's.
struct LocalDataReachesCloudChecker: InvariantChecker {
    let invariant = "local data reaches the cloud store"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        guard state.devices.contains(where: \.lifecycle) else { return }
        let final = state.stores[0].snapshot
        for (i, d) in state.devices.enumerated() {
            guard let local = try NoAcknowledgedSaveLostChecker.localStore(of: d) else { continue }
            defer { try? local.close() }
            for entity in Workload.schema.entities {
                let ids = try await local.databasePool.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM \(entity.name.quotedDatabaseIdentifier)") }
                for id in ids where try !Self.known(id, entity: entity.name, in: final, state) {
                    report.violation("local data: device \(i + 1)'s local \(entity.name) \(id) is not in the cloud store every device ends on")
                }
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
        return state.deletedWithStore[id] != nil || state.hiddenBeforeMoves.contains(id)
    }
}
