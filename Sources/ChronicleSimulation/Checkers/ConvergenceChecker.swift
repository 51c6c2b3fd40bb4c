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
            // Where the first two differing devices part: records one shows and the other does not.
            if let other = hashes.firstIndex(where: { $0 != hashes[0] }) {
                let a = try await Self.visibleRecords(stores[0]), b = try await Self.visibleRecords(stores[other])
                let onlyA = a.subtracting(b).sorted().prefix(3), onlyB = b.subtracting(a).sorted().prefix(3)
                report.violation("convergence: device 1 alone shows \(onlyA.isEmpty ? "nothing" : onlyA.joined(separator: ", ")); device \(other + 1) alone shows \(onlyB.isEmpty ? "nothing" : onlyB.joined(separator: ", "))")
            }
        }
        report.stateHash = hashes[0]
        report.records = try stores[0].snapshot.recordCounts()
    }

    /// "Entity id" of every record a store shows.
    static func visibleRecords(_ store: Store) async throws -> Set<String> {
        Set(try await visibleRecordIDs(store).map { "\($0.entity) \($0.id)" })
    }

    /// Every record a store shows, by entity.
    static func visibleRecordIDs(_ store: Store) async throws -> [(entity: String, id: RecordID)] {
        try await store.read { db in
            try store.snapshot.schema.entities.flatMap { entity in
                try RecordID.fetchAll(db, sql: "SELECT id FROM \(entity.name.quotedDatabaseIdentifier)").map { (entity.name, $0) }
            }
        }
    }
}
