import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import GRDB

/// (l) Container bytes over a long run, with compaction.
extension MacroBench {
    /// Three devices save and sync in rounds; every tenth round one of them
    /// publishes a baseline and another compacts. At the end, the bytes the
    /// container holds (every file of the store: logs, baselines, markers)
    /// against the bound compaction aims at: the newest baseline's parts
    /// plus the logs after its vector.
    func compactionBytes() async throws -> [Target] {
        let rounds = max(20, Int(200 * scale))
        let dir = fresh("compaction")
        let root = dir.appendingPathComponent("container")
        let container = try DirectoryContainer(root: root, create: true)
        var stores: [Store] = []
        for device in 1...3 { stores.append(try await store(dir, container: container, device: UInt64(device), durability: .normal)) }
        var rng = SeededRandom(seed: 17)
        var written = 0
        var compactions = 0
        var removedLogs = 0
        for round in 0..<rounds {
            for (i, store) in stores.enumerated() {
                // A few saves of 1 to 10 records each, then a sync.
                for save in 0..<5 {
                    let count = 1 + Int(rng.next() % 10)
                    let rows = Self.rows(count, seed: UInt64(round * 97 + i * 13 + save), start: written)
                    written += count
                    try await store.write { tx in
                        for r in rows { tx.insert("Item", r.values, id: r.id) }
                    }
                }
                try await store.sync()
            }
            if round % 10 == 9 {
                _ = try await stores[round % 3].publishBaseline()
                for store in stores { try await store.sync() }
                let report = try await stores[(round + 1) % 3].compact(retention: .seconds(3_600))
                if report.removedLogs > 0 { compactions += 1 }
                removedLogs += report.removedLogs
            }
        }
        for store in stores { try await store.sync() }
        let storeID = stores[0].storeID
        // What the bound counts: the newest baseline, and the logs after it.
        let baselines = try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: storeID))
        let newest = baselines.compactMap { blob in ContainerLayout.parseBaselinePart(blob.name).map { p in
            (ContainerLayout.baselinePrefix(store: p.store, clock: p.clock, device: p.device, vector: p.vector), blob) } }
        guard let newestPrefix = newest.map(\.0).max() else { throw ChronicleError(.applyFailed, "compaction: no baseline in the container") }
        let horizon = try await container.readMarker(ContainerLayout.compaction(store: storeID), as: CompactionHorizon.self)?.payload
        let covered = horizon?.baseline == newestPrefix ? horizon?.vector ?? [:] : [:]
        let baselineBytes = newest.filter { $0.0 == newestPrefix }.reduce(0) { $0 + $1.1.size }
        let logs = try await container.listAll(prefix: ContainerLayout.logsPrefix(store: storeID))
        let laterLogBytes = logs.filter { blob in ContainerLayout.parseLog(blob.name).map { $0.last > (covered[$0.device] ?? 0) } ?? false }.reduce(0) { $0 + $1.size }
        // What the container holds: every file of the store, markers (and
        // their lock files) included.
        var total = 0
        for folder in ["blobs", "markers"] {
            let url = root.appendingPathComponent(folder).appendingPathComponent(storeID.description)
            // Regular files: what a sync service copies (folders are not counted).
            if let walk = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey]) {
                for case let file as URL in walk {
                    guard let values = try? file.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey]), values.isRegularFile == true else { continue }
                    total += values.fileSize ?? 0
                }
            }
        }
        let allLogBytes = logs.reduce(0) { $0 + $1.size }
        // Each device's outbox: the bodies it keeps, against those of its
        // saves after the compaction's vector (what it may still put back).
        var kept = 0, needed = 0, dropped = 0, keptSaves = 0
        for store in stores {
            let through = Int64(clamping: (horizon?.vector ?? [:])[store.deviceID] ?? 0)
            let sums: [Int] = try await store.read { db in
                let row = try GRDB.Row.fetchOne(db, sql: """
                    SELECT COALESCE(SUM(length(body)), 0), COALESCE(SUM(CASE WHEN sequence > ? THEN length(body) ELSE 0 END), 0),
                           COALESCE(SUM(CASE WHEN length(body) = 0 THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN length(body) > 0 THEN 1 ELSE 0 END), 0)
                    FROM _chronicle_outbox
                    """, arguments: [through])
                return (0..<4).map { row?[$0] ?? 0 }
            }
            kept += sums[0]
            needed += sums[1]
            dropped += sums[2]
            keptSaves += sums[3]
        }
        for store in stores { try await store.close() }
        let bound = baselineBytes + laterLogBytes
        let detail = String(format: "3 devices, %d rounds of 5 saves of 1 to 10 records each (%d records), a baseline and a compaction every 10 rounds (%d of them removed %d logs in all): the container holds %.1f KB (logs %.1f KB, baselines %.1f KB, markers the rest); the newest baseline is %.1f KB and the logs after it %.1f KB",
                            rounds, written, compactions, removedLogs, Double(total) / 1e3, Double(allLogBytes) / 1e3,
                            Double(baselines.reduce(0) { $0 + $1.size }) / 1e3, Double(baselineBytes) / 1e3, Double(laterLogBytes) / 1e3)
        log("(l) compaction: \(detail)")
        let outboxDetail = String(format: "the 3 outboxes keep %.1f KB of bodies for %d saves; the bodies of %d saves the compaction covers were dropped; the saves after the compaction's vector hold %.1f KB",
                                  Double(kept) / 1e3, keptSaves, dropped, Double(needed) / 1e3)
        log("(l) outboxes: \(outboxDetail)")
        return [Target(name: "container bytes after a long run vs newest baseline + later logs", measured: Double(total) / Double(bound),
                       limit: 1.1, lowerIsBetter: true, detail: detail),
                Target(name: "outbox bytes after a long run vs bodies of the saves after the compaction", measured: Double(kept) / Double(max(1, needed)),
                       limit: 1.1, lowerIsBetter: true, detail: outboxDetail)]
    }
}
